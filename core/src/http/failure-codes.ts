/**
 * The failure codes the fabric's own services raise (the coordinator's engine, the composite executor), in the form of
 * the SDK's blocks (sdk/failure-codes.ts); codes that handlers raise too are in the SDK's block. A NodeRun, a Run or
 * an AtomicExecuteResult carries one in its `error`; docs/errors.md lists them. Request-level codes (an ErrorEnvelope
 * with an HTTP status) are `ERROR_STATUS` in errors.ts.
 */
import { defineFailureCodes, failWith, SDK_FAILURE_CODES, type CodeOf, type SdkFailureCode } from "@nodefabric/sdk";

export const CORE_FAILURE_CODES = defineFailureCodes({
  policy_denied: {
    meaning: "The PDP denied the action (`details.action`, `details.reason_code`): starting the run, running the NodeRun, creating a child.",
    retryable: false,
    raisedBy: "the coordinator",
  },
  pdp_unavailable: {
    meaning: "The PDP could not be asked, so nothing was decided (the fabric fails closed).",
    retryable: true,
    raisedBy: "the coordinator, the composite executor (ctx.select)",
  },
  node_type_not_allowed: {
    meaning: "The node type is not in the allow list (`candidates.allowed_node_type_ids`) of the constraints in force.",
    retryable: false,
    raisedBy: "the coordinator",
  },
  node_type_denied: {
    meaning: "The node type is in the deny list (`candidates.denied_node_type_ids`) of the constraints in force.",
    retryable: false,
    raisedBy: "the coordinator",
  },
  unknown_node_type: {
    meaning: "The node type is not published, or the executor found for it does not serve it.",
    retryable: false,
    raisedBy: "the coordinator",
  },
  budget_exhausted: {
    meaning: "A model call does not fit what its run has left of a budget (`details.budget`: `nodefabric.llm.max_tokens` or `max_cost`, with `remaining` and `asked`, counting what calls in flight reserved); it was not sent. Only that NodeRun fails.",
    retryable: false,
    raisedBy: "the coordinator",
  },
  executor_protocol_error: {
    meaning: "An executor answered with something that breaks the contract (not a valid AtomicExecuteResult, another NodeRun's result, a body that is not JSON).",
    retryable: false,
    raisedBy: "the coordinator",
  },
  invalid_request: {
    meaning: "A composite asked for something malformed (a call without a node type ref, inputs that are not a JSON object, a recovery without its target). A composite whose request the coordinator refuses fails with that request-level code.",
    retryable: false,
    raisedBy: "the composite executor",
  },
});

/** A code of core's block. */
export type CoreFailureCode = CodeOf<typeof CORE_FAILURE_CODES>;

/** A failure code the fabric's services may put in an `error`: core's block and the SDK's. */
export type FailureCode = SdkFailureCode | CoreFailureCode;

/** Every code of core's and the SDK's blocks. */
export const FAILURE_CODES: readonly FailureCode[] = Object.freeze([...Object.keys(SDK_FAILURE_CODES), ...Object.keys(CORE_FAILURE_CODES)] as FailureCode[]);

/** The HandlerError of a failure the fabric's own code raises inside a composite (a code of core's or the SDK's block). */
export const fail = failWith(CORE_FAILURE_CODES);
