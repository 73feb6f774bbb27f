/**
 * Network failures of an upstream call, named. A connection refused, a host name that does not resolve, a connection
 * reset or closed by the other side, and a timeout are not the handler's fault and may pass: each becomes the
 * retryable HandlerError `upstream_unavailable`, whose message names the kind, host and port, whose details hold
 * `{ reason, code, host, port }`, and whose cause is the original error (its code on the wire as `cause.code`).
 *
 * One classifier for everything that calls upstreams: the executor's `ctx.fetch`, `ctx.request` and `ctx.egress.fetch`,
 * the errors a handler lets escape from its own fetch or undici call, and handler packages such as `http.request`.
 */
import type { FabricErrorBody } from "@nodefabric/schemas";
import { HandlerError } from "./handler-error.js";
import { fail, type SdkFailureCode } from "./failure-codes.js";

/** The code of a failure to reach an upstream. */
export const UPSTREAM_UNAVAILABLE = "upstream_unavailable" satisfies SdkFailureCode;

/** What kind of network failure it was: `details.reason` of an `upstream_unavailable` error. */
export type NetworkFailureReason = "connection_refused" | "dns_failure" | "connection_reset" | "timeout";

/** The error codes (Node's and undici's) that name a network failure, and their kind. */
const REASONS: Readonly<Record<string, NetworkFailureReason>> = {
  ECONNREFUSED: "connection_refused",
  ENOTFOUND: "dns_failure",
  EAI_AGAIN: "dns_failure",
  ECONNRESET: "connection_reset",
  EPIPE: "connection_reset",
  UND_ERR_SOCKET: "connection_reset",
  ETIMEDOUT: "timeout",
  UND_ERR_CONNECT_TIMEOUT: "timeout",
  UND_ERR_HEADERS_TIMEOUT: "timeout",
  UND_ERR_BODY_TIMEOUT: "timeout",
};

/** A network failure found in an error or its causes. */
export interface NetworkFailure {
  reason: NetworkFailureReason;
  /** The error code, such as `ECONNREFUSED` or `UND_ERR_HEADERS_TIMEOUT`. */
  code: string;
  /** The message of the error that carries the code. */
  message: string;
  /** The host asked for (the URL's host name when known, else the address the error names). */
  host?: string;
  port?: number;
  /** The address connected to, when it is not `host`. */
  address?: string;
  /** The system call that failed (`connect`, `getaddrinfo`, …). */
  syscall?: string;
  /** The time allowed, for a timeout the caller set. */
  timeoutMs?: number;
}

/** Where a request went: a URL, or a host and port already known. */
export type NetworkTarget = string | URL | { host?: string; port?: number };

type Carrier = {
  code?: unknown;
  message?: unknown;
  address?: unknown;
  port?: unknown;
  hostname?: unknown;
  host?: unknown;
  syscall?: unknown;
  timeoutMs?: unknown;
  socket?: { remoteAddress?: unknown; remotePort?: unknown };
  errors?: unknown;
  cause?: unknown;
};

/** The error in `err`'s cause chain (and AggregateError members) that carries a network failure code. */
function findCarrier(err: unknown, depth = 0): Carrier | undefined {
  if (typeof err !== "object" || err === null || depth > 8) return undefined;
  const e = err as Carrier;
  if (typeof e.code === "string" && Object.hasOwn(REASONS, e.code)) {
    // An AggregateError of several connection attempts (one per address) carries the code; its members, the address.
    const inner = Array.isArray(e.errors) ? e.errors.map((i) => findCarrier(i, depth + 1)).find((i) => i?.code === e.code) : undefined;
    return inner ?? e;
  }
  if (Array.isArray(e.errors)) {
    for (const inner of e.errors) {
      const found = findCarrier(inner, depth + 1);
      if (found) return found;
    }
  }
  return findCarrier(e.cause, depth + 1);
}

function text(v: unknown): string | undefined {
  return typeof v === "string" && v.length > 0 ? v : undefined;
}

function portNumber(v: unknown): number | undefined {
  const n = typeof v === "string" && /^\d{1,5}$/.test(v) ? Number(v) : v;
  return typeof n === "number" && Number.isInteger(n) && n > 0 && n < 65536 ? n : undefined;
}

function unbracket(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

/** The host and port of a target; a URL without a port has its scheme's. */
function hostPortOf(target: NetworkTarget | undefined): { host?: string; port?: number } {
  if (target === undefined) return {};
  if (typeof target === "string" || target instanceof URL) {
    let url: URL;
    try {
      url = typeof target === "string" ? new URL(target) : target;
    } catch {
      return {};
    }
    const port = portNumber(url.port) ?? (url.protocol === "https:" || url.protocol === "wss:" ? 443 : url.protocol === "http:" || url.protocol === "ws:" ? 80 : undefined);
    return { host: text(unbracket(url.hostname)), port };
  }
  return { host: text(target.host), port: portNumber(target.port) };
}

/** Host and port as the error itself names them: Node's connect errors, getaddrinfo, undici's socket and connect-timeout errors. */
function hostPortInError(e: Carrier): { host?: string; port?: number; address?: string } {
  const address = text(e.address) ?? text(e.socket?.remoteAddress);
  let port = portNumber(e.port) ?? portNumber(e.socket?.remotePort);
  let host = text(e.hostname) ?? text(e.host);
  const message = typeof e.message === "string" ? e.message : "";
  if (!host && !address) {
    // undici: "Connect Timeout Error (attempted address: example.com:443, timeout: 10000ms)"
    const attempted = /attempted address: (.+):(\d+),/.exec(message);
    if (attempted) {
      host = unbracket(attempted[1]!);
      port ??= portNumber(attempted[2]);
    }
    // A resolver's own error: "getaddrinfo ENOTFOUND example.invalid"
    const resolving = /\b(?:ENOTFOUND|EAI_AGAIN) (\S+)/.exec(message);
    if (!host && resolving) host = resolving[1];
  }
  return { host: host ?? address, port, address };
}

/**
 * The network failure `err` stands for (it, or an error in its `cause` chain, carries one of the codes above), or
 * undefined. `target` (the URL asked for) names the host and port when the error does not, and wins when both do.
 */
export function networkFailureOf(err: unknown, target?: NetworkTarget): NetworkFailure | undefined {
  const carrier = findCarrier(err);
  if (!carrier) return undefined;
  const code = carrier.code as string;
  const fromError = hostPortInError(carrier);
  const fromTarget = hostPortOf(target);
  const host = fromTarget.host ?? fromError.host;
  const failure: NetworkFailure = {
    reason: REASONS[code]!,
    code,
    message: typeof carrier.message === "string" ? carrier.message : code,
  };
  if (host !== undefined) failure.host = host;
  const port = fromTarget.port ?? fromError.port;
  if (port !== undefined) failure.port = port;
  if (fromError.address !== undefined && fromError.address !== host) failure.address = fromError.address;
  const syscall = text(carrier.syscall);
  if (syscall !== undefined) failure.syscall = syscall;
  if (typeof carrier.timeoutMs === "number" && Number.isFinite(carrier.timeoutMs)) failure.timeoutMs = carrier.timeoutMs;
  return failure;
}

/** `host:port` (`[::1]:8080` for IPv6), the host alone, or "the upstream". */
function where(f: Pick<NetworkFailure, "host" | "port">): string {
  if (f.host === undefined) return "the upstream";
  const host = f.host.includes(":") ? `[${f.host}]` : f.host;
  return f.port === undefined ? host : `${host}:${f.port}`;
}

/** The message of an `upstream_unavailable` error: the kind, where, and the code. */
function describe(f: NetworkFailure): string {
  const at = where(f);
  switch (f.code) {
    case "ECONNREFUSED":
      return `connection refused by ${at} (ECONNREFUSED)`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `cannot resolve ${f.host ?? "the upstream's host name"} (${f.code})`;
    case "ECONNRESET":
      return `connection reset by ${at} (ECONNRESET)`;
    case "EPIPE":
      return `connection closed by ${at} (EPIPE)`;
    case "UND_ERR_SOCKET":
      return `connection closed by ${at} (UND_ERR_SOCKET: ${f.message})`;
    case "UND_ERR_CONNECT_TIMEOUT":
      return `connecting to ${at} timed out (UND_ERR_CONNECT_TIMEOUT)`;
    case "UND_ERR_HEADERS_TIMEOUT":
      return `${at} sent no response headers in time (UND_ERR_HEADERS_TIMEOUT)`;
    case "UND_ERR_BODY_TIMEOUT":
      return `${at} stopped sending the response body (UND_ERR_BODY_TIMEOUT)`;
    default:
      return f.timeoutMs !== undefined ? `${at} did not answer within ${f.timeoutMs} ms (${f.code})` : `the connection to ${at} timed out (${f.code})`;
  }
}

/** The `upstream_unavailable` HandlerError of a network failure; `cause` is the original error. */
export function upstreamUnavailable(failure: NetworkFailure, cause?: unknown): HandlerError {
  const details: Record<string, unknown> = { reason: failure.reason, code: failure.code };
  if (failure.host !== undefined) details.host = failure.host;
  if (failure.port !== undefined) details.port = failure.port;
  if (failure.address !== undefined) details.address = failure.address;
  if (failure.syscall !== undefined) details.syscall = failure.syscall;
  if (failure.timeoutMs !== undefined) details.timeout_ms = failure.timeoutMs;
  return fail(UPSTREAM_UNAVAILABLE, describe(failure), { retryable: true, details, ...(cause !== undefined ? { cause } : {}) });
}

/**
 * The `upstream_unavailable` HandlerError for `err` when it is a network failure (see `networkFailureOf`), with `err`
 * as its cause; undefined for anything else, a HandlerError included (its code was chosen already).
 */
export function upstreamUnavailableError(err: unknown, target?: NetworkTarget): HandlerError | undefined {
  if (HandlerError.is(err)) return undefined;
  const failure = networkFailureOf(err, target);
  return failure ? upstreamUnavailable(failure, err) : undefined;
}

/**
 * The `upstream_unavailable` HandlerError of a request to `target` that got no answer within `timeoutMs` (a timeout
 * the caller set, such as `ctx.fetch`'s): its cause has the code `ETIMEDOUT` and names the host and port.
 */
export function upstreamTimeoutError(target: NetworkTarget, timeoutMs: number, cause?: unknown): HandlerError {
  const at = hostPortOf(target);
  const timeout = Object.assign(new Error(`${where(at)} did not answer within ${timeoutMs} ms`, cause === undefined ? undefined : { cause }), {
    code: "ETIMEDOUT",
    ...at,
    timeoutMs,
  });
  return upstreamUnavailable(networkFailureOf(timeout, target)!, timeout);
}

/**
 * The wire `cause` of a network failure in `err`'s chain: `{ code, message, details: { host, port, address?, syscall? } }`;
 * undefined when there is none. `target` names the host and port as in `networkFailureOf`.
 */
export function networkFailureCause(err: unknown, target?: NetworkTarget): NonNullable<FabricErrorBody["cause"]> | undefined {
  const f = networkFailureOf(err, target);
  if (!f) return undefined;
  const details: Record<string, unknown> = {};
  if (f.host !== undefined) details.host = f.host;
  if (f.port !== undefined) details.port = f.port;
  if (f.address !== undefined) details.address = f.address;
  if (f.syscall !== undefined) details.syscall = f.syscall;
  return { code: f.code, message: f.message, ...(Object.keys(details).length > 0 ? { details } : {}) };
}
