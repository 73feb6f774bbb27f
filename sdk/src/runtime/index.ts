/**
 * @nodefabric/sdk/runtime: the fabric's internal runtime, how one atomic handler is invoked. The Atomic Executor of
 * @nodefabric/core and the test harness of @nodefabric/sdk/testing both run handlers through this code, so a test
 * sees what the executor does: inputs and outputs checked against the node type's schemas, the AtomicContext, the
 * deadline and the cancel signal, thrown errors mapped to the contract's Error. Handler packages do not import it;
 * it follows the fabric's releases, not a public API's.
 */
export {
  executeAtomic,
  errorFromThrown,
  Execution,
  silentLogger,
  type ExecutableDefinition,
  type ExecuteOptions,
  type RuntimeClock,
  type RuntimeLogger,
  type StopKind,
} from "./atomic-execution.js";
export { OutputDeltaStream, OUTPUT_DELTA_INTERVAL_MS, OUTPUT_DELTA_MAX_CHARS, OUTPUT_DELTA_MAX_EVENTS, type OutputDelta, type OutputDeltaSender } from "./output-deltas.js";
export { createHandlerEgress, createHandlerFetch, createHandlerRequest, EGRESS_DENIED_CODE, USER_AGENT, type EgressDenial, type UpstreamTrace, type UpstreamTracer } from "./handler-fetch.js";
export {
  checkSecretHost,
  SECRET_ENV_PREFIX,
  SECRET_HOSTS_ENV_PREFIX,
  SecretBindings,
  secretBindingHint,
  secretHostsFromEnv,
  secretsFromEnv,
  type SecretRefusal,
} from "./handler-secrets.js";
export { compileHandlerSchema, createHandlerAjv, schemaProblem, type HandlerAjvOptions } from "./handler-schemas.js";
export { dedupeIssues, issuesFromAjv, type ValidationIssue } from "./schema-issues.js";
export { compatibleSdkRange, compileNodeTypeSchemas, DefinitionError, nodeTypeProblem, nodeTypeReason, prepareAtomic, sdkCompatible, sdkProblem } from "./definition-check.js";
export { installGlobalDispatcher } from "./global-dispatcher.js";
/** Reads one member NodeType of a defineAtomicSet, for the executor's loader. */
export { readSetMember } from "../define-atomic-set.js";
