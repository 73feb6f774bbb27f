/**
 * The one factory for service-to-service HTTP: a pooled undici client per base URL, with timeouts,
 * JSON in and out, and non-2xx answers turned back into FabricErrors from their ErrorEnvelope.
 */
import { Pool, type Dispatcher } from "undici";
import { context, endSpan, injectTraceHeaders, recording, SpanKind, trace, tracer, type Span } from "../observe/tracing.js";
import { FabricError, NOT_JSON, TOO_LARGE, type ErrorBody, type RequestErrorCode, ERROR_STATUS } from "../http/errors.js";

export interface HttpClientOptions {
  /** Connections kept to the base URL (default 64). */
  connections?: number;
  /** Time to wait for response headers, in ms (default 30 s). */
  headersTimeoutMs?: number;
  /** Time allowed between body chunks, in ms (default 30 s; 0 for streams). */
  bodyTimeoutMs?: number;
  /** Headers sent on every request (auth and tracing come through here). */
  headers?: () => Record<string, string> | Promise<Record<string, string>>;
  /** The largest answer body read, in bytes (default 256 MiB): a peer cannot make this process hold more. */
  maxResponseBytes?: number;
}

/** The default bound on an answer's body: room for a registry page of large node types. */
export const DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024 * 1024;

/** The bound on an executor's answer: one result, whose outputs a coordinator holds and stores. */
export const MAX_EXECUTOR_ANSWER_BYTES = 32 * 1024 * 1024;

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Per-request headers timeout in ms. */
  timeoutMs?: number;
}

export interface JsonResponse<T> {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: T;
}

/** A JSON client bound to one service's base URL. */
export class HttpClient {
  readonly baseUrl: string;
  private readonly pool: Pool;
  private readonly extraHeaders?: HttpClientOptions["headers"];
  private readonly maxResponseBytes: number;

  constructor(baseUrl: string, options: HttpClientOptions = {}) {
    const u = new URL(baseUrl);
    this.baseUrl = u.origin;
    this.pool = new Pool(u.origin, {
      connections: options.connections ?? 64,
      pipelining: 1,
      headersTimeout: options.headersTimeoutMs ?? 30_000,
      bodyTimeout: options.bodyTimeoutMs ?? 30_000,
      keepAliveTimeout: 10_000,
    });
    this.extraHeaders = options.headers;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  }

  /** Reads an answer's body as text, refusing one larger than `maxResponseBytes` without holding it. */
  private async readBody(res: Dispatcher.ResponseData): Promise<string> {
    const limit = this.maxResponseBytes;
    const tooLarge = () => {
      res.body.destroy();
      return new FabricError("upstream_unavailable", `${this.baseUrl} answered ${res.statusCode} with a body larger than ${limit} bytes`, {
        retryable: false,
        details: { status: res.statusCode, reason: TOO_LARGE, limit },
      });
    };
    const declared = Number(res.headers["content-length"]);
    if (Number.isFinite(declared) && res.headers["content-length"] !== undefined) {
      if (declared > limit) throw tooLarge();
      return res.body.text();
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > limit) throw tooLarge();
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks).toString("utf8");
  }

  private async buildHeaders(extra?: Record<string, string>, hasBody?: boolean): Promise<Record<string, string>> {
    const h: Record<string, string> = { accept: "application/json" };
    if (hasBody) h["content-type"] = "application/json";
    if (this.extraHeaders) Object.assign(h, await this.extraHeaders());
    if (extra) Object.assign(h, extra);
    return h;
  }

  private pathWithQuery(path: string, query?: RequestOptions["query"]): string {
    if (!query) return path;
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) qs.set(k, String(v));
    const s = qs.toString();
    return s ? `${path}?${s}` : path;
  }

  /**
   * A client span for a call to another service, when the caller is traced; its context goes out as `traceparent`.
   * Undefined (and no header) when nothing is recorded.
   */
  private clientSpan(method: string, path: string): Span | undefined {
    if (!recording()) return undefined;
    const u = new URL(path, this.baseUrl);
    // Named by the method alone, as OpenTelemetry's HTTP conventions do when the route is not known: paths hold ids.
    return tracer.startSpan(method, {
      kind: SpanKind.CLIENT,
      attributes: { "http.request.method": method, "url.full": u.origin + u.pathname, "server.address": u.hostname, "server.port": Number(u.port) || 80 },
    });
  }

  /** Headers with the trace context of `span` (or the active one), for the request it covers. */
  private async tracedHeaders(span: Span | undefined, extra: Record<string, string> | undefined, hasBody: boolean): Promise<Record<string, string>> {
    const headers = await this.buildHeaders(extra, hasBody);
    // Without a client span (nothing recorded), the active context still goes out: an unsampled trace stays unsampled.
    return injectTraceHeaders(headers, span ? trace.setSpan(context.active(), span) : context.active());
  }

  /** Sends a request and returns status, headers and parsed JSON body (null when empty); never throws for a status. */
  async request<T = unknown>(method: Dispatcher.HttpMethod, path: string, body?: unknown, options: RequestOptions = {}): Promise<JsonResponse<T>> {
    const span = this.clientSpan(method, path);
    try {
      const res = await this.send<T>(method, path, body, options, span);
      span?.setAttribute("http.response.status_code", res.status);
      if (span) endSpan(span, res.status >= 500 ? { code: (res.body as { error?: { code?: string } } | null)?.error?.code, message: `answered ${res.status}` } : undefined);
      return res;
    } catch (err) {
      if (span) endSpan(span, err);
      throw err;
    }
  }

  private async send<T>(method: Dispatcher.HttpMethod, path: string, body: unknown, options: RequestOptions, span: Span | undefined): Promise<JsonResponse<T>> {
    const hasBody = body !== undefined;
    let res: Dispatcher.ResponseData;
    try {
      res = await this.pool.request({
        method,
        path: this.pathWithQuery(path, options.query),
        headers: await this.tracedHeaders(span, options.headers, hasBody),
        body: hasBody ? JSON.stringify(body) : undefined,
        signal: options.signal,
        headersTimeout: options.timeoutMs,
      });
    } catch (err) {
      throw transportError(this.baseUrl, err);
    }
    const text = await this.readBody(res);
    let parsed: unknown = null;
    if (text.length > 0) {
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new FabricError("upstream_unavailable", `${this.baseUrl} answered ${res.statusCode} with a body that is not JSON`, {
          retryable: true,
          details: { status: res.statusCode, reason: NOT_JSON },
        });
      }
    }
    return { status: res.statusCode, headers: res.headers, body: parsed as T };
  }

  /** Sends a request and returns the JSON body of a 2xx; a non-2xx is thrown as the FabricError it carries. */
  async json<T = unknown>(method: Dispatcher.HttpMethod, path: string, body?: unknown, options: RequestOptions = {}): Promise<T> {
    const res = await this.request<T>(method, path, body, options);
    if (res.status >= 200 && res.status < 300) return res.body;
    throw errorFromResponse(this.baseUrl, res.status, res.body, res.headers);
  }

  /** Opens a raw streaming request (NDJSON streams). The caller consumes `body`. */
  async stream(path: string, options: RequestOptions = {}): Promise<Dispatcher.ResponseData> {
    try {
      return await this.pool.request({
        method: "GET",
        path: this.pathWithQuery(path, options.query),
        headers: injectTraceHeaders(await this.buildHeaders({ accept: "application/x-ndjson", ...options.headers })),
        signal: options.signal,
        bodyTimeout: 0,
      });
    } catch (err) {
      throw transportError(this.baseUrl, err);
    }
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}

/** A transport failure (refused, reset, timed out) as a retryable 502/504. */
export function transportError(baseUrl: string, err: unknown): FabricError {
  const e = err as { code?: string; name?: string; message?: string };
  if (e.name === "AbortError") return new FabricError("upstream_timeout", `request to ${baseUrl} was aborted`, { retryable: true, cause: err });
  if (e.code === "UND_ERR_HEADERS_TIMEOUT" || e.code === "UND_ERR_BODY_TIMEOUT" || e.code === "UND_ERR_CONNECT_TIMEOUT") {
    return new FabricError("upstream_timeout", `${baseUrl} did not answer in time`, { retryable: true, cause: err });
  }
  return new FabricError("upstream_unavailable", `${baseUrl} cannot be reached (${e.code ?? e.message ?? "error"})`, { retryable: true, cause: err });
}

/** Rebuilds a FabricError from a peer's ErrorEnvelope, keeping its code when it is one of ours. */
export function errorFromResponse(baseUrl: string, status: number, body: unknown, headers: Record<string, string | string[] | undefined> = {}): FabricError {
  const err = (body as { error?: ErrorBody } | null)?.error;
  const retryAfter = headers["retry-after"];
  const extra = typeof retryAfter === "string" ? { "retry-after": retryAfter } : undefined;
  if (err && typeof err.code === "string" && err.code in ERROR_STATUS) {
    return new FabricError(err.code as RequestErrorCode, err.message, { details: err.details, retryable: err.retryable ?? status >= 500, headers: extra });
  }
  const code: RequestErrorCode = status >= 500 ? "upstream_unavailable" : status === 404 ? "route_not_found" : "invalid_request";
  return new FabricError(code, err?.message ?? `${baseUrl} answered ${status}`, { details: err?.details, retryable: status >= 500, headers: extra });
}
