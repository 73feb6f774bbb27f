/**
 * Failure codes: the `error.code` a failed NodeRun, Run or AtomicExecuteResult carries (not an HTTP status; the
 * request-level codes of an ErrorEnvelope are core's `ERROR_STATUS`). Every package that raises failure codes declares
 * them in one block of the form below, with each code's meaning, whether a retry may succeed and who raises it;
 * docs/errors.md is generated from the blocks, and a test checks that every code the sources raise is in one.
 *
 * This file holds the form, the SDK's own block (the codes the executors' runtime raises, and the codes several
 * packages share) and `failWith`, which binds HandlerError to a block so that a code in no block does not compile.
 */
import { HandlerError, type HandlerErrorOptions } from "./handler-error.js";

/** Whether running the NodeRun again may succeed: yes, no, or it depends on the case (the error's own `retryable` says). */
export type Retryability = boolean | "depends";

/** One failure code of a block. */
export interface FailureCodeSpec {
  /** What happened, in a sentence. */
  readonly meaning: string;
  /** Whether running the NodeRun again may succeed; "depends" when the raiser decides case by case (`error.retryable`). */
  readonly retryable: Retryability;
  /** Who raises it: the service, runtime or handler, in a few words. */
  readonly raisedBy: string;
  /** Set, with the reason, for a code nothing raises today but that stays in the block. */
  readonly reserved?: string;
}

/** A block of failure codes: code (snake_case) → its spec. */
export type FailureCatalogue = { readonly [code: string]: FailureCodeSpec };

/** The codes of a block. */
export type CodeOf<C extends FailureCatalogue> = Extract<keyof C, string>;

const CATALOGUE = Symbol.for("nodefabric.FailureCatalogue");
const CODE_PATTERN = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/;

/**
 * Declares a package's block of failure codes, checked: snake_case codes, each with a meaning, a retryability and who
 * raises it. Returns the block itself, frozen, with its literal type kept for `failWith` and `CodeOf`.
 */
export function defineFailureCodes<const C extends FailureCatalogue>(codes: C): C {
  for (const [code, spec] of Object.entries(codes)) {
    const where = `defineFailureCodes: ${JSON.stringify(code)}`;
    if (!CODE_PATTERN.test(code)) throw new TypeError(`${where} is not a snake_case code, such as "upstream_error"`);
    if (typeof spec?.meaning !== "string" || spec.meaning.trim() === "") throw new TypeError(`${where} needs a meaning`);
    if (spec.retryable !== true && spec.retryable !== false && spec.retryable !== "depends") throw new TypeError(`${where}: retryable must be true, false or "depends"`);
    if (typeof spec.raisedBy !== "string" || spec.raisedBy.trim() === "") throw new TypeError(`${where} needs raisedBy`);
    if (spec.reserved !== undefined && (typeof spec.reserved !== "string" || spec.reserved.trim() === "")) throw new TypeError(`${where}: reserved must say why`);
  }
  const block = { ...codes };
  Object.defineProperty(block, CATALOGUE, { value: true });
  return Object.freeze(block);
}

/** True for a block made by `defineFailureCodes` (of any installed copy of the SDK). */
export function isFailureCatalogue(value: unknown): value is FailureCatalogue {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[CATALOGUE] === true;
}

/**
 * The SDK's block: what the executors' runtime raises around any handler (schemas, deadline, cancel, a thrown error),
 * what the SDK's helpers raise (upstream calls, HTTP operations, egress), and the codes several packages raise and so
 * share. A handler package may raise any of these besides its own block's.
 */
export const SDK_FAILURE_CODES = defineFailureCodes({
  invalid_inputs: {
    meaning: "The inputs do not match the node type's input_schema, or the handler refused them (`details` names the field).",
    retryable: false,
    raisedBy: "the executors (input_schema), the SDK's HTTP-operation runtime, handlers",
  },
  invalid_outputs: {
    meaning: "The outputs are not a JSON object, cannot be serialised, or do not match the node type's output_schema.",
    retryable: false,
    raisedBy: "the atomic executor's runtime, the coordinator (a composite's outputs)",
  },
  handler_error: {
    meaning: "The handler or composite threw something that is not a HandlerError (or ended failed without saying why).",
    retryable: "depends",
    raisedBy: "the executors' runtime, the coordinator",
  },
  timeout: {
    meaning: "The handler did not finish within the NodeRun's timeout.",
    retryable: true,
    raisedBy: "the atomic executor's runtime",
  },
  canceled: {
    meaning: "The NodeRun was canceled: by its run's cancel, its parent's end, or the executor shutting down.",
    retryable: false,
    raisedBy: "the coordinator, the executors' runtime",
  },
  executor_unavailable: {
    meaning: "No executor could take the NodeRun: none serves it, none answered, or it shut down mid-call. The NodeRun waits for one up to coordinator.executor_wait_ms.",
    retryable: true,
    raisedBy: "the coordinator, the atomic executor's runtime",
  },
  upstream_error: {
    meaning: "The upstream answered with a failure (an HTTP error status, or an answer that cannot be used); `details.status` holds its status when it has one.",
    retryable: "depends",
    raisedBy: "the SDK's HTTP-operation and OAuth 2 helpers, http.request, llm.chat, the composite executor, handlers",
  },
  upstream_unavailable: {
    meaning: "The upstream could not be reached: connection refused or reset, no DNS answer, no answer in time (`details.reason`).",
    retryable: "depends",
    raisedBy: "the SDK's network failure mapping (ctx.fetch, ctx.request), mcp.call, llm.chat",
  },
  egress_denied: {
    meaning: "The egress policy refused the connection, or a secret asked for a host it is not bound to, or a URL or redirect outside the node type's allowed hosts.",
    retryable: false,
    raisedBy: "the atomic executor's egress (ctx.egress), http.request",
  },
  response_too_large: {
    meaning: "The upstream's answer is larger than the node type allows (`details.max_response_bytes`).",
    retryable: false,
    raisedBy: "the SDK's HTTP-operation runtime, http.request",
  },
  invalid_configuration: {
    meaning: "The node type's configuration cannot be used: a bad descriptor or extension, a missing setting or secret, an executor too old for the handler. Was `configuration_error` from the SDK's HTTP-operation runtime.",
    retryable: false,
    raisedBy: "the SDK's HTTP-operation runtime, http.request, mcp.call, llm.chat, llm.planner",
  },
  child_failed: {
    meaning: "A child NodeRun of the composite failed or was canceled and the composite did not catch it (`details.error` holds the child's error).",
    retryable: false,
    raisedBy: "the composite executor (ctx.call's ChildFailedError, an abort recovery)",
  },
  budget_exceeded: {
    meaning: "The run passed, or the call would pass, one of its budgets (steps, external calls, cost, wall time, tokens); `details.budget` names it.",
    retryable: false,
    raisedBy: "the coordinator, llm.chat, llm.planner",
  },
  approval_rejected: {
    meaning: "An approval the NodeRun waited for was rejected.",
    retryable: false,
    raisedBy: "the coordinator, llm.planner (its plan's approval)",
  },
  no_candidate: {
    meaning: "Selection proposed no node type that may run for the goal.",
    retryable: false,
    raisedBy: "llm.planner, the examples' router",
  },
});

/** A code of the SDK's block. */
export type SdkFailureCode = CodeOf<typeof SDK_FAILURE_CODES>;

/** Codes no longer produced, with the code that replaced each: stored runs and old executors may still carry them. */
export const RETIRED_FAILURE_CODES: Readonly<Record<string, { readonly now: string; readonly wasRaisedBy: string }>> = Object.freeze({
  configuration_error: { now: "invalid_configuration", wasRaisedBy: "the SDK's HTTP-operation runtime (handler packages made from OpenAPI documents) in SDK 0.1.0" },
});

/** Makes the HandlerError of a failure code of one block (or of the SDK's block). */
export type FailWith<Code extends string> = (code: Code, message: string, options?: HandlerErrorOptions) => HandlerError<Code>;

/**
 * Binds HandlerError to a block: `const fail = failWith(MY_FAILURE_CODES)`, then `throw fail(code, message, options)`.
 * A code in neither the block nor the SDK's does not compile. (`new HandlerError(code, …)` takes any string, so
 * handler packages that do not declare a block keep working.)
 */
export function failWith<const C extends FailureCatalogue>(catalogue: C): FailWith<CodeOf<C> | SdkFailureCode> {
  if (!isFailureCatalogue(catalogue)) throw new TypeError("failWith: pass a block made by defineFailureCodes");
  return (code, message, options) => new HandlerError(code, message, options);
}

/** The SDK's own HandlerErrors (not exported from the package: handler packages bind their own block). */
export const fail = failWith(SDK_FAILURE_CODES);
