/**
 * `ctx.fetch`: the global fetch, bound to one execution. Going through `globalThis.fetch` at call time keeps
 * its keep-alive pool, and lets nock intercept upstreams in a handler package's tests.
 */
import { fetch as undiciFetch, request as undiciRequest, type Dispatcher, type RequestInit as UndiciRequestInit } from "undici";
import { SERVICE_VERSION } from "../../version.js";
import { HandlerError } from "../../sdk/handler-error.js";
import type { HandlerEgress, HandlerSecrets, UpstreamRequestOptions, UpstreamResponse } from "../../sdk/types.js";

export type { HandlerEgress };
import { EgressDeniedError } from "./egress-policy.js";
import type { SecretBindings } from "./handler-secrets.js";

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


/** Finds the EgressDeniedError in a failed fetch's cause chain. */
function egressDenial(err: unknown): EgressDeniedError | undefined {
  for (let e = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof EgressDeniedError || (e as { code?: unknown }).code === "ERR_NODEFABRIC_EGRESS_DENIED") return e as EgressDeniedError;
    const inner = (e as { errors?: unknown[] }).errors; // an AggregateError of several connection attempts
    if (Array.isArray(inner)) {
      for (const i of inner) {
        const found = egressDenial(i);
        if (found) return found;
      }
    }
  }
  return undefined;
}

function deniedError(denied: EgressDeniedError, target: string): HandlerError {
  return new HandlerError("egress_denied", `refused to connect to ${target}: ${denied.message}; ${denied.remedy}`, {
    retryable: false,
    details: {
      host: denied.host,
      ...(denied.address !== undefined ? { address: denied.address } : {}),
      reason: denied.category,
      ...(denied.range !== undefined ? { range: denied.range } : {}),
    },
  });
}

/** `ctx.egress` of one execution: `fetch` over the egress-checked `dispatcher`, and the secrets as their bindings allow. */
export function createHandlerEgress(signal: AbortSignal, timeoutMs: number, dispatcher: Dispatcher, secrets: HandlerSecrets, bindings: SecretBindings): HandlerEgress {
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const signals = [signal, AbortSignal.timeout(timeoutMs)];
    if (init?.signal) signals.push(init.signal);
    const headers = new Headers(init?.headers);
    if (!headers.has("user-agent")) headers.set("user-agent", USER_AGENT);
    if (typeof input !== "string" && !(input instanceof URL)) throw new TypeError("ctx.egress.fetch takes a URL (a string or a URL), not a Request");
    const target = String(input);
    try {
      // undici's own fetch: the dispatcher is honoured there, whatever version of undici Node bundles.
      return (await undiciFetch(target, { ...(init as UndiciRequestInit), headers: Object.fromEntries(headers), signal: AbortSignal.any(signals), dispatcher })) as unknown as Response;
    } catch (err) {
      const denied = egressDenial(err);
      if (denied) {
        let where = target;
        try {
          where = new URL(target).host;
        } catch {
          // keep the text
        }
        throw deniedError(denied, where);
      }
      throw err;
    }
  };
  return {
    fetch,
    secretFor(name, url) {
      const value = secrets.get(name);
      if (value === undefined) return undefined;
      const refusal = bindings.refusal(name, url);
      if (refusal) throw new HandlerError("egress_denied", refusal.message, { retryable: false, details: { reason: refusal.reason, secret: name, host: url.host } });
      return value;
    },
  };
}
