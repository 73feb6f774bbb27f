/**
 * What the routes themselves cannot say in an OpenAPI document: a summary, tags, and the answers of each endpoint.
 * Keyed by method and path as the contract writes them (`POST /v1/runs/{run_id}:cancel`; docs/api.md, "How a document
 * is made"), like ROUTE_ACCESS, so the gateway and the coordinator share the words of the endpoints they share.
 * Request schemas are not here: they come from the routes, the schemas fastify validates with. api-docs.ts applies
 * this table to the document only; nothing here changes how a route validates or serializes.
 */
import type { SchemaName } from "@nodefabric/schemas";

/** One answer: a v1 schema by name, or an inline schema (its `$ref`s by v1 `$id`). */
export interface AnswerDoc {
  description: string;
  schema?: SchemaName | Record<string, unknown>;
  /** `application/x-ndjson`: one value of `schema` per line. */
  ndjson?: true;
  /** Response headers worth knowing, by name. */
  headers?: Record<string, string>;
}

export interface RouteDoc {
  operationId: string;
  summary: string;
  tags: readonly string[];
  description?: string;
  /** Success and the errors particular to this endpoint; every 4XX and 5XX is an ErrorEnvelope besides. */
  answers: Readonly<Record<string, AnswerDoc>>;
}

/** The tags, in the order the docs page shows them. */
export const TAGS: ReadonlyArray<{ name: string; description: string }> = [
  { name: "runs", description: "Runs: start, read, follow and cancel them." },
  { name: "node-runs", description: "NodeRuns: the nodes of a run's tree." },
  { name: "approvals", description: "Runs waiting for a person, and their answers." },
  { name: "node-types", description: "The catalogue of node types (the Node Registry)." },
  { name: "executors", description: "The executor directory: which executor serves which node types." },
  { name: "executions", description: "What the coordinator asks of executors." },
  { name: "candidate-sets", description: "Selection: ranked candidates for a subtask." },
  { name: "policy", description: "The Policy Decision Point." },
  { name: "service", description: "Health and version, on every service, without a token." },
];

const PAGE_TOKEN = { "X-Next-Page-Token": "Present when more remain: pass it as `page_token` for the next page." };
const NOT_FOUND_RUN: AnswerDoc = { description: "`run_not_found`: no such run, or one of another tenant.", schema: "error_envelope" };
const NOT_FOUND_NODE_RUN: AnswerDoc = { description: "`node_run_not_found`: no such NodeRun, or one of another tenant's run.", schema: "error_envelope" };
const NOT_FOUND_APPROVAL: AnswerDoc = { description: "`approval_not_found`: no such approval, or one of another tenant's run.", schema: "error_envelope" };
const NOT_FOUND_NODE_TYPE: AnswerDoc = { description: "`node_type_not_found`: no such node type (or version).", schema: "error_envelope" };
const NO_CONTENT: AnswerDoc = { description: "Done; no body." };
const EVENTS: AnswerDoc = {
  description: "The events as NDJSON, one RunEvent per line in `seq` order. With `follow` (the default) the stream stays open until the run's last event.",
  schema: "run_event",
  ndjson: true,
};

/** An entry of the executor directory (an extension, so it has no v1 schema). */
const EXECUTOR_RECORD = {
  type: "object",
  properties: {
    executor_instance_id: { type: "string" },
    endpoint: { type: "string", format: "uri" },
    kind: { $ref: "https://nodefabric.dev/schemas/v1/node_kind.schema.json" },
    node_types: { type: "array", items: { $ref: "https://nodefabric.dev/schemas/v1/node_type_ref.schema.json" } },
    extensions: { $ref: "https://nodefabric.dev/schemas/v1/extensions.schema.json" },
    registered_at: { type: "string", format: "date-time" },
  },
  required: ["executor_instance_id", "endpoint", "kind", "node_types", "registered_at"],
} as const;

const RUN_DOCS: Record<string, RouteDoc> = {
  "POST /v1/runs": {
    operationId: "startRun",
    summary: "Start a run",
    tags: ["runs"],
    description:
      "Starts a run of the root node type with the given input. With `Prefer: wait=<seconds>` (at most 60) the answer waits for the run's end or the time, and `Preference-Applied` says so. A `run_id` the client chose makes the start idempotent.",
    answers: {
      200: { description: "The run, as it is now (or at its end, with `Prefer: wait`).", schema: "run", headers: { "Preference-Applied": "`wait=<seconds>` when the `Prefer: wait` header was honoured." } },
      404: { description: "`unknown_node_type`: the root node type is not published.", schema: "error_envelope" },
      409: { description: "`run_already_exists`: the `run_id` is taken by a run started with another request.", schema: "error_envelope" },
    },
  },
  "GET /v1/runs": {
    operationId: "listRuns",
    summary: "List runs, newest first",
    tags: ["runs"],
    answers: { 200: { description: "One page of runs.", schema: "run_list", headers: PAGE_TOKEN } },
  },
  "GET /v1/runs/{run_id}": {
    operationId: "getRun",
    summary: "Read a run",
    tags: ["runs"],
    answers: { 200: { description: "The run.", schema: "run" }, 404: NOT_FOUND_RUN },
  },
  "POST /v1/runs/{run_id}:cancel": {
    operationId: "cancelRun",
    summary: "Cancel a run",
    tags: ["runs"],
    description: "Idempotent: cancelling a run that has already ended returns it unchanged.",
    answers: { 200: { description: "The run.", schema: "run" }, 404: NOT_FOUND_RUN },
  },
  "GET /v1/runs/{run_id}/node-runs": {
    operationId: "listNodeRuns",
    summary: "List every NodeRun of a run",
    tags: ["node-runs"],
    answers: { 200: { description: "The run's NodeRuns.", schema: "node_run_list" }, 404: NOT_FOUND_RUN },
  },
  "GET /v1/runs/{run_id}/events": {
    operationId: "streamRunEvents",
    summary: "Stream a run's events",
    tags: ["runs"],
    answers: { 200: EVENTS, 404: NOT_FOUND_RUN },
  },
  "GET /v1/node-runs/{node_run_id}": {
    operationId: "getNodeRun",
    summary: "Read a NodeRun",
    tags: ["node-runs"],
    answers: { 200: { description: "The NodeRun.", schema: "node_run" }, 404: NOT_FOUND_NODE_RUN },
  },
  "GET /v1/approvals": {
    operationId: "listApprovals",
    summary: "List approvals, newest first",
    tags: ["approvals"],
    answers: { 200: { description: "One page of approvals.", schema: "approval_list", headers: PAGE_TOKEN } },
  },
  "POST /v1/approvals/{approval_id}:approve": {
    operationId: "approve",
    summary: "Approve a pending approval",
    tags: ["approvals"],
    description: "The NodeRun parked at this approval goes on.",
    answers: { 204: NO_CONTENT, 404: NOT_FOUND_APPROVAL },
  },
  "POST /v1/approvals/{approval_id}:reject": {
    operationId: "reject",
    summary: "Reject a pending approval",
    tags: ["approvals"],
    description: "The NodeRun parked at this approval fails with `approval_rejected`.",
    answers: { 204: NO_CONTENT, 404: NOT_FOUND_APPROVAL },
  },
};

const COORDINATOR_DOCS: Record<string, RouteDoc> = {
  "POST /v1/node-runs": {
    operationId: "createNodeRuns",
    summary: "Create children of a composite NodeRun",
    tags: ["node-runs"],
    answers: {
      200: { description: "The children created.", schema: "node_runs_create_response" },
      409: { description: "`parent_node_run_invalid`, `constraint_violation`, `candidate_binding_violation` or `idempotency_conflict`.", schema: "error_envelope" },
    },
  },
  "GET /v1/node-runs/{node_run_id}/events": {
    operationId: "streamNodeRunEvents",
    summary: "Stream the events of a NodeRun and its descendants",
    tags: ["node-runs"],
    answers: { 200: EVENTS, 404: NOT_FOUND_NODE_RUN },
  },
  "POST /v1/node-runs/{node_run_id}:evaluation": {
    operationId: "reportEvaluation",
    summary: "Report the evaluation of a NodeRun",
    tags: ["node-runs"],
    answers: { 204: NO_CONTENT, 404: NOT_FOUND_NODE_RUN, 409: { description: "`node_run_terminal`: the NodeRun has already ended.", schema: "error_envelope" } },
  },
  "POST /v1/node-runs/{node_run_id}:complete": {
    operationId: "completeNodeRun",
    summary: "Complete a composite NodeRun",
    tags: ["node-runs"],
    answers: { 204: NO_CONTENT, 404: NOT_FOUND_NODE_RUN, 409: { description: "`node_run_terminal`: the NodeRun has already ended.", schema: "error_envelope" } },
  },
  "POST /v1/node-runs/{node_run_id}:checkpoint": {
    operationId: "saveNodeRunCheckpoint",
    summary: "Keep what an atomic execution resumes from (extension)",
    tags: ["node-runs"],
    description:
      "An executor saves `{ checkpoint }` (a JSON object, at most 16 KiB) with the NodeRun's assignment token; it is kept as the NodeRun's `extensions[\"nodefabric.checkpoint\"]` and sent to its next execution.",
    answers: { 204: NO_CONTENT, 404: NOT_FOUND_NODE_RUN, 409: { description: "`node_run_terminal`: the NodeRun is not running.", schema: "error_envelope" } },
  },
  "POST /v1/node-runs/{node_run_id}:progress": {
    operationId: "reportNodeRunProgress",
    summary: "Report the progress of an atomic execution (extension)",
    tags: ["node-runs"],
    description:
      "An executor reports `{ progress, total?, message? }` with the NodeRun's assignment token; it is recorded as a `node_run_progress` event while the NodeRun is running, and dropped otherwise or when reported too often.",
    answers: { 204: NO_CONTENT, 404: NOT_FOUND_NODE_RUN },
  },
  "POST /v1/node-runs/{node_run_id}:output-delta": {
    operationId: "reportNodeRunOutputDelta",
    summary: "Report text an atomic execution wrote, as it came (extension)",
    tags: ["node-runs"],
    description:
      "An executor reports `{ text, index, offset, attempt, truncated? }` (what `ctx.reportOutputDelta` wrote, in order) with the NodeRun's assignment token; it is recorded as a `node_run_output_delta` event while that attempt of the NodeRun is running, once per index, and dropped otherwise or past the per-attempt bounds.",
    answers: { 204: NO_CONTENT, 404: NOT_FOUND_NODE_RUN },
  },
};

const EXECUTOR_DOCS: Record<string, RouteDoc> = {
  "POST /v1/atomic-node-runs:execute": {
    operationId: "executeAtomic",
    summary: "Execute an atomic NodeRun",
    tags: ["executions"],
    description: "Runs the handler of the node type with the inputs. The coordinator sends `Idempotency-Key: <node_run_id>:<attempt>`: a repeat gets the first answer.",
    answers: {
      200: { description: "The result; a handler's failure is a result too (`state: failed`), not an HTTP error.", schema: "atomic_execute_result" },
      404: { description: "`unknown_node_type`: this executor does not serve the node type.", schema: "error_envelope" },
    },
  },
  "POST /v1/atomic-node-runs/{node_run_id}:cancel": {
    operationId: "cancelAtomic",
    summary: "Cancel an atomic NodeRun being executed",
    tags: ["executions"],
    answers: { 204: NO_CONTENT },
  },
  "POST /v1/composite-node-runs:begin": {
    operationId: "beginComposite",
    summary: "Begin a composite NodeRun",
    tags: ["executions"],
    answers: {
      200: { description: "Whether the executor took it on.", schema: "composite_begin_response" },
      404: { description: "`unknown_node_type`: this executor does not serve the node type.", schema: "error_envelope" },
    },
  },
  "POST /v1/composite-node-runs/{node_run_id}:cancel": {
    operationId: "cancelComposite",
    summary: "Cancel a composite NodeRun being driven",
    tags: ["executions"],
    answers: { 204: NO_CONTENT },
  },
};

const REGISTRY_DOCS: Record<string, RouteDoc> = {
  "GET /v1/node-types": {
    operationId: "listNodeTypes",
    summary: "List node types",
    tags: ["node-types"],
    answers: { 200: { description: "One page of node types.", schema: "node_type_list", headers: PAGE_TOKEN } },
  },
  "POST /v1/node-types": {
    operationId: "publishNodeType",
    summary: "Publish a node type version",
    tags: ["node-types"],
    description: "Publishing the same (id, version) again with identical content answers 200; with other content, 409.",
    answers: {
      200: { description: "The node type as stored.", schema: "node_type" },
      409: { description: "`node_type_version_conflict`: this version is published with other content.", schema: "error_envelope" },
    },
  },
  "POST /v1/node-types:batch": {
    operationId: "publishNodeTypes",
    summary: "Publish many node type versions, all or none",
    tags: ["node-types"],
    answers: {
      200: {
        description: "The node types as stored, in the order sent.",
        schema: { type: "object", properties: { node_types: { type: "array", items: { $ref: "https://nodefabric.dev/schemas/v1/node_type.schema.json" } } }, required: ["node_types"] },
      },
      409: { description: "`node_type_version_conflict`: one of them is published with other content (none was stored).", schema: "error_envelope" },
    },
  },
  "GET /v1/node-types/{node_type_id}": {
    operationId: "getNodeType",
    summary: "Read a node type (the latest version, or `version`)",
    tags: ["node-types"],
    answers: { 200: { description: "The node type.", schema: "node_type" }, 404: NOT_FOUND_NODE_TYPE },
  },
  "GET /v1/node-types/{node_type_id}/versions": {
    operationId: "listNodeTypeVersions",
    summary: "List the published versions of a node type",
    tags: ["node-types"],
    answers: { 200: { description: "Its versions.", schema: "node_type_versions" }, 404: NOT_FOUND_NODE_TYPE },
  },
  "PUT /v1/executors/{executor_instance_id}": {
    operationId: "registerExecutor",
    summary: "Enter an executor in the directory",
    tags: ["executors"],
    answers: { 200: { description: "The entry.", schema: EXECUTOR_RECORD, headers: { "X-Executor-Ttl-Ms": "How long the entry stays listed without a heartbeat." } } },
  },
  "POST /v1/executors/{executor_instance_id}:heartbeat": {
    operationId: "heartbeatExecutor",
    summary: "Keep an executor listed",
    tags: ["executors"],
    answers: {
      204: { description: "Still listed.", headers: { "X-Executor-Ttl-Ms": "How long the entry stays listed without a heartbeat." } },
      404: { description: "`route_not_found`: the directory does not hold this executor; register it again.", schema: "error_envelope" },
    },
  },
  "GET /v1/executors": {
    operationId: "listExecutors",
    summary: "List the executors heard from recently",
    tags: ["executors"],
    answers: { 200: { description: "The entries.", schema: { type: "array", items: EXECUTOR_RECORD } } },
  },
};

const SELECTION_AND_PDP_DOCS: Record<string, RouteDoc> = {
  "POST /v1/candidate-sets": {
    operationId: "createCandidateSet",
    summary: "Rank candidates for a subtask",
    tags: ["candidate-sets"],
    answers: { 200: { description: "The candidate set, stored.", schema: "candidate_set" } },
  },
  "GET /v1/candidate-sets/{candidate_set_id}": {
    operationId: "getCandidateSet",
    summary: "Read a candidate set",
    tags: ["candidate-sets"],
    answers: { 200: { description: "The candidate set.", schema: "candidate_set" }, 404: { description: "`candidate_set_not_found`.", schema: "error_envelope" } },
  },
  "POST /v1/policy:decide": {
    operationId: "decide",
    summary: "Decide on an action",
    tags: ["policy"],
    description: "A decision, deny included, is never an HTTP error.",
    answers: { 200: { description: "The decision.", schema: "policy_decision" } },
  },
  "POST /v1/policy:decideBatch": {
    operationId: "decideBatch",
    summary: "Decide on several actions in one request",
    tags: ["policy"],
    description:
      "An extension. Each decision is what `POST /v1/policy:decide` answers for its request, in the order of the requests. A request that breaks its schema refuses the whole batch (400), and nothing is decided.",
    answers: { 200: { description: "One decision per request, in order.", schema: "policy_decision_batch_response" } },
  },
};

const SERVICE_DOCS: Record<string, RouteDoc> = {
  "GET /v1/health": {
    operationId: "health",
    summary: "Health of this service",
    tags: ["service"],
    answers: {
      200: { description: "Up (`ok` or `degraded`).", schema: "health" },
      503: { description: "`unavailable`: the service is down; `details.health` holds the Health.", schema: "error_envelope", headers: { "Retry-After": "Seconds to wait before asking again." } },
    },
  },
  "GET /v1/version": {
    operationId: "version",
    summary: "Name and version of this service",
    tags: ["service"],
    answers: { 200: { description: "The version.", schema: "version_info" } },
  },
};

/** The documentation of every core route, by `METHOD /path` as the contract writes it (docs/api.md). */
export const ROUTE_DOCS: Readonly<Record<string, RouteDoc>> = {
  ...RUN_DOCS,
  ...COORDINATOR_DOCS,
  ...EXECUTOR_DOCS,
  ...REGISTRY_DOCS,
  ...SELECTION_AND_PDP_DOCS,
  ...SERVICE_DOCS,
};
