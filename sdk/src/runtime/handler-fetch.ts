/**
 * `ctx.fetch`: the global fetch, bound to one execution. Going through `globalThis.fetch` at call time keeps
 * its keep-alive pool, and lets nock intercept upstreams in a handler package's tests.
 *
 * `ctx.fetch`, `ctx.request` and `ctx.egress.fetch` reject a network failure (a connection refused, a name that does not
 * resolve, a connection reset, a timeout) with the retryable HandlerError `upstream_unavailable` naming the host and
 * port (see sdk/network-failure.ts); an abort because the execution was canceled or ran out of time stays what it is.
 */
import { fetch as undiciFetch, request as undiciRequest, type Dispatcher, type RequestInit as UndiciRequestInit } from "undici";
import { HandlerError } from "../handler-error.js";
import { fail } from "../failure-codes.js";
import { upstreamTimeoutError, upstreamUnavailableError } from "../network-failure.js";
import type { HandlerEgress, HandlerSecrets, UpstreamRequestOptions, UpstreamResponse } from "../types.js";
import { PACKAGE_VERSION } from "../version.js";
import type { SecretBindings } from "./handler-secrets.js";

export type { HandlerEgress };

/** The user agent of every upstream request a handler makes through its context. */
export const USER_AGENT = `nodefabric/${PACKAGE_VERSION}`;

/** The `code` of the error an egress-checked dispatcher (core's egress policy) fails a connection with. */
export const EGRESS_DENIED_CODE = "ERR_NODEFABRIC_EGRESS_DENIED";

/** What an egress-checked dispatcher's refusal carries: the host, the address, why, and what would allow it. */
export interface EgressDenial extends Error {
  readonly code: typeof EGRESS_DENIED_CODE;
  readonly host: string;
  readonly address: string | undefined;
  readonly category: string;
  readonly range: string | undefined;
  readonly remedy: string;
}

/** The URL a fetch goes to, when it can be read. */
function targetOf(input: string | URL | Request): URL | undefined {
  try {
    return new URL(input instanceof Request ? input.url : String(input));
  } catch {
    return undefined;
  }
}

/**
 * The per-request timeout of a fetch: a signal that fires after `timeoutMs` with the `upstream_unavailable` timeout
 * as its reason, so the fetch, and a body still being read, reject with it. `clear` when the fetch failed anyway.
 */
function requestTimeout(input: string | URL | Request, timeoutMs: number): { signal: AbortSignal; clear: () => void } {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(upstreamTimeoutError(targetOf(input) ?? {}, timeoutMs)), timeoutMs);
  timer.unref?.();
  return { signal: controller.signal, clear: () => clearTimeout(timer) };
}

/**
 * What a failed upstream call rejects with: a network failure as `upstream_unavailable`; anything else, and every
 * failure after one of `stops` fired (the execution's signal, the caller's own), as it is.
 */
function upstreamFailure(err: unknown, input: string | URL | Request, stops: ReadonlyArray<AbortSignal | null | undefined>): unknown {
  if (HandlerError.is(err) || stops.some((s) => s?.aborted)) return err;
  return upstreamUnavailableError(err, targetOf(input)) ?? err;
}

/** One traced upstream call: the headers that carry its trace context (`traceparent`), and its end. */
export interface UpstreamTrace {
  headers: Record<string, string>;
  end(status?: number, error?: unknown): void;
}

/**
 * Traces upstream calls: the executor gives one (an OpenTelemetry client span per call) when it is traced, and
 * nothing otherwise. It may return undefined for a call it does not trace.
 */
export type UpstreamTracer = (method: string, url: URL | undefined) => UpstreamTrace | undefined;

/** A fetch that aborts with the execution's signal, gives up after `timeoutMs`, and names NodeFabric as the user agent. */
export function createHandlerFetch(signal: AbortSignal, timeoutMs: number, traceUpstream?: UpstreamTracer): typeof globalThis.fetch {
  return async (input, init) => {
    const timeout = requestTimeout(input, timeoutMs);
    const signals = [signal, timeout.signal];
    if (init?.signal) signals.push(init.signal);
    const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    if (!headers.has("user-agent")) headers.set("user-agent", USER_AGENT);
    const traced = traceUpstream?.((init?.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase(), targetOf(input));
    if (traced) for (const [k, v] of Object.entries(traced.headers)) if (!headers.has(k)) headers.set(k, v);
    try {
      const res = await globalThis.fetch(input, { ...init, headers, signal: AbortSignal.any(signals) });
      traced?.end(res.status);
      return res;
    } catch (err) {
      timeout.clear();
      const failure = upstreamFailure(err, input, [signal, init?.signal]);
      traced?.end(undefined, failure);
      throw failure;
    }
  };
}

/** `ctx.request`: undici's request over `dispatcher`, aborted with the execution's signal, bounded by `timeoutMs`. */
export function createHandlerRequest(signal: AbortSignal, timeoutMs: number, dispatcher: Dispatcher, traceUpstream?: UpstreamTracer): (url: string | URL, options?: UpstreamRequestOptions) => Promise<UpstreamResponse> {
  return async (url, options = {}) => {
    const headers: Record<string, string> = { ...options.headers };
    if (!Object.keys(headers).some((k) => k.toLowerCase() === "user-agent")) headers["user-agent"] = USER_AGENT;
    const traced = traceUpstream?.((options.method ?? "GET").toUpperCase(), targetOf(url));
    if (traced) for (const [k, v] of Object.entries(traced.headers)) if (!Object.keys(headers).some((h) => h.toLowerCase() === k)) headers[k] = v;
    const failed = (err: unknown): never => {
      const failure = upstreamFailure(err, url, [signal]);
      traced?.end(undefined, failure);
      throw failure;
    };
    const res = await undiciRequest(url, {
      method: (options.method ?? "GET") as Dispatcher.HttpMethod,
      headers,
      body: options.body,
      signal,
      dispatcher,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    }).catch(failed);
    traced?.end(res.statusCode);
    return {
      statusCode: res.statusCode,
      headers: res.headers as Record<string, string | string[] | undefined>,
      // The body can fail too: the other side closing midway, or going quiet past the body timeout.
      text: () => res.body.text().catch(failed),
      json: () => res.body.json().catch(failed),
    };
  };
}

/** Finds the egress policy's refusal in a failed fetch's cause chain, by its code: any copy of the policy made it. */
function egressDenial(err: unknown): EgressDenial | undefined {
  for (let e = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { code?: unknown }).code === EGRESS_DENIED_CODE) return e as EgressDenial;
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

function deniedError(denied: EgressDenial, target: string): HandlerError {
  return fail("egress_denied", `refused to connect to ${target}: ${denied.message}; ${denied.remedy}`, {
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
/** The longest a `final` egress request (one made after the execution stopped) may take. */
export const FINAL_REQUEST_MS = 5_000;

export function createHandlerEgress(
  signal: AbortSignal,
  timeoutMs: number,
  dispatcher: Dispatcher,
  secrets: HandlerSecrets,
  bindings: Pick<SecretBindings, "refusal">,
  traceUpstream?: UpstreamTracer,
  configuredDispatcher: Dispatcher = dispatcher,
): HandlerEgress {
  const fetch: typeof globalThis.fetch = async (input, init) => {
    if (typeof input !== "string" && !(input instanceof URL)) throw new TypeError("ctx.egress.fetch takes a URL (a string or a URL), not a Request");
    const target = String(input);
    // A caller that streams for long (an MCP tool call's answer) asks for its own time-out; the execution's deadline
    // still bounds it, through `signal`.
    const asked = (init as { timeoutMs?: unknown } | undefined)?.timeoutMs;
    // `final: true` on a request made once the execution was stopped (telling an upstream that its call was
    // canceled, as MCP's notifications/cancelled): it is not aborted with the execution, and gets FINAL_REQUEST_MS
    // at most. Before the stop, `final` changes nothing.
    const final = (init as { final?: unknown } | undefined)?.final === true && signal.aborted;
    let ms = typeof asked === "number" && Number.isFinite(asked) && asked > 0 ? asked : timeoutMs;
    if (final) ms = Math.min(ms, FINAL_REQUEST_MS);
    const timeout = requestTimeout(target, ms);
    const signals = final ? [timeout.signal] : [signal, timeout.signal];
    if (init?.signal) signals.push(init.signal);
    const headers = new Headers(init?.headers);
    if (!headers.has("user-agent")) headers.set("user-agent", USER_AGENT);
    const traced = traceUpstream?.((init?.method ?? "GET").toUpperCase(), targetOf(target));
    if (traced) for (const [k, v] of Object.entries(traced.headers)) if (!headers.has(k)) headers.set(k, v);
    try {
      // undici's own fetch: the dispatcher is honoured there, whatever version of undici Node bundles.
      // A URL from the operator's own configuration (`operatorConfigured`, an LLM profile's base_url) may also reach
      // loopback and private addresses, as with executor.egress.allow_private; never metadata or reserved ones.
      const via = (init as { operatorConfigured?: unknown } | undefined)?.operatorConfigured === true ? configuredDispatcher : dispatcher;
      const res = (await undiciFetch(target, { ...(init as UndiciRequestInit), headers: Object.fromEntries(headers), signal: AbortSignal.any(signals), dispatcher: via })) as unknown as Response;
      traced?.end(res.status);
      return res;
    } catch (err) {
      timeout.clear();
      const denied = egressDenial(err);
      const failure = denied ? deniedError(denied, targetOf(target)?.host ?? target) : upstreamFailure(err, target, final ? [init?.signal] : [signal, init?.signal]);
      traced?.end(undefined, failure);
      throw failure;
    }
  };
  return {
    fetch,
    secretFor(name, url) {
      const value = secrets.get(name);
      if (value === undefined) return undefined;
      const refusal = bindings.refusal(name, url);
      if (refusal) throw fail("egress_denied", refusal.message, { retryable: false, details: { reason: refusal.reason, secret: name, host: url.host } });
      return value;
    },
  };
}
