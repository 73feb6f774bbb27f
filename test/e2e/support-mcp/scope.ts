/**
 * Which of the conformance suite's server scenarios apply to a fabric's /mcp, and why the others do not: data, so the
 * test, docs/mcp.md and a reader all see the same list. The fabric serves tools only (every node type a tool, every call
 * a run), in both protocol eras.
 *
 * A scenario that applies must pass, every check of it, except the single checks named in `notApplicableChecks`
 * (which test a feature the scenario bundles in, such as prompts/list inside the caching scenario).
 */
export type Revision = "2025-11-25" | "2026-07-28";

export interface Applies {
  applies: true;
  /** A different decision for one revision's run (the same scenario runs once per revision, on that revision's wire). */
  byRevision?: Partial<Record<Revision, Scope>>;
  /** Checks of this scenario that test something a tools-only server does not have, by check id, with the reason. */
  notApplicableChecks?: Record<string, string>;
  /** Run for visibility, reported, but not asserted (extension or pending in the suite itself), with the reason. */
  reportOnly?: string;
}
export interface NotApplicable {
  applies: false;
  reason: string;
}
export type Scope = Applies | NotApplicable;

/** The decision for a scenario in one revision's run. */
export function scopeFor(scope: Scope | undefined, rev: Revision): Scope | undefined {
  return scope?.applies && scope.byRevision?.[rev] ? scope.byRevision[rev] : scope;
}

const NO_SESSIONS =
  "the 2025 era is served without sessions (a server MAY assign an Mcp-Session-Id; session handling applies only when it does), so the suite has no session to exercise";

const NO_CONTENT_BLOCKS =
  "a run's outputs are a JSON object: /mcp answers them as structuredContent and the same JSON in one text block, so a node type cannot return image, audio or embedded-resource content blocks";
const NO_SERVER_TO_CLIENT =
  "the tool asks the client something during the call (sampling, elicitation, roots or an input-required round); a node type's handler runs on an executor and has no channel to the MCP client";
const NO_RESOURCES = "resources: /mcp serves node types as tools, and has no resources";
const NO_PROMPTS = "prompts: /mcp serves node types as tools, and has no prompts";
const NO_LOGGING = "MCP logging (logging/setLevel, notifications/message): a run's logs go to its events and traces, not to the MCP client";
const NO_COMPLETIONS = "completion/complete completes prompt and resource-template arguments; a tools-only server has neither";
const PENDING = (what: string) => `pending in the suite itself (its own reference fixture cannot pass it yet): ${what}`;

/** The server scenarios, by name, as the suite's requirement sets (and their not_scored lists) name them. */
export const SERVER_SCOPE: Record<string, Scope> = {
  // Lifecycle and transport: apply to any server.
  "server-initialize": { applies: true },
  "server-stateless": {
    applies: true,
    notApplicableChecks: {
      "sep-2575-server-rejects-undeclared-capability":
        "needs the diagnostic tool test_missing_capability, which needs a client capability (sampling, elicitation) the caller did not declare; a node type needs none",
      "sep-2575-missing-capability-http-400": "the same diagnostic tool test_missing_capability (the HTTP status of its -32021 error)",
      "sep-2575-http-server-no-independent-requests-on-stream": "needs the diagnostic tool test_streaming_elicitation, which elicits from the client mid-call; a node type cannot",
      "sep-2575-server-no-log-without-loglevel":
        "needs the diagnostic tool test_logging_tool, which sends MCP log messages; /mcp sends none (a run's logs go to its events and traces), so there is nothing to exercise",
    },
  },
  "server-session-lifecycle": { applies: false, reason: `${NO_SESSIONS}: it reports the scenario with no checks (SKIPPED for a stateless server)` },
  ping: { applies: true },
  "server-sse-multiple-streams": {
    applies: true,
    byRevision: {
      "2025-11-25": { applies: false, reason: `${NO_SESSIONS}: its only check is a warning that no session id was given; the 2026-07-28 run covers concurrent POST streams` },
    },
  },
  "dns-rebinding-protection": { applies: true },
  caching: {
    applies: true,
    notApplicableChecks: {
      "sep-2549-prompts-list-caching-hints": NO_PROMPTS,
      "sep-2549-resources-list-caching-hints": NO_RESOURCES,
      "sep-2549-resources-templates-list-caching-hints": NO_RESOURCES,
      "sep-2549-resources-read-caching-hints": NO_RESOURCES,
    },
  },
  // Pending in the suite (its reference fixture cannot pass it), but it applies to any server and /mcp passes it.
  "http-header-validation": { applies: true },
  "http-custom-header-server-validation": {
    applies: true,
    reportOnly: `${PENDING("SEP-2243 custom Mcp-Param headers, exercised with the fixture test_custom_headers (x-mcp-header: Region)")}; /mcp does not validate Mcp-Param headers yet (notes G7)`,
  },
  "server-sse-polling": { applies: false, reason: `${PENDING("SEP-1699 polling")}; it calls test_reconnection, a tool that closes the SSE stream mid-call, which a run cannot do` },

  // Tools: the fixtures in test/e2e/support-mcp/conformance-handlers are node types with the names the suite calls.
  "tools-list": { applies: true },
  "tools-call-simple-text": { applies: true },
  "tools-call-error": { applies: true },
  "tools-call-with-progress": { applies: true },
  "json-schema-2020-12": { applies: true },
  "tools-call-image": { applies: false, reason: NO_CONTENT_BLOCKS },
  "tools-call-audio": { applies: false, reason: NO_CONTENT_BLOCKS },
  "tools-call-embedded-resource": { applies: false, reason: NO_CONTENT_BLOCKS },
  "tools-call-mixed-content": { applies: false, reason: NO_CONTENT_BLOCKS },
  "tools-call-with-logging": { applies: false, reason: NO_LOGGING },
  "logging-set-level": { applies: false, reason: NO_LOGGING },
  "completion-complete": { applies: false, reason: NO_COMPLETIONS },
  "tools-call-sampling": { applies: false, reason: NO_SERVER_TO_CLIENT },
  "tools-call-elicitation": { applies: false, reason: NO_SERVER_TO_CLIENT },
  "elicitation-sep1034-defaults": { applies: false, reason: NO_SERVER_TO_CLIENT },
  "elicitation-sep1330-enums": { applies: false, reason: NO_SERVER_TO_CLIENT },

  // Resources and prompts.
  "resources-list": { applies: false, reason: NO_RESOURCES },
  "resources-read-text": { applies: false, reason: NO_RESOURCES },
  "resources-read-binary": { applies: false, reason: NO_RESOURCES },
  "resources-templates-read": { applies: false, reason: NO_RESOURCES },
  "resources-subscribe": { applies: false, reason: NO_RESOURCES },
  "resources-unsubscribe": { applies: false, reason: NO_RESOURCES },
  "sep-2164-resource-not-found": { applies: false, reason: NO_RESOURCES },
  "prompts-list": { applies: false, reason: NO_PROMPTS },
  "prompts-get-simple": { applies: false, reason: NO_PROMPTS },
  "prompts-get-with-args": { applies: false, reason: NO_PROMPTS },
  "prompts-get-embedded-resource": { applies: false, reason: NO_PROMPTS },
  "prompts-get-with-image": { applies: false, reason: NO_PROMPTS },

  // 2026-07-28 input-required results (SEP-2322): every one calls a fixture tool that asks the client for input.
  ...Object.fromEntries(
    [
      "basic-elicitation",
      "basic-sampling",
      "basic-list-roots",
      "request-state",
      "multiple-input-requests",
      "multi-round",
      "missing-input-response",
      "non-tool-request",
      "result-type",
      "unsupported-methods",
      "tampered-state",
      "capability-check",
      "ignore-extra-params",
      "validate-input",
    ].map((s) => [`input-required-result-${s}`, { applies: false, reason: NO_SERVER_TO_CLIENT } satisfies Scope]),
  ),

  // The tasks extension (io.modelcontextprotocol/tasks, SEP-2663): optional by definition and not scored by the suite,
  // but issue 26 asks for it, so every scenario that applies must pass. Fixtures: greet, slow_compute, failing_job.
  "tasks-lifecycle": {
    applies: true,
    notApplicableChecks: { "sep-2663-tasks-get-status-failed": "needs protocol_error_job, a tool that panics into a protocol error; a run ends completed, failed or canceled" },
  },
  "tasks-capability-negotiation": { applies: true },
  "tasks-wire-fields": { applies: true },
  "tasks-request-state-removal": { applies: true },
  "tasks-request-headers": {
    applies: true,
    notApplicableChecks: {
      "tasks-headers-tolerate-mcp-method-on-tools-call":
        'wants greet\'s text block to be exactly "Hello, sep-2243!"; /mcp\'s text block is the run\'s outputs as JSON ({"text":"Hello, sep-2243!"})',
    },
  },
  "tasks-dispatch-and-envelope": {
    applies: true,
    notApplicableChecks: { "tasks-result-type-complete-on-non-task-responses": "needs confirm_delete, a task that parks for elicitation from the client" },
  },
  "tasks-status-notifications": {
    applies: false,
    reason: "the suite skips it itself (SEP-2663 moved notifications/tasks to the subscriptions/listen stream and its harness does not observe that yet)",
  },
  "tasks-required-task-error": {
    applies: false,
    reason:
      'needs failing_job registered with taskSupport "required" (answer -32021 to a client without the extension); /mcp can always await a run, so no tool requires a task ("nodefabric.mcp_task": "always" makes a task at once for a client that declares the extension, and answers the others synchronously)',
  },
  "tasks-mrtr-input": { applies: false, reason: `${NO_SERVER_TO_CLIENT} (test_tool_with_task gathers input before it becomes a task)` },
  "tasks-mrtr-composition": { applies: false, reason: `${NO_SERVER_TO_CLIENT} (input-required rounds composed with tasks)` },
};

export const REVISIONS: Revision[] = ["2025-11-25", "2026-07-28"];

const INTERACTIVE_OAUTH =
  "an OAuth flow driven by discovery (RFC 9728 protected-resource metadata, RFC 8414, authorization code with PKCE, DCR/CIMD, step-up): mcp.call does not log in, it uses credentials the operator holds as executor secrets (a bearer token, headers, or OAuth 2 client credentials at a configured token endpoint)";
const CLIENT_ANSWERS_SERVER =
  "the server asks the client for something mid-call (elicitation, or an input-required result to answer); mcp.call runs unattended on an executor and declares no such capability";

/**
 * The suite's client scenarios, for the client under test: `fabric node-types import --from-mcp` plus runs of the
 * imported tools through mcp.call (support-mcp/conformance-client.mjs).
 */
export const CLIENT_SCOPE: Record<string, Scope> = {
  initialize: { applies: true },
  tools_call: { applies: true },
  "sse-retry": { applies: true },
  "request-metadata": { applies: true },
  "http-standard-headers": { applies: true },
  "http-custom-headers": { applies: true },
  "http-invalid-tool-headers": { applies: true },
  "json-schema-ref-no-deref": { applies: true },
  "json-schema-2020-12-preservation": { applies: true },
  "elicitation-sep1034-client-defaults": { applies: false, reason: CLIENT_ANSWERS_SERVER },
  "sep-2322-client-request-state": { applies: false, reason: CLIENT_ANSWERS_SERVER },
  "auth/client-credentials-jwt": { applies: false, reason: `extension; ${INTERACTIVE_OAUTH}` },
  "auth/client-credentials-basic": { applies: false, reason: `extension; ${INTERACTIVE_OAUTH}` },
  "auth/enterprise-managed-authorization": { applies: false, reason: `extension; ${INTERACTIVE_OAUTH}` },
  "auth/dpop": { applies: false, reason: "extension: DPoP-bound tokens; mcp.call sends bearer tokens" },
  "auth/dpop-nonce": { applies: false, reason: "extension: DPoP-bound tokens; mcp.call sends bearer tokens" },
  "auth/wif-jwt-bearer": { applies: false, reason: `extension; ${INTERACTIVE_OAUTH}` },
};

/** Every auth/* scenario a requirement set names but CLIENT_SCOPE does not: the same reason. */
export function clientScope(scenario: string): Scope | undefined {
  return CLIENT_SCOPE[scenario] ?? (scenario.startsWith("auth/") ? { applies: false, reason: INTERACTIVE_OAUTH } : undefined);
}
