/**
 * @nodefabric/sdk/testing: what a handler package's tests import. One handler runs through the fabric's own runtime
 * (schemas, timeout, cancel, secrets, a MockAgent for upstreams), in the test's process, with no server and nothing
 * native to install. Tests of whole trees of node runs use `fabricFixture` of @nodefabric/core/testing.
 */
/** One handler run as the Atomic Executor runs it. */
export { runHandler, type RunHandlerOptions } from "./run-handler.js";
/** Property checks: inputs generated from the input_schema, every result held to the handler's contract. */
export {
  checkHandler,
  assertHandlerProperties,
  sampleInputs,
  type CheckHandlerOptions,
  type HandlerCheckReport,
  type PropertyViolation,
} from "./check-handler.js";
/** What a definition the harness refuses throws. */
export { DefinitionError } from "../runtime/definition-check.js";
/** A scripted OpenAI-compatible chat completions server on loopback, for testing LLM node types with no model. */
export { completionChunks } from "./stand-in-stream.js";
export {
  startLlmStandIn,
  scriptedCompletion,
  sampleForSchema,
  approximateTokens,
  type LlmStandIn,
  type LlmStandInOptions,
  type StandInStep,
  type StandInFixture,
  type StandInCall,
  type StandInUsage,
  type StreamPace,
  type ChatRequestBody,
  type ScriptedAnswer,
} from "./llm-stand-in.js";
