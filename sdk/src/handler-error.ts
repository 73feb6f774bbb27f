/**
 * The error a handler throws to fail its NodeRun with a chosen code. It becomes the `error` of the
 * AtomicExecuteResult as is: code, message, details, retryable.
 */

const HANDLER_ERROR = Symbol.for("nodefabric.HandlerError");

export interface HandlerErrorOptions {
  /** Whether running the NodeRun again may succeed (an upstream 5xx, a rate limit). */
  retryable?: boolean;
  /** Free-form, JSON-serialisable facts about the failure. */
  details?: Record<string, unknown>;
  /** The underlying failure. */
  cause?: unknown;
}

/**
 * A handler failure with a stable code; recognised by `HandlerError.is` across installed copies of the SDK. `Code` is
 * the codes it may carry: a package that declares its block of failure codes makes its errors with `failWith(block)`
 * (sdk/failure-codes.ts), which types `Code` so that a code in no block does not compile.
 */
export class HandlerError<Code extends string = string> extends Error {
  readonly code: Code;
  declare readonly retryable?: boolean;
  declare readonly details?: Record<string, unknown>;

  constructor(code: Code, message: string, options: HandlerErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    if (typeof code !== "string" || code.length === 0) {
      throw new TypeError("HandlerError: code must be a non-empty string, such as \"upstream_error\"");
    }
    if (options.details !== undefined && (typeof options.details !== "object" || options.details === null || Array.isArray(options.details))) {
      throw new TypeError("HandlerError: details must be a plain object");
    }
    this.name = "HandlerError";
    this.code = code;
    if (options.retryable !== undefined) this.retryable = options.retryable;
    if (options.details !== undefined) this.details = options.details;
    // A symbol from the global registry, not `instanceof`: the executor and the handler may each load their own copy.
    Object.defineProperty(this, HANDLER_ERROR, { value: true });
  }

  /** True for a HandlerError made by any installed copy of the SDK. */
  static is(value: unknown): value is HandlerError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as Record<symbol, unknown>)[HANDLER_ERROR] === true &&
      typeof (value as { code?: unknown }).code === "string"
    );
  }
}
