/**
 * What every NodeFabric service shares: a fastify instance with the v1 error envelope on every non-2xx,
 * Ajv2020 validation, strict JSON bodies, 405 detection, limits and load shedding by default (see edge.ts), and
 * GET /v1/health and /v1/version; its OpenAPI document and docs page (api-docs.ts).
 */
import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import FindMyWay from "find-my-way";
import { FabricError, errorEnvelope, type ErrorBody } from "./errors.js";
import { STORE_RETRY_AFTER_SECONDS, storeUnavailable } from "../store/store-unavailable.js";
import { dedupeIssues, exceedsJsonDepth, issuesFromAjv, validatorCompiler } from "./validation.js";
import { isLoopbackHostHeader, lingerOnClose, onClientError, resolveLimits, withoutFilePaths, type ServiceLimits } from "./edge.js";
import { SERVICE_VERSION } from "../version.js";
import { clock } from "../clock.js";
import { installAuth, type InboundAuthOptions } from "./auth-plugin.js";
import { installApiDocs } from "./api-docs.js";
import { audienceOf } from "./auth-scopes.js";
import type { ServiceName } from "../service-names.js";
import { observed } from "../observe/channels.js";
import { ATTR, context, extractTraceContext, SpanKind, SpanStatusCode, trace, tracer, tracingOn, type Span } from "../observe/tracing.js";

// The service names live in a file of their own, so that the auth files need not import this one (no import loop).
export { SERVICE_NAMES, type ServiceName } from "../service-names.js";

export type HealthStatus = "ok" | "degraded" | "down";
export interface HealthCheck {
  name: string;
  status: HealthStatus;
  message?: string;
  details?: Record<string, unknown>;
}

export interface ServiceOptions {
  name: ServiceName;
  /** pino options, `false` to silence. */
  logger?: boolean | Record<string, unknown>;
  /** Largest accepted body in bytes (over `limits.maxBodyBytes`). */
  bodyLimit?: number;
  /** Requests in flight past which the service sheds load with 503 + Retry-After, 0 = no limit (over `limits.maxInFlight`). */
  maxInFlight?: number;
  /** The limits of its HTTP edge; each one left out has its default (DEFAULT_SERVICE_LIMITS). */
  limits?: ServiceLimits;
  /** Contributes the `checks` of GET /v1/health. */
  health?: () => HealthCheck[] | Promise<HealthCheck[]>;
  /** Contributes `extensions` of GET /v1/health, beside the service's name and authentication. */
  healthExtensions?: () => Record<string, unknown>;
  /** How callers are authenticated (default: disabled). */
  auth?: InboundAuthOptions;
}

const HTTP_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/** Maps the status of a framework error onto the catalogue's code for it. */
function codeForStatus(status: number): string {
  switch (status) {
    case 401: return "unauthenticated";
    case 403: return "permission_denied";
    case 404: return "route_not_found";
    case 405: return "method_not_allowed";
    case 413: return "payload_too_large";
    case 415: return "unsupported_media_type";
    case 429: return "rate_limited";
    case 503: return "unavailable";
    default: return status >= 500 ? "internal_error" : "invalid_request";
  }
}

/** Turns anything thrown in a request into a status, headers and an ErrorEnvelope. */
export function toErrorResponse(err: unknown): { status: number; headers: Record<string, string>; body: { error: ErrorBody } } {
  if (FabricError.is(err)) {
    return { status: err.statusCode, headers: err.headers ?? {}, body: { error: err.toBody() } };
  }
  const e = err as FastifyError & { validation?: unknown[]; validationContext?: string };
  if (Array.isArray(e.validation)) {
    const issues = dedupeIssues(issuesFromAjv(e.validation as never, e.validationContext));
    const where = e.validationContext === "body" ? "request body" : e.validationContext ?? "request";
    return { status: 400, headers: {}, body: errorEnvelope("invalid_request", `the ${where} is invalid`, { errors: issues }) };
  }
  switch (e.code) {
    case "FST_ERR_BAD_URL":
      return { status: 400, headers: {}, body: errorEnvelope("invalid_request", "the request path is not valid percent-encoded UTF-8", { errors: [{ path: "/", location: "url", message: "is not valid percent-encoded UTF-8" }] }) };
    case "FST_ERR_MAX_PARAM_LENGTH":
      return { status: 400, headers: {}, body: errorEnvelope("invalid_request", `an id in the request path is longer than ${MAX_PARAM_LENGTH} characters`, { errors: [{ path: "/", location: "params", message: `is longer than ${MAX_PARAM_LENGTH} characters` }] }) };
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return { status: 413, headers: {}, body: errorEnvelope("payload_too_large", "the request body is larger than this service accepts") };
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return { status: 415, headers: {}, body: errorEnvelope("unsupported_media_type", "request bodies must be application/json") };
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return { status: 400, headers: {}, body: errorEnvelope("invalid_request", `the request body is not valid JSON: ${e.message}`) };
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return { status: 400, headers: {}, body: errorEnvelope("invalid_request", "the Content-Length header does not match the body") };
  }
  if (e instanceof SyntaxError) {
    return { status: 400, headers: {}, body: errorEnvelope("invalid_request", `the request body is not valid JSON: ${e.message}`) };
  }
  // The database is down (or out of reach): an outage to wait out, retryable; the client is not told where it is.
  if (storeUnavailable(err)) {
    return {
      status: 503,
      headers: { "retry-after": String(STORE_RETRY_AFTER_SECONDS) },
      body: errorEnvelope("unavailable", "the service's database cannot be reached right now; retry later", { dependency: "store" }, true),
    };
  }
  const status = typeof e.statusCode === "number" && e.statusCode >= 400 && e.statusCode < 600 ? e.statusCode : 500;
  if (status >= 500) {
    return { status: 500, headers: {}, body: errorEnvelope("internal_error", "the service failed to handle the request") };
  }
  return { status, headers: {}, body: errorEnvelope(codeForStatus(status), e.message || "the request was refused") };
}

/** The 400 for a request body nested deeper than `maxDepth` (limits.max_json_depth). */
export function jsonTooDeep(maxDepth: number): FabricError {
  return new FabricError("invalid_request", `the request body nests objects and arrays deeper than ${maxDepth} levels`, {
    details: { errors: [{ path: "/", location: "body", message: `nests objects and arrays deeper than ${maxDepth} levels` }], max_depth: maxDepth },
  });
}

/**
 * The error a route's schema check raises for a request part that breaks its schema (Ajv's errors), for a body a
 * service validates without a route of its own: toErrorResponse answers it as it answers the route's.
 */
export function schemaViolation(errors: readonly unknown[], part: "body" | "querystring" | "params"): Error {
  return Object.assign(new Error(`the ${part} is invalid`), { validation: [...errors], validationContext: part });
}

/** Sends an ErrorEnvelope for anything thrown. */
export function sendError(reply: FastifyReply, err: unknown): FastifyReply {
  const { status, headers, body } = toErrorResponse(err);
  return reply.code(status).headers(headers).type("application/json; charset=utf-8").send(body);
}

/** Longest path parameter the router matches; ids are at most 128 characters, so a longer one is refused (400). */
const MAX_PARAM_LENGTH = 512;

/** Event streams and long polls: held open for as long as the run takes, so bounded apart from other requests. */
function isLongLived(req: FastifyRequest): boolean {
  if (req.method === "GET") {
    const q = req.url.indexOf("?");
    return (q < 0 ? req.url : req.url.slice(0, q)).endsWith("/events");
  }
  const prefer = req.headers.prefer;
  return prefer !== undefined && /(^|[\s,])wait\s*=/i.test(Array.isArray(prefer) ? prefer.join(",") : prefer);
}

/** The route a request matched, as the contract writes it (`/v1/runs/:run_id:cancel`), or `unmatched`. */
function routePattern(req: FastifyRequest): string {
  const url = req.routeOptions.url;
  // Fastify's patterns escape a literal colon as "::".
  return url === undefined ? "unmatched" : url.replaceAll("::", ":");
}

const SPAN = Symbol("nodefabric.span");
const STARTED = Symbol("nodefabric.started");
type Traced = FastifyRequest & { [SPAN]?: Span; [STARTED]?: number };

/**
 * Every request in a span of its own (a child of the caller's `traceparent`), active while the request is handled so
 * the spans and outgoing calls it makes descend from it; and its latency told to observers (channels.ts). Without an
 * SDK the span records nothing and nothing is set; without a subscriber no time is taken.
 */
function traceRequests(app: FastifyInstance, service: ServiceName): void {
  // Callback style, and first: the rest of the request runs inside `context.with`, so the span is its parent.
  app.addHook("onRequest", (req, _reply, done) => {
    if (observed.httpRequest.hasSubscribers) (req as Traced)[STARTED] = performance.now();
    if (!tracingOn()) {
      done();
      return;
    }
    const parent = extractTraceContext(req.headers);
    const route = routePattern(req);
    const span = tracer.startSpan(`${req.method} ${route}`, {
      kind: SpanKind.SERVER,
      attributes: { "http.request.method": req.method, "http.route": route, "url.path": req.url.split("?")[0], [ATTR.service]: service },
    }, parent);
    // Active even when not sampled: the caller's decision goes on to every span and call the request makes.
    if (span.isRecording()) (req as Traced)[SPAN] = span;
    context.with(trace.setSpan(parent, span), done);
  });
  app.addHook("onResponse", (req, reply, done) => {
    const r = req as Traced;
    const span = r[SPAN];
    if (span) {
      span.setAttribute("http.response.status_code", reply.statusCode);
      if (reply.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    }
    const started = r[STARTED];
    if (started !== undefined && observed.httpRequest.hasSubscribers) {
      observed.httpRequest.publish({ service, method: req.method, route: routePattern(req), status: reply.statusCode, duration_ms: performance.now() - started });
    }
    done();
  });
}

/** Creates a service's fastify instance with the shared v1 behaviour; the caller registers its routes. */
export function createService(options: ServiceOptions): FastifyInstance {
  const limits = resolveLimits(options.limits);
  const auth = options.auth ?? { mode: "disabled" as const };
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: options.bodyLimit ?? limits.maxBodyBytes,
    return503OnClosing: false,
    forceCloseConnections: true,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    requestIdHeader: "x-request-id",
    logController: new LogController({ disableRequestLogging: true }),
    // Timeouts: a client gets headersTimeoutMs to send its head and requestTimeoutMs for the whole request; an idle
    // keep-alive connection is closed after keepAliveTimeoutMs. Answers already being sent (streams) are not bounded.
    keepAliveTimeout: Math.max(1, limits.keepAliveTimeoutMs),
    requestTimeout: limits.requestTimeoutMs,
    http: {
      headersTimeout: limits.requestTimeoutMs > 0 ? Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) : limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      maxHeaderSize: limits.maxHeaderBytes,
      // How often node looks for connections past those timeouts.
      connectionsCheckingInterval: Math.max(25, Math.min(1_000, Math.floor(Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs || Infinity) / 4))),
    },
    // What node refuses before fastify sees it (431, 408, malformed HTTP), and bad paths, answered with an envelope.
    clientErrorHandler: onClientError,
    frameworkErrors: (err, req, reply) => {
      lingerOnClose(req.raw.socket);
      return sendError(reply.header("connection", "close"), err);
    },
  });
  app.setValidatorCompiler(validatorCompiler);

  let closing = false;
  let inFlight = 0;
  let streams = 0;
  const maxInFlight = options.maxInFlight ?? limits.maxInFlight;
  const maxStreams = limits.maxStreams;
  app.addHook("onClose", async () => {
    closing = true;
  });
  traceRequests(app, options.name);
  // First of all hooks: refusing costs less than anything a request would do before it.
  app.addHook("onRequest", async (req, reply) => {
    if (closing) {
      reply.header("connection", "close");
      throw new FabricError("unavailable", "the service is shutting down", { headers: { "retry-after": "1" }, retryable: true });
    }
    // Without authentication a service is for this machine only: refuse requests addressed to another name.
    if (auth.mode === "disabled") {
      const host = req.headers.host;
      if (host !== undefined && !isLoopbackHostHeader(host)) {
        throw new FabricError(
          "permission_denied",
          `this service runs without authentication and answers only requests addressed to a loopback name (localhost, *.localhost, 127.0.0.1, [::1]), not to ${JSON.stringify(host.slice(0, 100))}`,
        );
      }
    }
    if (req.url.startsWith("/v1/health") || req.url.startsWith("/v1/version")) return;
    const longLived = isLongLived(req);
    if (longLived ? maxStreams <= 0 : maxInFlight <= 0) return;
    if (longLived) {
      if (streams >= maxStreams) {
        throw new FabricError("unavailable", "the service has as many event streams and long polls open as it allows; retry later", { headers: { "retry-after": "1" }, retryable: true });
      }
      streams++;
    } else {
      if (inFlight >= maxInFlight) {
        throw new FabricError("unavailable", "the service is overloaded; retry later", { headers: { "retry-after": "1" }, retryable: true });
      }
      inFlight++;
    }
    let counted = true;
    const release = () => {
      if (!counted) return;
      counted = false;
      if (longLived) streams--;
      else inFlight--;
    };
    reply.raw.once("finish", release);
    reply.raw.once("close", release);
  });
  // An error answered before the whole request arrived closes the connection, reading what is still on the way
  // meanwhile, so a client still sending its body reads the answer (a 413 above all) instead of a reset.
  app.addHook("onSend", (req, reply, payload, done) => {
    if (reply.statusCode >= 400 && req.raw.complete === false) {
      reply.header("connection", "close");
      lingerOnClose(req.raw.socket);
    }
    done(null, payload);
  });

  // Before auth, so auth finds the docs routes public; before any route, so the document sees them all.
  installApiDocs(app, { service: options.name, auth: auth.mode });
  installAuth(app, { ...auth, service: options.name });

  // Strict JSON only. An empty body with a JSON content type counts as no body, so `:cancel` works from curl.
  app.removeAllContentTypeParsers();
  const parseJson = app.getDefaultJsonParser("error", "error");
  const maxDepth = limits.maxJsonDepth;
  app.addContentTypeParser("application/json", { parseAs: "string" }, (req, body, done) => {
    const text = body as string;
    if (text === "" || text.trim() === "") {
      done(null, undefined);
      return;
    }
    // Checked before parsing: nothing recursive may meet a body nested deeper than the limit.
    if (maxDepth > 0 && exceedsJsonDepth(text, maxDepth)) {
      done(jsonTooDeep(maxDepth), undefined);
      return;
    }
    parseJson(req, text, done);
  });

  // A second router over the same routes tells "wrong method" (405) from "no such path" (404).
  const shadow = FindMyWay({ ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH });
  app.addHook("onRoute", (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const m of methods) {
      if (m === "HEAD" || m === "OPTIONS") continue;
      try {
        shadow.on(m as never, route.url, () => undefined);
      } catch {
        // the same route twice (fastify refuses it itself)
      }
    }
  });

  app.setErrorHandler((err, req, reply) => {
    const res = toErrorResponse(err);
    if (res.status >= 500 && res.body.error.code === "internal_error") req.log.error({ err }, "request failed");
    return reply.code(res.status).headers(res.headers).type("application/json; charset=utf-8").send(res.body);
  });

  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split("?")[0] ?? req.url;
    const allowed = HTTP_METHODS.filter((m) => m !== req.method && shadow.find(m as never, path) !== null);
    if (allowed.length > 0) {
      return sendError(
        reply,
        new FabricError("method_not_allowed", `${req.method} is not allowed on ${path}`, { headers: { allow: allowed.join(", ") }, details: { allowed_methods: allowed } }),
      );
    }
    return sendError(reply, new FabricError("route_not_found", `no route ${req.method} ${path}`));
  });

  // How callers are checked, so a service running without authentication is never a surprise.
  const authInfo = withoutFilePaths({ mode: auth.mode, audience: audienceOf(options.name), ...(auth.verifier ? { keys: auth.verifier.describeKeys() } : {}) });
  app.get("/v1/health", async (_req, reply) => {
    // Useful to an operator, but no absolute file path: where this machine keeps its data and keys is nobody's business.
    const checks = withoutFilePaths(options.health ? await options.health() : []);
    const status: HealthStatus = checks.some((c) => c.status === "down") ? "down" : checks.some((c) => c.status === "degraded") ? "degraded" : "ok";
    const health = { status, time: clock.isoNow(), checks, extensions: { "nodefabric.service": options.name, "nodefabric.auth": authInfo, ...options.healthExtensions?.() } };
    if (status === "down") {
      return sendError(reply, new FabricError("unavailable", `${options.name} is down`, { details: { health }, headers: { "retry-after": "5" } }));
    }
    return health;
  });

  app.get("/v1/version", async () => ({
    service_name: options.name,
    service_version: SERVICE_VERSION,
    supported_api_versions: ["v1"],
    extensions: { "nodefabric.implementation": "nodefabric" },
  }));

  return app;
}
