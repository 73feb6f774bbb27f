/**
 * `extensions["nodefabric.mcp"]` of a node type run by `mcp.call`: which server, which tool, the hash of the tool
 * definition it was made from, and the credentials to send. Checked and compiled once per NodeType, so a bad
 * configuration fails every execution with the same clear, non-retryable error naming the field.
 *
 * A node type names a server by URL (Streamable HTTP) or by the name of a stdio server the executor's operator
 * configured (`server`). It can never name a command: anything that would make the executor spawn a process
 * (`command`, `args`, `env`, `cwd`) is refused, because node types come from the registry, and the registry is not
 * trusted to run code on the executor's machine.
 */
import { HandlerError, type NodeTypeRef } from "@nodefabric/sdk";
import { fail } from "./failure-codes.js";

/** The extension that configures `mcp.call` and the node types it implements. */
export const MCP_EXTENSION = "nodefabric.mcp";

/** Protocol negotiation: `auto` probes for 2026-07-28 and falls back to the 2025 handshake; `legacy` never probes. */
export type ProtocolMode = "auto" | "legacy" | { pin: string };

/** A secret sent as a header: the executor's secret `secret`, after `prefix`. */
export interface SecretHeader {
  readonly header: string;
  readonly secret: string;
  readonly prefix: string;
}

/** OAuth 2 client credentials whose client id and secret are executor secrets. */
export interface OAuth2Config {
  readonly tokenUrl: string;
  readonly clientIdSecret: string;
  readonly clientSecretSecret: string;
  readonly scopes: readonly string[];
}

/** `nodefabric.mcp`, checked. */
export interface McpConfig {
  /** Streamable HTTP endpoint. Exactly one of `url` and `server` is set. */
  readonly url?: string;
  /** Name of a stdio server configured by the executor's operator. */
  readonly server?: string;
  readonly tool: string;
  /** `sha256:<hex>` of the tool definition the node type was made from; absent: not pinned. */
  readonly toolHash?: string;
  readonly protocol: ProtocolMode;
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly secretHeaders: readonly SecretHeader[];
  readonly oauth2?: OAuth2Config;
  /**
   * How the outputs are made: `structured` (the tool's `structuredContent`, for a tool with an `outputSchema`) or
   * `content` (the wrapper `{ content, structuredContent? }`, see docs/mcp-import.md).
   */
  readonly output: "structured" | "content";
  /** True when the tool is read-only or idempotent: a failure after the request was sent may be retried. */
  readonly retrySafe: boolean;
}

const KNOWN_KEYS = new Set(["url", "server", "tool", "tool_hash", "protocol", "headers", "secret_headers", "oauth2", "output", "retry_safe"]);
/** Keys that would choose a process to run: never accepted from a node type. */
const SPAWN_KEYS = ["command", "args", "env", "cwd", "stdio"];
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Headers the transport owns, or that would carry someone else's credentials. */
const RESERVED_HEADERS = new Set(["host", "content-length", "transfer-encoding", "connection", "mcp-session-id", "mcp-protocol-version", "proxy-authorization"]);

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The non-retryable error of a bad `nodefabric.mcp`, naming the field. */
export function invalidConfiguration(nodeType: NodeTypeRef, field: string, message: string, details: Record<string, unknown> = {}): HandlerError {
  const path = field ? `${MCP_EXTENSION}.${field}` : MCP_EXTENSION;
  return fail("invalid_configuration", `${nodeType.node_type_id}@${nodeType.version}: ${path} ${message}`, {
    retryable: false,
    details: { field: path, ...details },
  });
}

/** What stands for the run's tenant in a secret's name: `MCP_TOKEN_{tenant}` is MCP_TOKEN_acme for tenant acme. */
export const TENANT_PLACEHOLDER = "{tenant}";

function secretRef(nodeType: NodeTypeRef, field: string, v: unknown): string {
  if (typeof v !== "string" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(v.replaceAll(TENANT_PLACEHOLDER, "T"))) {
    throw invalidConfiguration(nodeType, field, `must name an executor secret (letters, digits and _; ${TENANT_PLACEHOLDER} stands for the run's tenant)`);
  }
  return v;
}

/** Checks `nodefabric.mcp` of `nodeType`. */
export function compileMcpConfig(nodeType: NodeTypeRef, raw: unknown): McpConfig {
  if (raw === undefined) throw invalidConfiguration(nodeType, "", "is missing: a node type run by mcp.call names its server (url or server) and tool");
  if (!isPlainObject(raw)) throw invalidConfiguration(nodeType, "", "must be an object");
  const spawn = SPAWN_KEYS.find((k) => k in raw);
  if (spawn) {
    throw fail(
      "stdio_not_allowed",
      `${nodeType.node_type_id}@${nodeType.version}: ${MCP_EXTENSION}.${spawn} is refused: a node type can never make the executor start a process. ` +
        `A stdio MCP server is named by the executor's operator (FABRIC_MCP_SERVERS) or an installed handler package, and a node type refers to it with "server": "<name>"`,
      { retryable: false, details: { field: `${MCP_EXTENSION}.${spawn}` } },
    );
  }
  const unknown = Object.keys(raw).filter((k) => !KNOWN_KEYS.has(k));
  if (unknown.length > 0) throw invalidConfiguration(nodeType, unknown[0]!, `is not an option of ${MCP_EXTENSION} (known: ${[...KNOWN_KEYS].join(", ")})`, { unknown });

  let url: string | undefined;
  let server: string | undefined;
  if (raw.url !== undefined) {
    let parsed: URL | undefined;
    try {
      parsed = typeof raw.url === "string" ? new URL(raw.url) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) throw invalidConfiguration(nodeType, "url", "must be an absolute http or https URL, such as https://mcp.example.com/mcp");
    if (parsed.username || parsed.password) throw invalidConfiguration(nodeType, "url", "must not carry credentials; use secret_headers or oauth2");
    parsed.hash = "";
    url = parsed.href;
  }
  if (raw.server !== undefined) {
    if (typeof raw.server !== "string" || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(raw.server)) throw invalidConfiguration(nodeType, "server", "must be the name of a stdio server the executor's operator configured");
    server = raw.server;
  }
  if ((url === undefined) === (server === undefined)) throw invalidConfiguration(nodeType, url ? "server" : "url", "names the MCP server: give exactly one of url (Streamable HTTP) and server (an operator's stdio server)");

  if (typeof raw.tool !== "string" || raw.tool === "") throw invalidConfiguration(nodeType, "tool", "must be the name of the MCP tool to call");
  let toolHash: string | undefined;
  if (raw.tool_hash !== undefined) {
    if (typeof raw.tool_hash !== "string" || !/^sha256:[0-9a-f]{64}$/.test(raw.tool_hash)) throw invalidConfiguration(nodeType, "tool_hash", 'must be "sha256:<64 hex digits>"');
    toolHash = raw.tool_hash;
  }

  let protocol: ProtocolMode = "auto";
  if (raw.protocol !== undefined) {
    if (raw.protocol === "auto" || raw.protocol === "legacy") protocol = raw.protocol;
    else if (typeof raw.protocol === "string" && /^\d{4}-\d{2}-\d{2}$/.test(raw.protocol)) protocol = { pin: raw.protocol };
    else throw invalidConfiguration(nodeType, "protocol", 'must be "auto", "legacy" or a protocol revision such as "2026-07-28"');
  }

  const headers: Array<readonly [string, string]> = [];
  if (raw.headers !== undefined) {
    if (!isPlainObject(raw.headers)) throw invalidConfiguration(nodeType, "headers", "must be an object of header → string");
    for (const [name, value] of Object.entries(raw.headers)) {
      if (!HEADER_NAME.test(name) || RESERVED_HEADERS.has(name.toLowerCase())) throw invalidConfiguration(nodeType, `headers.${name}`, "is not a header a node type may set");
      if (name.toLowerCase() === "authorization") throw invalidConfiguration(nodeType, `headers.${name}`, "would put a credential in the registry; name an executor secret with secret_headers");
      if (typeof value !== "string" || /[\r\n\0]/.test(value)) throw invalidConfiguration(nodeType, `headers.${name}`, "must be a string without line breaks");
      headers.push([name.toLowerCase(), value]);
    }
  }
  const secretHeaders: SecretHeader[] = [];
  if (raw.secret_headers !== undefined) {
    if (!isPlainObject(raw.secret_headers)) throw invalidConfiguration(nodeType, "secret_headers", 'must be an object of header → { "secret": NAME, "prefix"?: TEXT }');
    for (const [name, ref] of Object.entries(raw.secret_headers)) {
      const field = `secret_headers.${name}`;
      if (!HEADER_NAME.test(name) || RESERVED_HEADERS.has(name.toLowerCase())) throw invalidConfiguration(nodeType, field, "is not a header a node type may set");
      if (!isPlainObject(ref)) throw invalidConfiguration(nodeType, field, 'must be { "secret": NAME, "prefix"?: TEXT }');
      const prefix = ref.prefix ?? "";
      if (typeof prefix !== "string" || /[\r\n\0]/.test(prefix)) throw invalidConfiguration(nodeType, `${field}.prefix`, "must be a string without line breaks");
      secretHeaders.push({ header: name.toLowerCase(), secret: secretRef(nodeType, `${field}.secret`, ref.secret), prefix });
    }
  }
  let oauth2: OAuth2Config | undefined;
  if (raw.oauth2 !== undefined) {
    const o = raw.oauth2;
    if (!isPlainObject(o)) throw invalidConfiguration(nodeType, "oauth2", 'must be { "token_url", "client_id_secret", "client_secret_secret", "scopes"? }');
    let tokenUrl: URL | undefined;
    try {
      tokenUrl = typeof o.token_url === "string" ? new URL(o.token_url) : undefined;
    } catch {
      tokenUrl = undefined;
    }
    if (!tokenUrl || (tokenUrl.protocol !== "https:" && tokenUrl.protocol !== "http:")) throw invalidConfiguration(nodeType, "oauth2.token_url", "must be an absolute http(s) URL");
    const scopes = o.scopes ?? [];
    if (!Array.isArray(scopes) || scopes.some((s) => typeof s !== "string")) throw invalidConfiguration(nodeType, "oauth2.scopes", "must be an array of strings");
    oauth2 = {
      tokenUrl: tokenUrl.href,
      clientIdSecret: secretRef(nodeType, "oauth2.client_id_secret", o.client_id_secret),
      clientSecretSecret: secretRef(nodeType, "oauth2.client_secret_secret", o.client_secret_secret),
      scopes: scopes as string[],
    };
  }
  if (server !== undefined && (secretHeaders.length > 0 || headers.length > 0 || oauth2)) {
    throw invalidConfiguration(nodeType, "server", "is a stdio server: headers, secret_headers and oauth2 apply only to a url");
  }

  const output = raw.output ?? "content";
  if (output !== "structured" && output !== "content") throw invalidConfiguration(nodeType, "output", 'must be "structured" (the tool\'s structuredContent) or "content" (the wrapper of content blocks)');
  const retrySafe = raw.retry_safe ?? false;
  if (typeof retrySafe !== "boolean") throw invalidConfiguration(nodeType, "retry_safe", "must be true or false");

  return { url, server, tool: raw.tool, toolHash, protocol, headers, secretHeaders, oauth2, output, retrySafe };
}
