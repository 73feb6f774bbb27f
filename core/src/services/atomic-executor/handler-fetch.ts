/**
 * `ctx.fetch`: the global fetch, bound to one execution. Going through `globalThis.fetch` at call time keeps
 * its keep-alive pool, and lets nock intercept upstreams in a handler package's tests.
 */
import { request as undiciRequest, type Dispatcher } from "undici";
import { SERVICE_VERSION } from "../../version.js";
import type { UpstreamRequestOptions, UpstreamResponse } from "../../sdk/types.js";

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

/** `ctx.request`: undici's request over `dispatcher`, aborted with the execution's signal, bounded by `timeoutMs`. */
export function createHandlerRequest(signal: AbortSignal, timeoutMs: number, dispatcher: Dispatcher): (url: string | URL, options?: UpstreamRequestOptions) => Promise<UpstreamResponse> {
  return async (url, options = {}) => {
    const headers: Record<string, string> = { ...options.headers };
    if (!Object.keys(headers).some((k) => k.toLowerCase() === "user-agent")) headers["user-agent"] = USER_AGENT;
    const res = await undiciRequest(url, {
      method: (options.method ?? "GET") as Dispatcher.HttpMethod,
      headers,
      body: options.body,
      signal,
      dispatcher,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    return {
      statusCode: res.statusCode,
      headers: res.headers as Record<string, string | string[] | undefined>,
      text: () => res.body.text(),
      json: () => res.body.json(),
    };
  };
}
