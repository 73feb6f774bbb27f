/**
 * `ctx.fetch`: the global fetch, bound to one execution. Going through `globalThis.fetch` at call time keeps
 * its keep-alive pool, and lets nock intercept upstreams in a handler package's tests.
 */
import { SERVICE_VERSION } from "../../version.js";

const USER_AGENT = `nodefabric/${SERVICE_VERSION}`;

/** A fetch that aborts with the execution's signal, gives up after `timeoutMs`, and names NodeFabric as the user agent. */
export function createHandlerFetch(signal: AbortSignal, timeoutMs: number): typeof globalThis.fetch {
  return (input, init) => {
    const signals = [signal, AbortSignal.timeout(timeoutMs)];
    if (init?.signal) signals.push(init.signal);
    const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    if (!headers.has("user-agent")) headers.set("user-agent", USER_AGENT);
    return globalThis.fetch(input, { ...init, headers, signal: AbortSignal.any(signals) });
  };
}
