/**
 * The PDP service: POST /v1/policy:decide answered by Cedar policies loaded once at start, and POST
 * /v1/policy:decideBatch (an extension) answering several questions in one request, each as policy:decide would.
 * docs/pdp.md describes the mapping from a PolicyDecisionRequest to Cedar and how decisions are named.
 */
import type { FastifyInstance } from "fastify";
import type { PolicyDecision, PolicyDecisionBatchRequest, PolicyDecisionBatchResponse, PolicyDecisionRequest } from "@nodefabric/schemas";
import { publish } from "../../observe/channels.js";
import { ATTR, endSpan, tracer, tracingOn } from "../../observe/tracing.js";
import type { ServiceSecurityOptions } from "../../http/auth-plugin.js";
import { createService, type HealthCheck } from "../../http/service.js";
import { invalidRequest } from "../../http/errors.js";
import { ref } from "../../http/validation.js";
import { PDP_API, exposeInProcess } from "../../in-process.js";
import { createDecider, type Decider } from "./decider.js";
import { defaultPolicySet, loadEntitiesFile, loadPolicyFile, type LoadedPolicySet } from "./policy-set.js";

export { PolicyFileError, loadPolicyFile, loadPolicyText, loadEntitiesFile, defaultPolicySet, APPROVAL_ANNOTATION, ID_ANNOTATION, DEFAULT_POLICY_TEXT } from "./policy-set.js";
export type { LoadedPolicySet, PolicyInfo } from "./policy-set.js";
export { createDecider, DEFAULT_DECISION_CACHE_SIZE, type Decider, type DeciderOptions, type DecisionCacheStats } from "./decider.js";
export { analysePolicyReads, type PolicyReads } from "./read-analysis.js";
export { toCedarRequest, entityTypeName, CEDAR_NAMESPACE, RESERVED_CONTEXT_KEYS, type CedarRequest, type DroppedValue } from "./request-mapping.js";

export interface PdpOptions extends ServiceSecurityOptions {
  /** pino options, `false` (the default) to silence. */
  logger?: boolean | Record<string, unknown>;
  /** A Cedar policy text file; without one every action is allowed. */
  policyFile?: string;
  /** A Cedar entities JSON file (array of `{ uid, attrs, parents }`), e.g. group memberships. */
  entitiesFile?: string;
  /** How many Cedar outcomes the decision cache keeps; 0 turns it off. Default 10,000. */
  decisionCacheSize?: number;
}

function policyCheck(set: LoadedPolicySet, fromFile: boolean, entitiesFile: string | undefined, entityCount: number, decider: Decider): HealthCheck {
  const decision_cache = decider.stats().status;
  if (!fromFile) {
    return { name: "policy", status: "ok", message: "no policy file given: the default policy allows every action", details: { source: "default", decision_cache } };
  }
  const n = set.policies.length;
  const details: Record<string, unknown> = { source: set.source, policies: n, decision_cache };
  if (entitiesFile !== undefined) {
    details.entities_source = entitiesFile;
    details.entities = entityCount;
  }
  const message = n === 0
    ? `${set.source} holds no policies: every action is denied`
    : `${n} ${n === 1 ? "policy" : "policies"} loaded from ${set.source}`;
  return { name: "policy", status: "ok", message, details };
}

/**
 * One decision, in a span of its own (`pdp.decide <action>`, with the outcome), and told to observers with the time
 * it took. Deciding is synchronous, so neither costs anything while no SDK and no observer is there.
 */
function decideObserved(decider: Decider, request: PolicyDecisionRequest): PolicyDecision {
  const started = performance.now();
  const span = tracingOn() ? tracer.startSpan(`pdp.decide ${request.action}`, { attributes: { "nodefabric.pdp.action": request.action, [ATTR.runId]: request.run_id, ...(request.node_run_id ? { [ATTR.nodeRunId]: request.node_run_id } : {}) } }) : undefined;
  let decision: PolicyDecision | undefined;
  try {
    decision = decider.decide(request);
    return decision;
  } finally {
    const outcome = decision?.decision ?? "error";
    if (span?.isRecording()) {
      span.setAttribute("nodefabric.pdp.decision", outcome);
      if (decision?.reason_code) span.setAttribute("nodefabric.pdp.reason_code", decision.reason_code);
      endSpan(span, decision ? undefined : { message: "the decision failed" });
    }
    publish("pdpDecision", () => ({ action: request.action, decision: outcome, duration_ms: performance.now() - started }));
  }
}

/** Builds the PDP service; rejects with a PolicyFileError when the policy or entities file cannot be used. */
export async function buildPdp(options: PdpOptions = {}): Promise<FastifyInstance> {
  const policySet = options.policyFile !== undefined ? await loadPolicyFile(options.policyFile) : defaultPolicySet();
  const entities = options.entitiesFile !== undefined ? await loadEntitiesFile(options.entitiesFile) : [];
  const decider = createDecider(policySet, entities, { decisionCacheSize: options.decisionCacheSize });
  const check = policyCheck(policySet, options.policyFile !== undefined, options.entitiesFile, entities.length, decider);

  const app = createService({ name: "pdp", logger: options.logger, health: () => [check], auth: options.auth, limits: options.limits });
  app.post("/v1/policy::decide", { schema: { body: ref("policy_decision_request") } }, async (req) => {
    if (req.body === undefined || req.body === null) {
      throw invalidRequest("the request body is missing", [{ path: "/", message: "a PolicyDecisionRequest is required" }]);
    }
    return decideObserved(decider, req.body as PolicyDecisionRequest);
  });
  // An extension: the coordinator's two questions for a run (run.start and its root's node.run.execute) in one
  // exchange. The body schema checks every request before any is decided, so a bad one refuses the whole batch.
  app.post("/v1/policy::decideBatch", { schema: { body: ref("policy_decision_batch_request") } }, async (req): Promise<PolicyDecisionBatchResponse> => {
    if (req.body === undefined || req.body === null) {
      throw invalidRequest("the request body is missing", [{ path: "/", message: "a PolicyDecisionBatchRequest is required" }]);
    }
    return { decisions: (req.body as PolicyDecisionBatchRequest).requests.map((request) => decideObserved(decider, request)) };
  });
  exposeInProcess(app, PDP_API, { decide: async (request) => decideObserved(decider, request) });
  return app;
}
