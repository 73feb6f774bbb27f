/**
 * Calls the HTTP operation an HttpOperationDescriptor describes (`extensions["nodefabric.openapi"]` of a node type
 * made from an OpenAPI document). Shared by generated handler packages (`callHttpOperation`, with `ctx.fetch` and
 * `ctx.secrets`) and by `http.request` (`buildOperationRequest` and `readOperationAnswer`, with `ctx.egress`), so an
 * operation is called the same way whichever runs it.
 */
import { HandlerError } from "./handler-error.js";
import { fail } from "./failure-codes.js";
import { OPENAPI_EXTENSION, type HttpOperationDescriptor, type OperationBody, type OperationParameter, type OperationSecurityScheme } from "./http-operation-types.js";
import { clientCredentialsToken } from "./oauth2-client-credentials.js";
import { isBase64Text, isDotSegment, isHeaderValue } from "./operation-input-rules.js";
import {
  cookiePairs,
  encodeReserved,
  encodeUnreserved,
  formPairs,
  primitiveText,
  queryText,
  rawPair,
  serialiseHeaderValue,
  serialisePathValue,
  type FormPair,
} from "./parameter-serialisation.js";
import { readResponseBytes, ResponseTooLargeError } from "./response-body.js";
import { retryAfterMs } from "./retry-after.js";
import type { AtomicContext, JsonObject, JsonValue } from "./types.js";

/** Where `buildOperationRequest` reads settings and secrets, and what it may ask of its caller. */
export interface OperationRequestOptions {
  /** A setting by name (the base URL, a server variable); undefined (or "") when not set. */
  setting(name: string): string | undefined;
  /**
   * A secret of a security scheme by name, for a request to `url`: the operation's URL, or the OAuth 2 token URL for
   * the client id and secret (which are also read for the operation's URL, where the token they buy is sent).
   * Undefined (or "") when not set; may throw to refuse it (`http.request` refuses a secret for a host it is not bound to).
   */
  secret(name: string, url: URL): string | undefined;
  /** Used instead of the descriptor's server and the base URL setting (`http.request`'s `nodefabric.http.base_url`). */
  baseUrl?: string;
  /** Called with the operation's URL, path and query filled, before any secret is read for it; may throw to refuse it. */
  checkUrl?(url: URL): void;
  /** Sends the OAuth 2 token request (default: the global fetch). */
  fetch?: typeof globalThis.fetch;
}

/** A request ready to send; header names are lower case. */
export interface OperationRequest {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  /** Headers that carry credentials: never sent on to another origin after a redirect. */
  sensitiveHeaders: string[];
}

/** Options of `callHttpOperation`. */
export interface CallHttpOperationOptions {
  /** The most bytes of a 2xx answer read (default 32 MiB); a larger one fails with `response_too_large`. */
  maxResponseBytes?: number;
  /** The most redirects followed (default 5); credentials are dropped on a redirect to another origin. */
  maxRedirects?: number;
}

/** How much of a non-2xx answer is kept in `details.body`. */
const ERROR_BODY_BYTES = 2048;
const DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024;
const DEFAULT_MAX_REDIRECTS = 5;
/** Header parameters OpenAPI says to ignore: the runtime sets these itself. */
const IGNORED_HEADER_PARAMETERS = new Set(["accept", "content-type", "authorization"]);
const STYLES = new Set(["simple", "form", "spaceDelimited", "pipeDelimited", "deepObject", "matrix", "label"]);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const ENCODINGS = new Set(["json", "form", "multipart", "text", "binary"]);

function invalidConfiguration(message: string, details?: Record<string, unknown>): HandlerError {
  return fail("invalid_configuration", message, { retryable: false, ...(details ? { details } : {}) });
}

function invalidInputs(message: string, field: string): HandlerError {
  return fail("invalid_inputs", message, { retryable: false, details: { field } });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Why `d` is not a usable HttpOperationDescriptor, or undefined when it is. */
function descriptorProblem(d: unknown): string | undefined {
  if (!isObject(d)) return "is missing or not an object";
  if (typeof d.operation_id !== "string" || d.operation_id === "") return "has no operation_id";
  if (typeof d.method !== "string" || !/^[A-Z]+$/.test(d.method)) return "has no upper-case method";
  if (typeof d.path !== "string" || !d.path.startsWith("/")) return 'has no path starting with "/"';
  if (!isObject(d.server) || typeof d.server.url !== "string") return "has no server.url";
  if (!isObject(d.settings) || typeof d.settings.base_url !== "string") return "has no settings.base_url";
  if (!Array.isArray(d.parameters)) return "has no parameters array";
  for (const p of d.parameters as unknown[]) {
    if (!isObject(p) || typeof p.input !== "string" || typeof p.name !== "string" || !["path", "query", "header", "cookie"].includes(p.in as string) || !STYLES.has(p.style as string)) {
      return `has a parameter that is not { input, name, in, style, explode }: ${JSON.stringify(p)}`;
    }
  }
  const header = (d.parameters as OperationParameter[]).find((p) => p.in === "header" && !HEADER_NAME.test(p.name));
  if (header) return `has a header parameter whose name is not a valid header name: ${JSON.stringify(header.name)}`;
  for (const m of d.path.matchAll(/\{([^}]*)\}/g)) {
    if (!(d.parameters as OperationParameter[]).some((p) => p.in === "path" && p.name === m[1])) return `has no path parameter for {${m[1]}} of its path`;
  }
  if (d.body !== undefined && (!isObject(d.body) || typeof d.body.input !== "string" || typeof d.body.media_type !== "string" || !ENCODINGS.has(d.body.encoding as string))) {
    return "has a body that is not { input, media_type, encoding, required }";
  }
  if (d.body !== undefined && (d.method === "GET" || d.method === "HEAD")) return `has a body, which cannot be sent with ${d.method}`;
  if (!isObject(d.security_schemes) || !Array.isArray(d.security)) return "has no security_schemes and security";
  for (const alternative of d.security as unknown[]) {
    if (!Array.isArray(alternative)) return "has a security alternative that is not an array of scheme names";
    for (const name of alternative) {
      const scheme = (d.security_schemes as Record<string, unknown>)[name as string];
      if (!isObject(scheme) || !["apiKey", "http", "oauth2"].includes(scheme.type as string)) return `names the security scheme ${JSON.stringify(name)}, which security_schemes does not describe`;
      if (scheme.type === "apiKey" && scheme.in === "header" && !HEADER_NAME.test(scheme.name as string)) return `has an apiKey scheme whose header name is not valid: ${JSON.stringify(scheme.name)}`;
    }
  }
  if (!isObject(d.response) || !["object", "result", "none"].includes(d.response.outputs as string)) return "has no response.outputs";
  return undefined;
}

const descriptors = new WeakMap<object, HttpOperationDescriptor | HandlerError>();

/**
 * The HttpOperationDescriptor of a node type, checked (once per NodeType object); a missing or malformed one is a
 * non-retryable HandlerError `invalid_configuration`.
 */
export function operationDescriptorOf(nodeType: { node_type_id: string; version: string; extensions?: Record<string, unknown> }): HttpOperationDescriptor {
  let found = descriptors.get(nodeType);
  if (!found) {
    const raw = nodeType.extensions?.[OPENAPI_EXTENSION];
    const problem = descriptorProblem(raw);
    found = problem
      ? invalidConfiguration(`${nodeType.node_type_id}@${nodeType.version}: extensions["${OPENAPI_EXTENSION}"] ${problem}`, { field: OPENAPI_EXTENSION })
      : (raw as HttpOperationDescriptor);
    descriptors.set(nodeType, found);
  }
  if (found instanceof Error) throw found;
  return found;
}

/** A setting's value, "" counted as not set. */
function read(options: OperationRequestOptions, name: string | undefined): string | undefined {
  if (!name) return undefined;
  const value = options.setting(name);
  return value === "" ? undefined : value;
}

function absoluteHttpUrl(text: string): URL | undefined {
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:" ? url : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The base URL: `options.baseUrl`, else the base URL setting, else the server URL with each `{variable}` from its
 * setting or its default. Values are never quoted in errors: a setting may be a secret.
 */
export function resolveBaseUrl(op: HttpOperationDescriptor, options: OperationRequestOptions): URL {
  const setting = op.settings.base_url;
  let text: string;
  let from: string;
  if (options.baseUrl !== undefined) {
    text = options.baseUrl;
    from = "the configured base URL";
  } else if (read(options, setting) !== undefined) {
    text = read(options, setting)!;
    from = `the setting ${setting}`;
    if (!absoluteHttpUrl(text)) throw invalidConfiguration(`${setting} must be an absolute http(s) URL, such as https://api.example.com/v1`, { setting });
  } else {
    from = "the server URL";
    text = op.server.url.replace(/\{([^}]*)\}/g, (_, name: string) => {
      const variable = op.server.variables?.[name];
      const variableSetting = op.settings.server_variables?.[name];
      const value = read(options, variableSetting) ?? variable?.default;
      if (value === undefined) throw invalidConfiguration(`the server URL ${op.server.url} of ${op.operation_id} names {${name}}, which has no default${variableSetting ? `: set ${variableSetting}` : ""}`, { variable: name });
      if (variable?.enum && variable.enum.length > 0 && !variable.enum.includes(value)) {
        throw invalidConfiguration(`${variableSetting ?? `the server variable ${name}`} must be one of ${variable.enum.join(", ")}`, { variable: name, ...(variableSetting ? { setting: variableSetting } : {}) });
      }
      return value;
    });
    if (text === "") throw invalidConfiguration(`no base URL for ${op.operation_id}: set ${setting} to the API's URL, such as https://api.example.com/v1`, { setting });
    if (!absoluteHttpUrl(text)) throw invalidConfiguration(`the server URL ${op.server.url} of ${op.operation_id} is not an absolute http(s) URL: set ${setting} to the API's URL`, { setting });
  }
  const url = absoluteHttpUrl(text);
  if (!url) throw invalidConfiguration(`${from} of ${op.operation_id} must be an absolute http(s) URL`, { setting });
  if (url.username || url.password) throw invalidConfiguration(`${from} of ${op.operation_id} must not carry credentials; they belong in the security schemes' secrets`, { setting });
  url.hash = "";
  return url;
}

/** The value of a parameter as sent: JSON text for a `content` parameter, the input itself otherwise. */
function parameterValue(p: OperationParameter, value: JsonValue): JsonValue {
  if (p.content_type === undefined) return value;
  return /json/i.test(p.content_type) || typeof value !== "string" ? JSON.stringify(value) : value;
}

function present(value: JsonValue | undefined): value is JsonValue {
  return value !== undefined && value !== null;
}

/** The operation's path with each `{name}` filled by its parameter, serialised by its style and percent-encoded. */
function fillPath(op: HttpOperationDescriptor, inputs: JsonObject): string {
  const filled = op.path.replace(/\{([^}]*)\}/g, (_, name: string) => {
    const p = op.parameters.find((q) => q.in === "path" && q.name === name)!;
    const value = inputs[p.input];
    if (!present(value)) throw invalidInputs(`the path parameter ${name} of ${op.operation_id} needs the input ${p.input}`, p.input);
    const text = p.content_type !== undefined ? encodeUnreserved(parameterValue(p, value) as string) : serialisePathValue(p.name, value, p.style, p.explode);
    if (text === "") throw invalidInputs(`the path parameter ${name} of ${op.operation_id} cannot be empty`, p.input);
    return text;
  });
  // URL parsing would climb the path with "." and ".." segments (written plainly or as %2E): what they would name is not
  // what the operation names.
  if (filled.split("/").some(isDotSegment)) {
    throw invalidInputs(`the path of ${op.operation_id} would hold a "." or ".." segment`, op.parameters.find((p) => p.in === "path")?.input ?? "path");
  }
  return filled;
}

function checkHeaderValue(value: string, what: string, field: string): string {
  if (!isHeaderValue(value)) throw invalidInputs(`${what} would hold a line break, a control character or a character outside Latin-1`, field);
  return value;
}

/**
 * The request that calls `op` with `inputs`: base URL and path, parameters serialised by their OpenAPI style,
 * credentials of the first security alternative whose secrets are all set, and the body in its encoding.
 */
export async function buildOperationRequest(op: HttpOperationDescriptor, inputs: JsonObject, options: OperationRequestOptions): Promise<OperationRequest> {
  const base = resolveBaseUrl(op, options);
  const url = new URL(base.href);
  // A query written into the document's path (`/users/{id}/expire?tempPassword=true`) is sent as written, first.
  const filled = fillPath(op, inputs);
  const mark = filled.indexOf("?");
  url.pathname = base.pathname.replace(/\/+$/, "") + (mark >= 0 ? filled.slice(0, mark) : filled);

  const query: string[] = base.search.length > 1 ? [base.search.slice(1)] : [];
  if (mark >= 0 && mark < filled.length - 1) query.push(filled.slice(mark + 1));
  const headers: Record<string, string> = {};
  const cookies: string[] = [];
  for (const p of op.parameters) {
    if (p.in === "path") continue;
    const input = inputs[p.input];
    if (!present(input)) continue;
    const value = parameterValue(p, input);
    if (p.in === "query") {
      const pairs: FormPair[] = p.content_type !== undefined ? [{ name: [p.name], atoms: [value as string], joiner: "," }] : formPairs(p.name, value, p.style, p.explode);
      const encodeValue = p.allow_reserved ? encodeReserved : encodeUnreserved;
      for (const pair of pairs) query.push(queryText(pair, encodeValue));
    } else if (p.in === "header") {
      const name = p.name.toLowerCase();
      if (IGNORED_HEADER_PARAMETERS.has(name)) continue;
      headers[name] = checkHeaderValue(p.content_type !== undefined ? (value as string) : serialiseHeaderValue(value, p.explode), `the header parameter ${p.name}`, p.input);
    } else {
      cookies.push(...(p.content_type !== undefined ? [`${encodeUnreserved(p.name)}=${encodeUnreserved(value as string)}`] : cookiePairs(p.name, value, p.explode)));
    }
  }
  url.search = query.join("&");
  options.checkUrl?.(url);

  const sensitiveHeaders = await applySecurity(op, url, options, headers, cookies);
  if (cookies.length > 0) headers.cookie = cookies.join("; ");

  let body: string | Uint8Array | undefined;
  if (op.body) {
    const value = inputs[op.body.input];
    if (value !== undefined) {
      const encoded = encodeBody(op.body, value, op.operation_id);
      body = encoded.body;
      headers["content-type"] = encoded.contentType;
    } else if (op.body.required) {
      throw invalidInputs(`${op.operation_id} needs a request body: the input ${op.body.input}`, op.body.input);
    }
  }
  headers.accept = op.response.media_type ?? "application/json";
  return { url, method: op.method, headers, ...(body !== undefined ? { body } : {}), sensitiveHeaders };
}

/** A secret, "" counted as not set. */
function secretOf(options: OperationRequestOptions, name: string | undefined, url: URL): string | undefined {
  if (!name) return undefined;
  const value = options.secret(name, url);
  return value === "" ? undefined : value;
}

/** How one scheme is applied, once its secrets are known to be set. */
type Credential =
  | { kind: "header"; name: string; value: string }
  | { kind: "query"; name: string; value: string }
  | { kind: "cookie"; name: string; value: string }
  | { kind: "token"; tokenUrl: URL; clientId: string; clientSecret: string; scopes: string[] };

function tokenUrlOf(scheme: Extract<OperationSecurityScheme, { type: "oauth2" }>, schemeName: string): URL | undefined {
  if (!scheme.token_url) return undefined;
  const url = absoluteHttpUrl(scheme.token_url);
  if (!url) throw invalidConfiguration(`the token URL of the OAuth 2 scheme ${schemeName} must be an absolute http(s) URL`, { scheme: schemeName });
  return url;
}

/** The credential of `scheme` when all its secrets are set, else undefined. */
function credentialOf(scheme: OperationSecurityScheme, schemeName: string, url: URL, options: OperationRequestOptions): Credential | undefined {
  if (scheme.type === "apiKey") {
    const value = secretOf(options, scheme.secret, url);
    return value === undefined ? undefined : { kind: scheme.in, name: scheme.name, value };
  }
  if (scheme.type === "http") {
    if (scheme.scheme.toLowerCase() === "basic" && "username_secret" in scheme) {
      const user = secretOf(options, scheme.username_secret, url);
      const password = secretOf(options, scheme.password_secret, url);
      if (user === undefined || password === undefined) return undefined;
      return { kind: "header", name: "authorization", value: `Basic ${Buffer.from(`${user}:${password}`, "utf8").toString("base64")}` };
    }
    const secret = secretOf(options, (scheme as { secret: string }).secret, url);
    if (secret === undefined) return undefined;
    const name = scheme.scheme.toLowerCase() === "bearer" ? "Bearer" : scheme.scheme;
    return { kind: "header", name: "authorization", value: `${name} ${secret}` };
  }
  const token = secretOf(options, scheme.access_token_secret, url);
  if (token !== undefined) return { kind: "header", name: "authorization", value: `Bearer ${token}` };
  const tokenUrl = tokenUrlOf(scheme, schemeName);
  if (!tokenUrl) return undefined;
  const clientId = secretOf(options, scheme.client_id_secret, tokenUrl);
  const clientSecret = secretOf(options, scheme.client_secret_secret, tokenUrl);
  if (clientId === undefined || clientSecret === undefined) return undefined;
  // The token bought with these credentials goes to the operation's URL: read them for it too, so a caller that binds
  // secrets to hosts (http.request) refuses a node type that would hand the token to a host of its own choosing.
  secretOf(options, scheme.client_id_secret, url);
  secretOf(options, scheme.client_secret_secret, url);
  return { kind: "token", tokenUrl, clientId, clientSecret, scopes: scheme.scopes ?? [] };
}

/** What to set to satisfy `scheme`, for the error when nothing is: `PETSTORE_API_KEY (apiKey api_key)`. */
function describeScheme(scheme: OperationSecurityScheme, name: string): string {
  if (scheme.type === "apiKey") return `${scheme.secret} (apiKey ${name})`;
  if (scheme.type === "http") {
    return "username_secret" in scheme ? `${scheme.username_secret} and ${scheme.password_secret} (http basic ${name})` : `${scheme.secret} (http ${scheme.scheme} ${name})`;
  }
  const direct = `${scheme.access_token_secret} (oauth2 ${name})`;
  return scheme.token_url && scheme.client_id_secret && scheme.client_secret_secret
    ? `${direct}, or ${scheme.client_id_secret} and ${scheme.client_secret_secret} (oauth2 ${name}, client credentials)`
    : direct;
}

/** Every secret name a scheme may read. */
function secretNames(scheme: OperationSecurityScheme): string[] {
  if (scheme.type === "apiKey") return [scheme.secret];
  if (scheme.type === "http") return "username_secret" in scheme ? [scheme.username_secret, scheme.password_secret] : [scheme.secret];
  return [scheme.access_token_secret, scheme.client_id_secret, scheme.client_secret_secret].filter((s): s is string => typeof s === "string");
}

/**
 * Applies the first security alternative whose secrets are all set (or none, for an empty alternative) to the
 * request; returns the names of the headers that now carry credentials.
 */
async function applySecurity(op: HttpOperationDescriptor, url: URL, options: OperationRequestOptions, headers: Record<string, string>, cookies: string[]): Promise<string[]> {
  if (op.security.length === 0) return [];
  for (const alternative of op.security) {
    const credentials: Credential[] = [];
    for (const name of alternative) {
      const credential = credentialOf(op.security_schemes[name]!, name, url, options);
      if (!credential) break;
      credentials.push(credential);
    }
    if (credentials.length < alternative.length) continue;
    const sensitive = new Set<string>();
    for (const c of credentials) {
      if (c.kind === "query") {
        url.search = (url.search.length > 1 ? `${url.search.slice(1)}&` : "") + `${encodeUnreserved(c.name)}=${encodeUnreserved(c.value)}`;
        continue;
      }
      if (c.kind === "cookie") {
        if (/[;\r\n\0]/.test(c.value)) throw invalidConfiguration(`the secret of the apiKey cookie ${c.name} holds a character a cookie cannot carry`);
        cookies.push(`${c.name}=${c.value}`);
        sensitive.add("cookie");
        continue;
      }
      const value = c.kind === "token" ? `Bearer ${await clientCredentialsToken({ ...c, fetch: options.fetch ?? globalThis.fetch })}` : c.value;
      const name = c.kind === "token" ? "authorization" : c.name.toLowerCase();
      if (/[\r\n\0]/.test(value)) throw invalidConfiguration(`the credentials of the header ${name} hold a line break`);
      headers[name] = value;
      sensitive.add(name);
    }
    return [...sensitive];
  }
  const ways = op.security.map((alternative) => alternative.map((name) => describeScheme(op.security_schemes[name]!, name)).join(" together with "));
  const names = [...new Set(op.security.flatMap((alternative) => alternative.flatMap((name) => secretNames(op.security_schemes[name]!))))];
  throw invalidConfiguration(`${op.operation_id} needs credentials: set ${ways.join(", or ")}`, { secrets: names });
}

function base64Bytes(value: JsonValue, what: string, field: string): Uint8Array {
  if (typeof value !== "string" || !isBase64Text(value)) throw invalidInputs(`${what} must be a base64 string`, field);
  const text = value.replace(/\s+/g, "");
  return new Uint8Array(Buffer.from(text, text.includes("-") || text.includes("_") ? "base64url" : "base64"));
}

/** `body` (the input) in the body's encoding, and the Content-Type that says so. */
function encodeBody(spec: OperationBody, value: JsonValue, operationId: string): { body: string | Uint8Array; contentType: string } {
  const field = spec.input;
  switch (spec.encoding) {
    case "json":
      return { body: JSON.stringify(value), contentType: spec.media_type };
    case "text":
      if (typeof value !== "string") throw invalidInputs(`the body of ${operationId} must be a string (${spec.media_type})`, field);
      return { body: value, contentType: spec.media_type };
    case "binary":
      return { body: base64Bytes(value, `the body of ${operationId} (${spec.media_type})`, field), contentType: spec.media_type };
    case "form": {
      if (!isObject(value)) throw invalidInputs(`the body of ${operationId} must be an object (a form)`, field);
      const form = new URLSearchParams();
      for (const [name, member] of Object.entries(value)) {
        if (member === null) continue;
        const encoding = spec.properties?.[name];
        if (encoding?.content_type !== undefined) {
          form.append(name, typeof member === "string" && !/json/i.test(encoding.content_type) ? member : JSON.stringify(member));
          continue;
        }
        const style = encoding?.style ?? "form";
        for (const pair of formPairs(name, member, style, encoding?.explode ?? style === "form")) form.append(...rawPair(pair));
      }
      return { body: form.toString(), contentType: spec.media_type };
    }
    case "multipart": {
      if (!isObject(value)) throw invalidInputs(`the body of ${operationId} must be an object (multipart form data)`, field);
      return multipartBody(spec, value, operationId);
    }
  }
}

/** A `Content-Disposition` parameter value, quoted as HTML's form submission quotes it. */
function quoted(text: string): string {
  return `"${text.replace(/\r/g, "%0D").replace(/\n/g, "%0A").replace(/"/g, "%22")}"`;
}

/**
 * multipart/form-data (RFC 7578): one part per property, an array as one part per item; `binary_fields` as file
 * parts of their bytes, objects as JSON parts, the rest as text. Made here rather than with FormData so every part's
 * headers are exactly these, whichever fetch sends it.
 */
function multipartBody(spec: OperationBody, value: Record<string, JsonValue>, operationId: string): { body: Uint8Array; contentType: string } {
  const boundary = `----nodefabric-${crypto.randomUUID()}`;
  const chunks: Uint8Array[] = [];
  const part = (name: string, content: Uint8Array | string, contentType: string | undefined, filename?: string) => {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name=${quoted(name)}${filename !== undefined ? `; filename=${quoted(filename)}` : ""}\r\n`;
    if (contentType) head += `Content-Type: ${contentType}\r\n`;
    chunks.push(Buffer.from(`${head}\r\n`, "utf8"), typeof content === "string" ? Buffer.from(content, "utf8") : content, Buffer.from("\r\n", "utf8"));
  };
  const binary = new Set(spec.binary_fields ?? []);
  for (const [name, member] of Object.entries(value)) {
    if (member === null) continue;
    const contentType = spec.properties?.[name]?.content_type;
    if (binary.has(name)) {
      for (const item of Array.isArray(member) ? member : [member]) part(name, base64Bytes(item, `the field ${name} of the body of ${operationId}`, `${spec.input}.${name}`), contentType ?? "application/octet-stream", name);
    } else if (Array.isArray(member) && member.every((item) => typeof item !== "object" || item === null)) {
      for (const item of member) part(name, primitiveText(item), contentType);
    } else if (typeof member === "object") {
      part(name, JSON.stringify(member), contentType ?? "application/json");
    } else {
      part(name, primitiveText(member), contentType);
    }
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`, "utf8"));
  return { body: new Uint8Array(Buffer.concat(chunks)), contentType: `${spec.media_type}; boundary=${boundary}` };
}

/** The headers of an answer, as fetch or as a record. */
export type AnswerHeaders = Headers | Record<string, string | string[] | undefined>;

function headerOf(headers: AnswerHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
  const value = (headers as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(value) ? value[0] : value;
}

/** What a media type holds: JSON, text, or bytes. */
function mediaKind(mediaType: string): "json" | "text" | "binary" {
  const type = mediaType.split(";")[0]!.trim().toLowerCase();
  if (type === "application/json" || type.endsWith("+json") || type === "text/json") return "json";
  if (type.startsWith("text/") || type.endsWith("+xml") || ["application/xml", "application/yaml", "application/x-yaml", "application/javascript", "application/x-www-form-urlencoded"].includes(type)) return "text";
  return "binary";
}

/**
 * The outputs of an answer to `op`. A non-2xx status fails with `upstream_error` (`details.status`, the first 2 KiB
 * of `details.body`, and `details.retry_after_ms` for a 429 or 503 with Retry-After), retryable for a 5xx, 408 or 429.
 * A 2xx becomes, by `response.outputs`: `object`, the JSON object as is; `result`, `{ result }` holding the JSON
 * value, the text of a text answer (or of a JSON answer that does not parse) or the base64 of a binary one; `none`,
 * `{}`. An empty body is `{}`. JSON that is not an object where one is needed fails with a non-retryable `upstream_error`.
 */
export function readOperationAnswer(op: HttpOperationDescriptor, status: number, headers: AnswerHeaders, body: string | Uint8Array): JsonObject {
  const bytes = typeof body === "string" ? undefined : body;
  const text = typeof body === "string" ? body : new TextDecoder().decode(body);
  if (status < 200 || status >= 300) {
    const excerpt = bytes ? new TextDecoder().decode(bytes.subarray(0, ERROR_BODY_BYTES)) : text.slice(0, ERROR_BODY_BYTES);
    const retryAfter = status === 429 || status === 503 ? retryAfterMs(headerOf(headers, "retry-after")) : undefined;
    throw fail("upstream_error", `${op.operation_id} answered ${status}`, {
      // A server error, a timeout or a rate limit may pass on a later attempt; any other refusal will not.
      retryable: status >= 500 || status === 429 || status === 408,
      details: { status, body: excerpt, ...(retryAfter !== undefined ? { retry_after_ms: retryAfter } : {}) },
    });
  }
  if (op.response.outputs === "none" || text.length === 0) return {};
  const mediaType = headerOf(headers, "content-type") ?? op.response.media_type ?? "application/json";
  if (op.response.outputs === "result") {
    const kind = mediaKind(mediaType);
    if (kind === "binary" && bytes) return { result: Buffer.from(bytes).toString("base64") };
    if (kind === "json") {
      try {
        return { result: JSON.parse(text) as JsonValue };
      } catch {
        // Some APIs answer plain text under a JSON media type (a session id, a message): it is the result as it is.
      }
    }
    return { result: text };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw fail("upstream_error", `${op.operation_id} answered ${status} with a body that is not JSON (${mediaType})`, {
      retryable: false,
      details: { status, body: text.slice(0, ERROR_BODY_BYTES) },
    });
  }
  if (!isObject(value)) {
    throw fail("upstream_error", `${op.operation_id} answered ${status} with JSON that is not an object (${Array.isArray(value) ? "an array" : typeof value})`, {
      retryable: false,
      details: { status },
    });
  }
  return value as JsonObject;
}

/** Sends `request`, following at most `maxRedirects` redirects, credentials dropped on a change of origin. */
async function sendFollowingRedirects(fetchFn: typeof globalThis.fetch, request: OperationRequest, op: HttpOperationDescriptor, maxRedirects: number): Promise<Response> {
  let url = request.url;
  let method = request.method;
  let body = request.body;
  const headers = { ...request.headers };
  for (let hop = 0; ; hop++) {
    const res = await fetchFn(url, { method, headers, body, redirect: "manual" });
    const location = res.headers.get("location");
    if (res.status < 300 || res.status >= 400 || location === null) return res;
    await res.body?.cancel().catch(() => undefined);
    let next: URL | undefined;
    try {
      next = absoluteHttpUrl(new URL(location, url).href);
    } catch {
      next = undefined;
    }
    if (!next || hop >= maxRedirects) {
      throw fail("upstream_error", `${op.operation_id} answered ${res.status}, ${next ? `a redirect past the limit of ${maxRedirects}` : "a redirect to no http(s) URL"}`, {
        retryable: false,
        details: { status: res.status },
      });
    }
    // As browsers do: 303 turns any method but HEAD into GET, and 301/302 turn POST into GET; 307/308 keep both.
    if ((res.status === 303 && method !== "HEAD") || ((res.status === 301 || res.status === 302) && method === "POST")) {
      method = "GET";
      body = undefined;
      delete headers["content-type"];
    }
    if (next.origin !== url.origin) for (const name of request.sensitiveHeaders) delete headers[name];
    url = next;
  }
}

/**
 * The handler of a node type made from an OpenAPI operation: reads the descriptor from
 * `ctx.nodeType.extensions["nodefabric.openapi"]`, settings and secrets from `ctx.secrets` then the environment,
 * sends with `ctx.fetch` and answers the outputs (see `buildOperationRequest` and `readOperationAnswer`).
 */
export async function callHttpOperation(inputs: JsonObject, ctx: AtomicContext, options: CallHttpOperationOptions = {}): Promise<JsonObject> {
  const op = operationDescriptorOf(ctx.nodeType);
  const setting = (name: string) => ctx.secrets.get(name) ?? process.env[name];
  const request = await buildOperationRequest(op, inputs, { setting, secret: setting, fetch: ctx.fetch });
  const res = await sendFollowingRedirects(ctx.fetch, request, op, options.maxRedirects ?? DEFAULT_MAX_REDIRECTS);
  const ok = res.status >= 200 && res.status < 300;
  const limit = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  let bytes: Uint8Array;
  try {
    bytes = await readResponseBytes(res, ok ? limit : ERROR_BODY_BYTES, !ok);
  } catch (err) {
    if (!(err instanceof ResponseTooLargeError)) throw err;
    throw fail("response_too_large", `${op.operation_id} answered more than ${limit} bytes`, { retryable: false, details: { max_response_bytes: limit } });
  }
  return readOperationAnswer(op, res.status, res.headers, bytes);
}
