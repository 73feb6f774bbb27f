/**
 * One upstream exchange within the egress bounds of `nodefabric.http`: the host of every URL is checked against the
 * allow-list before anything connects to it, redirects are refused unless enabled (and then each hop is checked again),
 * the body is read as a stream and abandoned past the size limit, and the whole exchange has a timeout.
 */
import { HandlerError, readResponseBytes, ResponseTooLargeError, upstreamTimeoutError, upstreamUnavailableError } from "@nodefabric/sdk";
import { hostAllowed } from "./http-config.js";
import { fail } from "./failure-codes.js";

/** A request as the handler built it; header names are lower case. */
export interface OutboundRequest {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  /** Headers never sent to another origin than the first one (the secret headers). */
  sensitiveHeaders: readonly string[];
}

/** The bounds one exchange runs within. */
export interface EgressLimits {
  allowedHosts: readonly string[];
  maxResponseBytes: number;
  timeoutMs: number;
  followRedirects: boolean;
  maxRedirects: number;
}

/** What came back: the final status, headers and body bytes (a non-2xx body may be truncated). */
export interface UpstreamAnswer {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
  /** The URL that answered (after redirects). */
  url: string;
}

/** How much of a non-2xx body is kept for the error's details. */
const ERROR_BODY_BYTES = 2048;

function describeUrl(url: URL): string {
  // The query may carry values the caller would not want logged or returned; the origin and path say where it went.
  return `${url.origin}${url.pathname}`;
}

/** The `egress_denied` refusal of a URL whose host is not allowed; nothing has connected to it. */
export function checkEgress(url: URL, allowedHosts: readonly string[], why = "the URL"): void {
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw fail("egress_denied", `${why} uses ${url.protocol.replace(/:$/, "")}; only http and https are allowed`, { retryable: false, details: { url: describeUrl(url) } });
  }
  if (!hostAllowed(url, allowedHosts)) {
    throw fail("egress_denied", `${why} goes to ${url.host}, which is not in nodefabric.http.allowed_hosts (${allowedHosts.join(", ") || "none"})`, {
      retryable: false,
      details: { host: url.host, allowed_hosts: [...allowedHosts] },
    });
  }
}

function tooLarge(limit: number, url: URL): HandlerError {
  return fail("response_too_large", `the answer of ${describeUrl(url)} is larger than nodefabric.http.max_response_bytes (${limit} bytes)`, {
    retryable: false,
    details: { max_response_bytes: limit },
  });
}

/** Reads at most `limit` bytes of a body; past it, stops reading and either truncates or throws response_too_large. */
async function readBody(res: Response, limit: number, url: URL, truncate: boolean): Promise<Uint8Array> {
  try {
    return await readResponseBytes(res, limit, truncate);
  } catch (err) {
    if (err instanceof ResponseTooLargeError) throw tooLarge(limit, url);
    throw err;
  }
}

/**
 * The error of a failed exchange: `upstream_unavailable` (retryable) for a connection that failed or `timeout_ms`
 * passing, with the host, port and the network error's code; the original error when the execution itself was stopped.
 */
function failure(err: unknown, url: URL, limits: EgressLimits, timeout: AbortSignal, execution: AbortSignal): unknown {
  if (execution.aborted) return err;
  if (timeout.aborted && !(HandlerError.is(err) && err.code !== "upstream_unavailable")) return upstreamTimeoutError(url, limits.timeoutMs, err);
  if (HandlerError.is(err)) return err;
  const unavailable = upstreamUnavailableError(err, url);
  if (unavailable) return unavailable;
  const cause = (err as { cause?: { code?: unknown; message?: unknown } })?.cause;
  const why = typeof cause?.code === "string" ? cause.code : typeof cause?.message === "string" ? cause.message : (err as Error)?.message ?? String(err);
  return fail("upstream_error", `cannot reach ${describeUrl(url)}: ${why}`, { retryable: true, details: { reason: "network", error: why } });
}

/**
 * Sends `request` with `fetchFn` (the handler's `ctx.fetch`) within `limits`, and returns the final answer.
 * `execution` is the execution's signal: when it fires, its own error is rethrown, for the executor to report.
 */
export async function boundedExchange(fetchFn: typeof globalThis.fetch, request: OutboundRequest, limits: EgressLimits, execution: AbortSignal): Promise<UpstreamAnswer> {
  const timeout = AbortSignal.timeout(limits.timeoutMs);
  let url = request.url;
  let method = request.method;
  let body = request.body;
  const headers = { ...request.headers };
  const firstOrigin = url.origin;
  checkEgress(url, limits.allowedHosts);
  try {
    for (let hop = 0; ; hop++) {
      const res = await fetchFn(url, { method, headers, body, redirect: "manual", signal: timeout });
      const location = res.headers.get("location");
      if (res.status >= 300 && res.status < 400 && location !== null) {
        await res.body?.cancel().catch(() => undefined);
        let next: URL;
        try {
          next = new URL(location, url);
        } catch {
          throw fail("upstream_error", `${describeUrl(url)} answered ${res.status} with an invalid Location`, { retryable: false, details: { status: res.status } });
        }
        if (!limits.followRedirects) {
          throw fail("egress_denied", `${describeUrl(url)} answered ${res.status}, a redirect to ${describeUrl(next)}; redirects are not followed unless nodefabric.http.follow_redirects is true`, {
            retryable: false,
            details: { status: res.status, location: describeUrl(next) },
          });
        }
        if (hop >= limits.maxRedirects) {
          throw fail("upstream_error", `${describeUrl(request.url)} redirected more than nodefabric.http.max_redirects (${limits.maxRedirects}) times`, {
            retryable: false,
            details: { status: res.status, max_redirects: limits.maxRedirects },
          });
        }
        checkEgress(next, limits.allowedHosts, `a redirect (${res.status}) from ${describeUrl(url)}`);
        // As browsers do: 303 turns any method but HEAD into GET, and 301/302 turn POST into GET; 307/308 keep both.
        if ((res.status === 303 && method !== "HEAD") || ((res.status === 301 || res.status === 302) && method === "POST")) {
          method = "GET";
          body = undefined;
          delete headers["content-type"];
        }
        if (next.origin !== firstOrigin) for (const name of request.sensitiveHeaders) delete headers[name];
        url = next;
        continue;
      }
      const ok = res.status >= 200 && res.status < 300;
      const bytes = await readBody(res, ok ? limits.maxResponseBytes : Math.min(limits.maxResponseBytes, ERROR_BODY_BYTES), url, !ok);
      const answerHeaders: Record<string, string> = {};
      res.headers.forEach((value, name) => {
        answerHeaders[name] = value;
      });
      return { status: res.status, headers: answerHeaders, body: bytes, url: url.href };
    }
  } catch (err) {
    throw failure(err, url, limits, timeout, execution);
  }
}
