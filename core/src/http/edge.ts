/**
 * The HTTP edge every service shares, below fastify: the limits a service runs with by default, the answers written
 * straight to the socket when node refuses a request before fastify sees it (431, 408, malformed HTTP), closing a
 * connection without losing the answer to a client still sending its body, the Host check of a service running
 * without authentication, and keeping file paths out of what a service tells about itself.
 */
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { errorEnvelope, type ErrorEnvelopeBody } from "./errors.js";

/** The limits of a service's HTTP edge. Every one has a default (DEFAULT_SERVICE_LIMITS). */
export interface ServiceLimits {
  /** Deepest nesting of objects and arrays in a JSON request body, the top level counting as 1; deeper gets 400. */
  maxJsonDepth?: number;
  /** Largest request body in bytes; larger gets 413. */
  maxBodyBytes?: number;
  /** Requests in flight past which the service answers 503 `unavailable` with Retry-After (0: no bound). Event streams and `Prefer: wait` long polls are bounded by `maxStreams` instead. */
  maxInFlight?: number;
  /** Event streams (`…/events`) and `Prefer: wait` long polls open at once past which new ones get 503 with Retry-After (0: no bound). */
  maxStreams?: number;
  /** Largest request head (request line and headers) in bytes; larger gets 431. */
  maxHeaderBytes?: number;
  /** Time a client has to send its request head, from its first byte or from the connection's start (ms); then 408 and the connection closes. */
  headersTimeoutMs?: number;
  /** Time a client has to send its whole request, body included (ms; 0: no bound); then 408 and the connection closes. */
  requestTimeoutMs?: number;
  /** How long an idle keep-alive connection is kept open (ms). */
  keepAliveTimeoutMs?: number;
}

/** The one place the defaults of every limit are set (the fabric's `limits` configuration starts from these). */
export const DEFAULT_SERVICE_LIMITS: Readonly<Required<ServiceLimits>> = Object.freeze({
  maxJsonDepth: 128,
  maxBodyBytes: 1024 * 1024,
  maxInFlight: 1024,
  maxStreams: 10_000,
  maxHeaderBytes: 16 * 1024,
  headersTimeoutMs: 20_000,
  requestTimeoutMs: 60_000,
  keepAliveTimeoutMs: 5_000,
});

/** The limits a service runs with: the given ones over the defaults. */
export function resolveLimits(limits: ServiceLimits = {}): Required<ServiceLimits> {
  const out = { ...DEFAULT_SERVICE_LIMITS };
  for (const [k, v] of Object.entries(limits) as Array<[keyof ServiceLimits, number | undefined]>) {
    if (typeof v === "number" && Number.isFinite(v) && v >= 0) out[k] = v;
  }
  return out;
}

// ------------------------------------------------------------------------------------------------ answers on the socket

/** Writes a complete HTTP/1.1 answer carrying an ErrorEnvelope, for requests node refuses before fastify sees them. */
function writeEnvelope(socket: Socket, status: number, body: ErrorEnvelopeBody): void {
  const text = JSON.stringify(body);
  socket.write(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Error"}\r\n` +
      `content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
  );
}

const lingering = new WeakSet<Socket>();
/** How long a connection answered with an error keeps reading (and dropping) what its client still sends. */
const LINGER_MS = 3_000;
/** …and how long it waits for more once the client pauses. */
const LINGER_IDLE_MS = 500;

/**
 * Closes a connection whose client may still be sending a body we will not read, without losing the answer already
 * written: closing a socket with unread bytes makes the kernel send a reset, which a client still writing sees as a
 * failed write instead of our answer. So: send our FIN, keep reading and dropping what arrives, and close once the
 * client has finished, paused, or after a bounded time.
 */
export function lingeringClose(socket: Socket): void {
  if (socket.destroyed) return;
  if (lingering.has(socket)) return;
  lingering.add(socket);
  // What still arrives is the rest of a request we answered: the HTTP parser must not see it (nor a request after it).
  socket.removeAllListeners("data");
  socket.on("data", onData);
  socket.on("error", () => undefined);
  let idle: NodeJS.Timeout | undefined;
  const done = () => {
    clearTimeout(cap);
    clearTimeout(idle);
    socket.destroy();
  };
  const cap = setTimeout(done, LINGER_MS);
  cap.unref();
  function onData() {
    clearTimeout(idle);
    idle = setTimeout(done, LINGER_IDLE_MS);
    idle.unref();
  }
  onData();
  socket.once("end", done);
  socket.once("close", () => {
    clearTimeout(cap);
    clearTimeout(idle);
  });
  socket.resume();
  // node's HTTP parser stops reading the socket's handle itself when a request's body is not read: start it again.
  const handle = (socket as Socket & { _handle?: { reading?: boolean; readStart?: () => number } })._handle;
  if (handle && handle.reading !== true && typeof handle.readStart === "function") {
    handle.reading = true;
    handle.readStart();
  }
  if (socket.writable) socket.end();
}

/** Makes node's own close of this connection (after an answer with `connection: close`) a lingering close. */
export function lingerOnClose(socket: Socket | null | undefined): void {
  if (!socket || socket.destroyed) return;
  (socket as Socket & { destroySoon?: () => void }).destroySoon = () => lingeringClose(socket);
}

/** The answer, if any, to a request node refused while reading it (fastify's `clientErrorHandler`). */
export function onClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  if (lingering.has(socket)) {
    // Already answered; what the client still sends does not matter.
    socket.destroy();
    return;
  }
  const message = socket as Socket & { _httpMessage?: { headersSent?: boolean } };
  const answered = message._httpMessage?.headersSent === true;
  if (!socket.writable || answered) {
    socket.destroy();
    return;
  }
  switch (err.code) {
    case "ERR_HTTP_REQUEST_TIMEOUT":
      // A client too slow to send its request is not waited for any longer.
      writeEnvelope(socket, 408, errorEnvelope("invalid_request", "the request was not received in time", { errors: [{ path: "/", message: "the request was not received in time" }] }));
      socket.destroySoon();
      return;
    case "HPE_HEADER_OVERFLOW":
      writeEnvelope(socket, 431, errorEnvelope("invalid_request", "the request headers are larger than this service accepts", { errors: [{ path: "/", location: "headers", message: "are larger than this service accepts" }] }));
      break;
    default:
      writeEnvelope(socket, 400, errorEnvelope("invalid_request", "the request is not valid HTTP/1.1", { errors: [{ path: "/", message: `is not valid HTTP/1.1 (${err.code ?? "parse error"})` }] }));
  }
  lingeringClose(socket);
}

// ------------------------------------------------------------------------------------------------ Host check

/**
 * Whether a Host header names this machine by a loopback name: `localhost`, `*.localhost`, 127.0.0.0/8 or `[::1]`,
 * with or without a port. A service without authentication answers only those, so a web page whose own name resolves
 * to 127.0.0.1 (DNS rebinding) cannot use a browser to talk to it.
 */
export function isLoopbackHostHeader(host: string): boolean {
  let name = host.trim().toLowerCase();
  if (name.startsWith("[")) {
    const end = name.indexOf("]");
    if (end < 0) return false;
    const rest = name.slice(end + 1);
    if (rest !== "" && !/^:\d{1,5}$/.test(rest)) return false;
    const v6 = name.slice(1, end);
    return v6 === "::1" || v6 === "0:0:0:0:0:0:0:1" || /^::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v6);
  }
  const colon = name.lastIndexOf(":");
  if (colon >= 0) {
    if (!/^\d{1,5}$/.test(name.slice(colon + 1))) return false;
    name = name.slice(0, colon);
  }
  if (name.endsWith(".")) name = name.slice(0, -1);
  if (name === "localhost" || (name.endsWith(".localhost") && /^[a-z0-9.-]+$/.test(name))) return true;
  const m = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(name);
  return m !== null && m.slice(1).every((o) => Number(o) <= 255);
}

// ------------------------------------------------------------------------------------------------ no file paths

const PATH_IN_TEXT = /(^|[\s"'`(=,;:[])((?:file:\/\/)?(?:\/[^\s"'`(),;/]+){2,}\/?|[A-Za-z]:\\[^\s"'`(),;]+)/g;

/**
 * A file path as it may be shown: relative to the working directory when it lies under it, from `node_modules/` on
 * for an installed package, and otherwise only its last part.
 */
function shownPath(p: string, cwd: string): string {
  const plain = p.startsWith("file://") ? p.slice("file://".length) : p;
  const posix = plain.replace(/\\/g, "/");
  const base = cwd.replace(/\\/g, "/").replace(/\/+$/, "") + "/";
  if (posix.startsWith(base) && posix.length > base.length) return posix.slice(base.length);
  const nm = posix.lastIndexOf("/node_modules/");
  if (nm >= 0) return posix.slice(nm + 1);
  const parts = posix.split("/").filter(Boolean);
  return parts[parts.length - 1] ?? "";
}

/** A copy of a value in which every absolute file path inside a string is shortened (see shownPath). */
export function withoutFilePaths<T>(value: T, cwd: string = process.cwd()): T {
  const seen = new WeakSet<object>();
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === "string") return v.includes("/") || v.includes("\\") ? v.replace(PATH_IN_TEXT, (_m, lead: string, p: string) => lead + shownPath(p, cwd)) : v;
    if (typeof v !== "object" || v === null || depth > 32 || seen.has(v)) return v;
    seen.add(v);
    if (Array.isArray(v)) return v.map((x) => walk(x, depth + 1));
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = walk(x, depth + 1);
    return out;
  };
  return walk(value, 0) as T;
}
