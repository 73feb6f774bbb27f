/**
 * How every node type of this package calls its HTTP operation: the base URL, path, query and header parameters and
 * JSON body come from the inputs; a 2xx JSON answer becomes the outputs; anything else fails with `upstream_error`.
 */
import { HandlerError, type AtomicContext, type JsonObject, type JsonValue } from "@nodefabric/core/sdk";

/** The base URL of the API (from its OpenAPI `servers`), used unless the executor is configured otherwise. */
export const DEFAULT_BASE_URL = "{{defaultBaseUrl}}";

/**
 * The setting that overrides DEFAULT_BASE_URL: the executor secret of that name (set `FABRIC_SECRET_{{baseUrlSetting}}`
 * where the executor runs), else the environment variable of that name.
 */
export const BASE_URL_SETTING = "{{baseUrlSetting}}";

/** How much of a failing answer's body is kept in the error details. */
const MAX_ERROR_BODY = 1000;

/** One input sent as a parameter of the request. */
export interface HttpParameter {
  /** The input property holding the value. */
  input: string;
  /** The parameter's name on the wire. */
  name: string;
  in: "path" | "query" | "header";
}

/** One HTTP operation, as a node type calls it. */
export interface HttpOperation {
  /** Names the operation in errors. */
  operationId: string;
  method: string;
  /** Appended to the base URL; `{name}` stands for the path parameter `name`. */
  path: string;
  parameters: HttpParameter[];
  /** True when the input `body` is sent as the JSON request body. */
  jsonBody: boolean;
  /** How a 2xx answer becomes the outputs: its JSON object as is, its JSON value as `{ result }`, or `{}` (no JSON described). */
  outputs: "object" | "result" | "none";
}

/** The base URL to call: the configured one, else DEFAULT_BASE_URL, without a trailing slash. */
export function baseUrl(ctx: AtomicContext): string {
  const configured = ctx.secrets.get(BASE_URL_SETTING) ?? process.env[BASE_URL_SETTING] ?? DEFAULT_BASE_URL;
  if (!/^https?:\/\/[^/]/i.test(configured)) {
    throw new HandlerError(
      "configuration_error",
      configured === ""
        ? `no base URL: set the executor secret or environment variable ${BASE_URL_SETTING}`
        : `${BASE_URL_SETTING} must be an absolute http(s) URL, not ${JSON.stringify(configured)}`,
      { retryable: false },
    );
  }
  return configured.replace(/\/+$/, "");
}

/** Calls `operation` with `inputs` and answers its outputs; a non-2xx answer throws HandlerError("upstream_error"). */
export async function callOperation(operation: HttpOperation, inputs: JsonObject, ctx: AtomicContext): Promise<JsonObject> {
  const url = new URL(baseUrl(ctx) + fillPath(operation, inputs));
  const headers: Record<string, string> = { accept: "application/json" };
  for (const parameter of operation.parameters) {
    const value = inputs[parameter.input];
    if (value === undefined || value === null) continue;
    if (parameter.in === "query") appendQuery(url.searchParams, parameter.name, value);
    else if (parameter.in === "header") headers[parameter.name] = simpleValue(value);
  }
  let body: string | undefined;
  if (operation.jsonBody && inputs.body !== undefined) {
    body = JSON.stringify(inputs.body);
    headers["content-type"] = "application/json";
  }
  const res = await ctx.fetch(url, { method: operation.method, headers, body });
  const text = await res.text();
  if (!res.ok) {
    throw new HandlerError("upstream_error", `${operation.operationId} answered ${res.status}`, {
      // A server error or a rate limit may pass on a later attempt; any other refusal will not.
      retryable: res.status >= 500 || res.status === 429,
      details: { status: res.status, body: text.slice(0, MAX_ERROR_BODY) },
    });
  }
  if (operation.outputs === "none") return {};
  let value: JsonValue;
  try {
    value = JSON.parse(text) as JsonValue;
  } catch {
    throw new HandlerError("upstream_error", `${operation.operationId} answered ${res.status} with a body that is not JSON`, {
      retryable: false,
      details: { status: res.status, body: text.slice(0, MAX_ERROR_BODY) },
    });
  }
  if (operation.outputs === "result") return { result: value };
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new HandlerError("upstream_error", `${operation.operationId} answered ${res.status} with JSON that is not an object`, {
      retryable: false,
      details: { status: res.status },
    });
  }
  return value;
}

/** The operation's path with each `{name}` replaced by its input, URL-encoded. */
function fillPath(operation: HttpOperation, inputs: JsonObject): string {
  let path = operation.path;
  for (const parameter of operation.parameters) {
    if (parameter.in !== "path") continue;
    path = path.split(`{${parameter.name}}`).join(encodeURIComponent(simpleValue(inputs[parameter.input] ?? "")));
  }
  return path;
}

/** A query value in OpenAPI's default style (form, exploded): arrays repeat the name, objects spread their members. */
function appendQuery(params: URLSearchParams, name: string, value: JsonValue): void {
  if (Array.isArray(value)) {
    for (const item of value) params.append(name, simpleValue(item));
  } else if (typeof value === "object" && value !== null) {
    for (const [key, member] of Object.entries(value)) params.append(key, simpleValue(member));
  } else {
    params.append(name, String(value));
  }
}

/** A path or header value in OpenAPI's default style (simple): arrays joined by commas, objects as JSON. */
function simpleValue(value: JsonValue): string {
  if (Array.isArray(value)) return value.map((item) => (typeof item === "object" && item !== null ? JSON.stringify(item) : String(item))).join(",");
  if (typeof value === "object" && value !== null) return JSON.stringify(value);
  return String(value);
}
