/**
 * `http.request@1.0.0`: a template definition. The executor runs it for every node type published in the registry
 * with `extensions["nodefabric.implementation"] = { node_type_id: "http.request", version: "1.0.0" }`, under that
 * node type's schemas, and the handler reads how to call the upstream from `ctx.nodeType.extensions["nodefabric.http"]`.
 *
 * Two shapes of configuration:
 * - with `base_url`, the request is built from templates filled with the inputs (path, query, headers, body), and the
 *   outputs are the JSON body or the `response` mapping;
 * - without it, the inputs carry `{ url, method?, headers?, body? }` (a direct call), and the outputs are
 *   `{ status, headers, body }` or the `response` mapping. A URL from the inputs is a server-side request forgery risk,
 *   so a direct call is made only to hosts an operator listed in `allowed_hosts`; `http.request@1.0.0` itself lists
 *   none, so calling it directly is refused, and an operator who wants free-form calls publishes a node type
 *   implemented by it, with `allowed_hosts`.
 *
 * A node type made from an OpenAPI operation carries `extensions["nodefabric.openapi"]` instead, and runs in
 * openapi-mode.ts: the descriptor says how to call the operation, and `nodefabric.http` only bounds the exchange.
 *
 * Every request goes through `ctx.egress`, which the executor's operator controls, never a node type: its `fetch`
 * checks each address it connects to (loopback, private, link-local, metadata and other non-public addresses are
 * refused unless the executor's `executor.egress` allows them), and a secret is handed out only for a host the
 * operator bound it to (`executor.secret_hosts`). A node type's `allowed_hosts` only narrows that.
 */
import { compiledPerNodeType, defineAtomic, HandlerError, OPENAPI_EXTENSION, retryAfterMs, type AtomicContext, type HandlerEgress, type JsonObject, type JsonValue, type NodeTypeRef } from "@nodefabric/sdk";
import { boundedExchange, checkEgress, type OutboundRequest, type UpstreamAnswer } from "./bounded-exchange.js";
import { compileHttpConfig, HTTP_EXTENSION, invalidConfiguration, type Expression, type HttpConfig } from "./http-config.js";
import { fillTemplate, fillValue } from "./url-template.js";
import { runOpenApiOperation } from "./openapi-mode.js";
import { fail } from "./failure-codes.js";

const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
/** Headers a caller's inputs may not set: they belong to the connection, not to the request. */
const CONNECTION_HEADERS = new Set(["host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer", "proxy-authorization"]);

type NodeTypeOfContext = AtomicContext["nodeType"];

/** `ctx.egress`; an executor from before it existed cannot check egress, so nothing is sent. */
function egressOf(ctx: AtomicContext): HandlerEgress {
  const egress = (ctx as Partial<Pick<AtomicContext, "egress">>).egress;
  if (!egress || typeof egress.fetch !== "function" || typeof egress.secretFor !== "function") {
    throw fail(
      "invalid_configuration",
      "this executor gives handlers no ctx.egress (egress checks at connect time, secrets bound to hosts); @nodefabric/handler-http needs a newer @nodefabric/core",
      { retryable: false },
    );
  }
  return egress;
}

const configOf = compiledPerNodeType((nodeType: NodeTypeOfContext): HttpConfig => compileHttpConfig(nodeType, nodeType.extensions?.[HTTP_EXTENSION]));

function nameOf(ref: NodeTypeRef): string {
  return `${ref.node_type_id}@${ref.version}`;
}

function invalidInputs(message: string, details: Record<string, unknown> = {}): HandlerError {
  return fail("invalid_inputs", message, { retryable: false, details });
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

async function evaluate(expression: Expression, data: unknown): Promise<unknown> {
  try {
    return await expression.evaluate(data);
  } catch (err) {
    const e = err as { message?: string; code?: string };
    throw fail("mapping_error", `${expression.field} failed: ${e.message ?? String(err)}${e.code ? ` (JSONata ${e.code})` : ""}`, {
      retryable: false,
      details: { field: expression.field, expression: expression.source },
    });
  }
}

/** A path placeholder's value, percent-encoded; "." and ".." are refused, since URL parsing would climb the path with them. */
function encodePathValue(value: string): string {
  if (value === "." || value === "..") throw invalidInputs(`a path placeholder of ${HTTP_EXTENSION}.path cannot be "${value}"`, { field: `${HTTP_EXTENSION}.path` });
  return encodeURIComponent(value);
}

function parseUrl(text: unknown): URL {
  let url: URL | undefined;
  try {
    url = typeof text === "string" ? new URL(text) : undefined;
  } catch {
    url = undefined;
  }
  if (!url) throw invalidInputs("inputs.url must be an absolute http or https URL", { field: "url" });
  if (url.username || url.password) throw invalidInputs("inputs.url must not carry credentials", { field: "url" });
  url.hash = "";
  return url;
}

/** The request `config` describes for these inputs (URL, method, headers and body), not yet sent. */
async function buildRequest(config: HttpConfig, inputs: Record<string, unknown>, ctx: AtomicContext, egress: HandlerEgress): Promise<OutboundRequest> {
  let url: URL;
  let method: string;
  if (config.baseUrl) {
    url = new URL(config.baseUrl);
    if (config.path) url.pathname = url.pathname.replace(/\/+$/, "") + fillTemplate(config.path, inputs, "path", encodePathValue);
    method = config.method ?? "GET";
  } else {
    url = parseUrl(inputs.url);
    const asked = inputs.method ?? config.method ?? "GET";
    if (typeof asked !== "string" || !METHODS.includes(asked.toUpperCase())) throw invalidInputs(`inputs.method must be one of ${METHODS.join(", ")}`, { field: "method" });
    method = asked.toUpperCase();
  }
  for (const [name, template] of config.query) {
    const filled = fillValue(template, inputs, `query.${name}`);
    if (filled.kind === "value") url.searchParams.append(name, filled.value);
    else if (filled.kind === "values") for (const v of filled.values) url.searchParams.append(name, v);
  }

  const headers: Record<string, string> = {};
  for (const [name, template] of config.headers) {
    const filled = fillValue(template, inputs, `headers.${name}`);
    if (filled.kind === "absent") continue;
    const value = filled.kind === "value" ? filled.value : filled.values.join(", ");
    if (/[\r\n\0]/.test(value)) throw invalidInputs(`${HTTP_EXTENSION}.headers.${name} would hold a line break`, { field: `${HTTP_EXTENSION}.headers.${name}` });
    headers[name] = value;
  }
  if (!config.baseUrl && inputs.headers !== undefined) {
    if (!isPlainObject(inputs.headers)) throw invalidInputs("inputs.headers must be an object of header → string", { field: "headers" });
    for (const [name, value] of Object.entries(inputs.headers)) {
      const lower = name.toLowerCase();
      if (typeof value !== "string" || /[\r\n\0]/.test(value) || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
        throw invalidInputs(`inputs.headers.${name} must be a valid header name with a string value`, { field: `headers.${name}` });
      }
      if (!CONNECTION_HEADERS.has(lower)) headers[lower] = value;
    }
  }
  // A URL outside allowed_hosts is refused as such, before any secret is asked for it.
  checkEgress(url, config.allowedHosts);
  for (const s of config.secretHeaders) {
    // Handed out only for a host the operator bound the secret to; the URL's host is final here, and a redirect to
    // another origin drops these headers.
    let secret: string | undefined;
    try {
      secret = egress.secretFor(s.secret, url);
    } catch (err) {
      if (!HandlerError.is(err)) throw err;
      throw new HandlerError(err.code, `${nameOf(ctx.nodeType)}: ${HTTP_EXTENSION}.secret_headers.${s.header}: ${err.message}`, {
        retryable: false,
        details: { ...err.details, field: `${HTTP_EXTENSION}.secret_headers.${s.header}` },
      });
    }
    if (secret === undefined) {
      throw invalidConfiguration(ctx.nodeType, `secret_headers.${s.header}`, `names the secret ${s.secret}, which this executor does not have`, { secret: s.secret });
    }
    headers[s.header] = s.prefix + secret;
  }

  let value: unknown;
  if (config.body) value = await evaluate(config.body, { inputs });
  else if (!config.baseUrl) value = inputs.body;
  let body: string | undefined;
  if (value !== undefined) {
    if (method === "GET" || method === "HEAD") throw invalidInputs(`a body cannot be sent with ${method}`, { field: "body" });
    const contentType = headers["content-type"];
    if (typeof value === "string" && contentType !== undefined && !isJsonType(contentType)) {
      body = value;
    } else {
      body = JSON.stringify(value);
      headers["content-type"] ??= "application/json";
    }
  }
  headers.accept ??= "application/json";
  return { url, method, headers, body, sensitiveHeaders: config.secretHeaders.map((s) => s.header) };
}

function isJsonType(contentType: string): boolean {
  return /^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i.test(contentType.trim());
}

/** The body of an answer: parsed JSON for a JSON content type, text otherwise, null when empty. */
function bodyOf(answer: UpstreamAnswer, name: string): JsonValue {
  if (answer.body.byteLength === 0) return null;
  const text = new TextDecoder().decode(answer.body);
  if (!isJsonType(answer.headers["content-type"] ?? "")) return text;
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    throw fail("upstream_error", `the upstream of ${name} answered ${answer.status} with content-type ${answer.headers["content-type"]}, but its body is not valid JSON`, {
      retryable: false,
      details: { status: answer.status },
    });
  }
}

/**
 * The error of a non-2xx answer: retryable for 5xx and 429. A retryable one's `Retry-After` becomes
 * `details.retry_after_ms`, which the coordinator waits at least before the next attempt.
 */
function statusError(answer: UpstreamAnswer, name: string): HandlerError {
  const retryable = answer.status >= 500 || answer.status === 429;
  const details: Record<string, unknown> = { status: answer.status };
  if (answer.body.byteLength > 0) details.body = new TextDecoder().decode(answer.body);
  if (answer.headers["retry-after"]) details.retry_after = answer.headers["retry-after"];
  const waitMs = retryable ? retryAfterMs(answer.headers["retry-after"]) : undefined;
  if (waitMs !== undefined) details.retry_after_ms = waitMs;
  return fail("upstream_error", `the upstream of ${name} answered ${answer.status}`, { retryable, details });
}

/** Runs one execution of `http.request` or of a node type it implements. */
async function handleHttpRequest(inputs: JsonObject, ctx: AtomicContext): Promise<JsonObject> {
  if (!ctx.nodeType) {
    throw fail("invalid_configuration", "this executor gives handlers no ctx.nodeType; @nodefabric/handler-http needs a newer @nodefabric/core", { retryable: false });
  }
  // A node type made from an OpenAPI operation: its descriptor, not nodefabric.http, says how to call it.
  if (ctx.nodeType.extensions?.[OPENAPI_EXTENSION] !== undefined) return runOpenApiOperation(inputs, ctx, egressOf(ctx));
  const name = nameOf(ctx.nodeType);
  const config = configOf(ctx.nodeType);
  if (!config.baseUrl && !config.allowedHostsConfigured) {
    if (ctx.nodeType.node_type_id === httpRequest.nodeType.node_type_id) {
      throw fail(
        "egress_denied",
        `${name} was called directly with a URL from its inputs, and its ${HTTP_EXTENSION}.allowed_hosts lists no host: direct calls are refused. ` +
          `Publish a node type implemented by ${nameOf(httpRequest.nodeType)} with ${HTTP_EXTENSION}.base_url, or with ${HTTP_EXTENSION}.allowed_hosts for URLs from its inputs`,
        { retryable: false, details: { field: `${HTTP_EXTENSION}.allowed_hosts` } },
      );
    }
    throw invalidConfiguration(ctx.nodeType, "base_url", `is missing; without it a URL from the inputs is called, and only on hosts listed in ${HTTP_EXTENSION}.allowed_hosts, which is missing too`);
  }

  const egress = egressOf(ctx);
  const request = await buildRequest(config, inputs, ctx, egress);
  // Never past the execution's deadline: the executor stops waiting then, and a late answer is thrown away.
  const timeoutMs = Math.max(1, Math.min(config.timeoutMs, ctx.deadline - Date.now()));
  const answer = await boundedExchange(
    egress.fetch,
    request,
    { allowedHosts: config.allowedHosts, maxResponseBytes: config.maxResponseBytes, timeoutMs, followRedirects: config.followRedirects, maxRedirects: config.maxRedirects },
    ctx.signal,
  );
  if (answer.status < 200 || answer.status >= 300) throw statusError(answer, name);
  const body = bodyOf(answer, name);

  if (config.response) return (await evaluate(config.response, { status: answer.status, headers: answer.headers, body, inputs })) as JsonObject;
  if (!config.baseUrl) return { status: answer.status, headers: answer.headers, body };
  if (!isPlainObject(body)) {
    const what = body === null ? "an empty body" : typeof body === "string" ? `${answer.headers["content-type"] ?? "a body without content-type"}` : "JSON that is not an object";
    throw fail("upstream_error", `the upstream of ${name} answered ${what}, not a JSON object; map it to the outputs with ${HTTP_EXTENSION}.response`, {
      retryable: false,
      details: { status: answer.status, field: `${HTTP_EXTENSION}.response` },
    });
  }
  return body as JsonObject;
}

/** `http.request@1.0.0`: calls an HTTP API as its node type's `nodefabric.http` says; implements published node types. */
export const httpRequest = defineAtomic<JsonObject, JsonObject>({
  template: true,
  nodeType: {
    node_type_id: "http.request",
    version: "1.0.0",
    description:
      "HTTP request: the implementation of HTTP-backed node types published in the registry with extensions " +
      '"nodefabric.implementation" = http.request@1.0.0 and "nodefabric.http" (base URL, path, query, headers, secrets, ' +
      "body and response mappings, allowed hosts, size and time limits). Called directly with { url, method, headers, body } " +
      "it is refused, since it allows no hosts of its own.",
    input_schema: {
      type: "object",
      properties: {
        url: { type: "string", format: "uri", pattern: "^https?://" },
        method: { enum: METHODS },
        headers: { type: "object", additionalProperties: { type: "string" } },
        body: {},
      },
      required: ["url"],
      additionalProperties: false,
    },
    output_schema: {
      type: "object",
      properties: {
        status: { type: "integer" },
        headers: { type: "object", additionalProperties: { type: "string" } },
        body: {},
      },
      required: ["status", "headers", "body"],
      additionalProperties: false,
    },
    constraints: { gates: { side_effect_class: "write" } },
  },
  handler: handleHttpRequest,
});
