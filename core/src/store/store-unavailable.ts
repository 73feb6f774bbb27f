/**
 * The one error a store throws when its database cannot be reached right now: the connection was refused, lost, or
 * timed out, or the store has not reached the database since it was opened. It is an outage to wait out, not a bug:
 * every service answers it with 503 `unavailable` and a Retry-After (http/service.ts), `/v1/health` reports the store
 * down, and the coordinator's loops back off until it passes (engine/store-outage.ts). See docs/deploy.md, "When the
 * database goes away".
 *
 * A store plugin decides which of its driver's errors are outages and throws this class for them; an error of the SQL
 * itself (syntax, a constraint) stays what it is.
 */

const BRAND = Symbol.for("nodefabric.StoreUnavailableError");

/** Seconds a client is asked to wait (Retry-After) before trying again while the database cannot be reached. */
export const STORE_RETRY_AFTER_SECONDS = 2;

export class StoreUnavailableError extends Error {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "StoreUnavailableError";
    Object.defineProperty(this, BRAND, { value: true });
  }

  /** True for a StoreUnavailableError from any installed copy of core (a plugin may bundle its own). */
  static is(value: unknown): value is StoreUnavailableError {
    return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }
}

/** The StoreUnavailableError `err` is, or holds as a cause (a few levels deep); undefined for any other error. */
export function storeUnavailable(err: unknown): StoreUnavailableError | undefined {
  let at: unknown = err;
  for (let depth = 0; depth < 5 && typeof at === "object" && at !== null; depth++) {
    if (StoreUnavailableError.is(at)) return at;
    at = (at as { cause?: unknown }).cause;
  }
  return undefined;
}
