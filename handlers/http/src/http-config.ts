/**
 * `extensions["nodefabric.http"]` of a node type: checked and compiled once per NodeType (templates parsed, JSONata
 * compiled, limits defaulted), so a bad configuration fails every execution with the same clear, non-retryable error
 * naming the field, and a good one costs nothing to read again.
 */
import jsonata from "jsonata";
import { HandlerError, type NodeTypeRef } from "@nodefabric/sdk";
import { parseTemplate, type Template } from "./url-template.js";
import { fail } from "./failure-codes.js";

/** The extension that configures `http.request` and the node types it implements. */
export const HTTP_EXTENSION = "nodefabric.http";

/** Defaults and caps of the egress limits. */
export const LIMITS = {
  maxResponseBytes: 1024 * 1024,
  maxResponseBytesCap: 64 * 1024 * 1024,
  timeoutMs: 10_000,
  maxRedirects: 5,
  maxRedirectsCap: 20,
} as const;

/** JSONata guardrails: an expression may not run longer or recurse deeper than this (it would block the executor). */
const JSONATA_OPTIONS = { timeout: 1_000, stack: 500 };

const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;
const KNOWN_KEYS = new Set([
  "base_url",
  "method",
  "path",
  "query",
  "headers",
  "secret_headers",
  "body",
  "response",
  "allowed_hosts",
  "max_response_bytes",
  "timeout_ms",
  "follow_redirects",
  "max_redirects",
]);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// RFC 1123 host names (or IPv4), an optional leading "*." for subdomains, an optional port; IPv6 in brackets.
const HOST_ENTRY = /^(?:\*\.)?(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*(?::\d{1,5})?$|^\[[0-9a-f:.]+\](?::\d{1,5})?$/;

/** A compiled JSONata expression with the field it came from. */
export interface Expression {
  readonly field: string;
  readonly source: string;
  evaluate(data: unknown): Promise<unknown>;
}

/** A secret sent as a header: the executor's secret `secret`, after `prefix`. */
export interface SecretHeader {
  readonly header: string;
  readonly secret: string;
  readonly prefix: string;
}

/** `nodefabric.http`, checked and compiled. */
export interface HttpConfig {
  /** Where requests go; absent for a node type whose inputs carry the URL (a direct call). */
  readonly baseUrl?: string;
  readonly method?: (typeof METHODS)[number];
  readonly path?: Template;
  readonly query: ReadonlyArray<readonly [string, Template]>;
  readonly headers: ReadonlyArray<readonly [string, Template]>;
  readonly secretHeaders: readonly SecretHeader[];
  /** Absent: no body; `"inputs"` is simply the expression that yields every input. */
  readonly body?: Expression;
  /** Absent: the JSON body (with a base URL) or `{ status, headers, body }` (a direct call). */
  readonly response?: Expression;
  /** Lower-case `host[:port]` entries; `*.` allows subdomains. Empty only when nothing was configured and no base URL. */
  readonly allowedHosts: readonly string[];
  /** True when `allowed_hosts` was written in the configuration (a direct call needs it). */
  readonly allowedHostsConfigured: boolean;
  readonly maxResponseBytes: number;
  readonly timeoutMs: number;
  readonly followRedirects: boolean;
  readonly maxRedirects: number;
}

/** The non-retryable error of a bad `nodefabric.http`, naming the field. */
export function invalidConfiguration(nodeType: NodeTypeRef, field: string, message: string, details: Record<string, unknown> = {}): HandlerError {
  const path = field ? `${HTTP_EXTENSION}.${field}` : HTTP_EXTENSION;
  return fail("invalid_configuration", `${nodeType.node_type_id}@${nodeType.version}: ${path} ${message}`, {
    retryable: false,
    details: { field: path, ...details },
  });
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function positiveInteger(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= 1;
}

function compileExpression(nodeType: NodeTypeRef, field: string, source: unknown): Expression {
  if (typeof source !== "string" || source.trim() === "") throw invalidConfiguration(nodeType, field, "must be a JSONata expression (a non-empty string)");
  let compiled: jsonata.Expression;
  try {
    compiled = jsonata(source, JSONATA_OPTIONS as jsonata.JsonataOptions);
  } catch (err) {
    const e = err as { message?: string; position?: number; code?: string };
    throw invalidConfiguration(nodeType, field, `is not a valid JSONata expression: ${e.message ?? String(err)}${typeof e.position === "number" ? ` (at character ${e.position})` : ""}`, {
      expression: source,
    });
  }
  return { field: `${HTTP_EXTENSION}.${field}`, source, evaluate: (data) => compiled.evaluate(data) };
}

/** Lower-cased host[:port] of an allow-list entry, or undefined when it is not one. */
function hostEntry(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  const entry = value.trim().toLowerCase();
  return HOST_ENTRY.test(entry) ? entry : undefined;
}

function templateMap(nodeType: NodeTypeRef, field: string, value: unknown, isHeader: boolean): Array<readonly [string, Template]> {
  if (value === undefined) return [];
  if (!isPlainObject(value)) throw invalidConfiguration(nodeType, field, "must be an object of name → value");
  return Object.entries(value).map(([name, v]) => {
    if (isHeader && !HEADER_NAME.test(name)) throw invalidConfiguration(nodeType, `${field}.${name}`, "is not a valid header name");
    if (typeof v !== "string" && typeof v !== "number" && typeof v !== "boolean") {
      throw invalidConfiguration(nodeType, `${field}.${name}`, 'must be a string (a literal, or a template such as "{city}"), a number or a boolean');
    }
    const text = String(v);
    if (isHeader && /[\r\n\0]/.test(text)) throw invalidConfiguration(nodeType, `${field}.${name}`, "must not contain line breaks");
    return [isHeader ? name.toLowerCase() : name, parseTemplate(text)] as const;
  });
}

/** Checks and compiles the `nodefabric.http` of `nodeType` (undefined: not configured at all). */
export function compileHttpConfig(nodeType: NodeTypeRef, raw: unknown): HttpConfig {
  if (raw === undefined) raw = {};
  if (!isPlainObject(raw)) throw invalidConfiguration(nodeType, "", "must be an object");
  const unknown = Object.keys(raw).filter((k) => !KNOWN_KEYS.has(k));
  if (unknown.length > 0) {
    throw invalidConfiguration(nodeType, unknown[0]!, `is not an option of ${HTTP_EXTENSION} (known: ${[...KNOWN_KEYS].join(", ")})`, { unknown });
  }

  let baseUrl: URL | undefined;
  if (raw.base_url !== undefined) {
    try {
      baseUrl = typeof raw.base_url === "string" ? new URL(raw.base_url) : undefined;
    } catch {
      baseUrl = undefined;
    }
    if (!baseUrl || (baseUrl.protocol !== "http:" && baseUrl.protocol !== "https:")) {
      throw invalidConfiguration(nodeType, "base_url", "must be an absolute http or https URL, such as https://api.example.com");
    }
    if (baseUrl.username || baseUrl.password) throw invalidConfiguration(nodeType, "base_url", "must not carry credentials; use secret_headers");
    if (baseUrl.hash) throw invalidConfiguration(nodeType, "base_url", "must not have a #fragment");
  }

  let method: HttpConfig["method"];
  if (raw.method !== undefined) {
    const m = typeof raw.method === "string" ? raw.method.toUpperCase() : undefined;
    if (!m || !(METHODS as readonly string[]).includes(m)) throw invalidConfiguration(nodeType, "method", `must be one of ${METHODS.join(", ")}`);
    method = m as HttpConfig["method"];
  }

  let path: Template | undefined;
  if (raw.path !== undefined) {
    if (!baseUrl) throw invalidConfiguration(nodeType, "path", "needs a base_url");
    if (typeof raw.path !== "string" || !raw.path.startsWith("/")) throw invalidConfiguration(nodeType, "path", 'must be a string starting with "/", such as "/v1/weather/{city}"');
    if (/[?#]/.test(raw.path)) throw invalidConfiguration(nodeType, "path", "must not hold a query or fragment; use query");
    path = parseTemplate(raw.path);
  }

  const query = templateMap(nodeType, "query", raw.query, false);
  const headers = templateMap(nodeType, "headers", raw.headers, true);

  const secretHeaders: SecretHeader[] = [];
  if (raw.secret_headers !== undefined) {
    if (!isPlainObject(raw.secret_headers)) throw invalidConfiguration(nodeType, "secret_headers", 'must be an object of header → { "secret": NAME, "prefix"?: TEXT }');
    for (const [name, ref] of Object.entries(raw.secret_headers)) {
      const field = `secret_headers.${name}`;
      if (!HEADER_NAME.test(name)) throw invalidConfiguration(nodeType, field, "is not a valid header name");
      if (!isPlainObject(ref) || typeof ref.secret !== "string" || ref.secret === "") throw invalidConfiguration(nodeType, field, 'must be { "secret": NAME, "prefix"?: TEXT }');
      const extra = Object.keys(ref).filter((k) => k !== "secret" && k !== "prefix");
      if (extra.length > 0) throw invalidConfiguration(nodeType, `${field}.${extra[0]}`, 'is not an option (a secret header is { "secret": NAME, "prefix"?: TEXT })');
      if (ref.prefix !== undefined && (typeof ref.prefix !== "string" || /[\r\n\0]/.test(ref.prefix))) throw invalidConfiguration(nodeType, `${field}.prefix`, "must be a string without line breaks");
      secretHeaders.push({ header: name.toLowerCase(), secret: ref.secret, prefix: (ref.prefix as string | undefined) ?? "" });
    }
  }

  const body = raw.body === undefined ? undefined : compileExpression(nodeType, "body", raw.body);
  if (body && (method === "GET" || method === "HEAD" || (method === undefined && baseUrl))) {
    throw invalidConfiguration(nodeType, "body", `cannot be sent with ${method ?? "GET"}; set method to POST, PUT or PATCH`);
  }
  const response = raw.response === undefined ? undefined : compileExpression(nodeType, "response", raw.response);

  let allowedHosts: string[] = [];
  const allowedHostsConfigured = raw.allowed_hosts !== undefined;
  if (allowedHostsConfigured) {
    if (!Array.isArray(raw.allowed_hosts) || raw.allowed_hosts.length === 0) {
      throw invalidConfiguration(nodeType, "allowed_hosts", 'must be a non-empty array of host names, such as ["api.example.com", "*.example.org", "127.0.0.1:8080"]');
    }
    allowedHosts = raw.allowed_hosts.map((v, i) => {
      const entry = hostEntry(v);
      if (!entry) throw invalidConfiguration(nodeType, `allowed_hosts[${i}]`, `(${JSON.stringify(v)}) is not a host name with an optional port, such as "api.example.com" or "*.example.org"`);
      return entry;
    });
    if (baseUrl && !hostAllowed(baseUrl, allowedHosts)) {
      throw invalidConfiguration(nodeType, "allowed_hosts", `does not allow ${baseUrl.host}, the host of base_url`);
    }
  } else if (baseUrl) {
    allowedHosts = [baseUrl.host.toLowerCase()];
  }

  const maxResponseBytes = raw.max_response_bytes ?? LIMITS.maxResponseBytes;
  if (!positiveInteger(maxResponseBytes) || maxResponseBytes > LIMITS.maxResponseBytesCap) {
    throw invalidConfiguration(nodeType, "max_response_bytes", `must be an integer from 1 to ${LIMITS.maxResponseBytesCap}`);
  }
  const timeoutMs = raw.timeout_ms ?? LIMITS.timeoutMs;
  if (!positiveInteger(timeoutMs)) throw invalidConfiguration(nodeType, "timeout_ms", "must be an integer >= 1");
  const followRedirects = raw.follow_redirects ?? false;
  if (typeof followRedirects !== "boolean") throw invalidConfiguration(nodeType, "follow_redirects", "must be true or false");
  const maxRedirects = raw.max_redirects ?? LIMITS.maxRedirects;
  if (typeof maxRedirects !== "number" || !Number.isInteger(maxRedirects) || maxRedirects < 0 || maxRedirects > LIMITS.maxRedirectsCap) {
    throw invalidConfiguration(nodeType, "max_redirects", `must be an integer from 0 to ${LIMITS.maxRedirectsCap}`);
  }

  return {
    baseUrl: baseUrl?.href,
    method,
    path,
    query,
    headers,
    secretHeaders,
    body,
    response,
    allowedHosts,
    allowedHostsConfigured,
    maxResponseBytes,
    timeoutMs,
    followRedirects,
    maxRedirects,
  };
}

/**
 * True when `url` may be connected to: http or https, and its `host` (host name, plus the port when it is not the
 * scheme's default) equals an entry, or ends with `.<domain>` for an entry `*.<domain>`.
 */
export function hostAllowed(url: URL, allowedHosts: readonly string[]): boolean {
  if (url.protocol !== "http:" && url.protocol !== "https:") return false;
  const host = url.host.toLowerCase();
  return allowedHosts.some((entry) => (entry.startsWith("*.") ? host.endsWith(entry.slice(1)) : host === entry));
}
