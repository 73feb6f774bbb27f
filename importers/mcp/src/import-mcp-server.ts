/**
 * The MCP importer: an MCP server in (a Streamable HTTP URL, or a stdio command), NodeTypes as data out, plus what
 * was left out and why: the importers' one shape (ImportResult of @nodefabric/sdk), as @nodefabric/importer-openapi
 * gives it. `fabric node-types import --from-mcp` publishes its node types to a registry, and `npm create
 * fabric-handler -- --from-mcp` writes them into a package.
 *
 * Each tool becomes one atomic node type run by `mcp.call@1.0.0`:
 * - `node_type_id` `<prefix>.<tool name>`, the version given (default 1.0.0), the tool's description;
 * - `input_schema` the tool's `inputSchema` as given (draft-07 or 2020-12, `$ref` included);
 * - `output_schema` the tool's `outputSchema`, or the content wrapper (CONTENT_OUTPUT_SCHEMA) when it has none;
 * - gates from the annotations (read-only → read, not destructive → write, else irreversible), trust tier external,
 *   and one attempt only unless the tool is read-only or idempotent;
 * - `nodefabric.mcp` naming the server, the tool and the hash of its definition (handlers/mcp/src/tool-definition.ts).
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import type { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
// What mcp.call checks at run time is made here from the same definitions: the tool's hash, its side-effect class,
// the content wrapper, the extension's name, the client's name and the MCP revisions.
import {
  childEnvironment,
  CLIENT_INFO,
  CONTENT_OUTPUT_SCHEMA,
  isDraft07,
  isRetrySafe,
  MCP_EXTENSION,
  sideEffectClassOf,
  TASK_PROTOCOL_VERSION,
  toDraft2020,
  toolDefinitionHash,
  type McpTool,
  type ProtocolMode,
  type StdioServerConfig,
} from "@nodefabric/handler-mcp";
import type { ImportResult } from "@nodefabric/sdk";
import type { NodeType } from "@nodefabric/schemas";
export type { McpTool } from "@nodefabric/handler-mcp";

/** The template definition that runs imported tools. */
export const MCP_CALL_TEMPLATE = { node_type_id: "mcp.call", version: "1.0.0" } as const;

/** Most tools one import reads: past it the rest are left out, named. */
export const MAX_TOOLS = 10_000;

/** A bad source or option: the user can fix it (exit code 2 in the CLI). */
export class McpImportError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "McpImportError";
  }
}

/** Where the server is. */
export type McpSource =
  | { kind: "http"; url: string }
  | { kind: "stdio"; server: StdioServerConfig };

/** A header to send: a literal value, or `prefix` followed by the executor secret `secret`. */
export interface ImportHeader {
  name: string;
  value?: string;
  secret?: string;
  prefix?: string;
}

/** Options of `importMcpServer`. */
export interface McpImportOptions {
  /** node_type_id prefix (default: from the server's name). */
  prefix?: string;
  /** Version of every node type (default 1.0.0). */
  version?: string;
  /** Only tools with these names. */
  include?: string[];
  /** Leave out tools with these names. */
  exclude?: string[];
  headers?: ImportHeader[];
  /** How a secret's value is read at import time (default: FABRIC_SECRET_<NAME>, then <NAME>, from the environment). */
  secretValue?: (name: string) => string | undefined;
  /** For a stdio source: the name the executor's operator gives the server (default: the prefix). */
  serverName?: string;
  protocol?: ProtocolMode;
  /** How long the server may take to answer (default 30 s). */
  timeoutMs?: number;
  onProgress?: (message: string) => void;
}

/** A tool that did not become a node type, and why. */
export interface LeftOutTool {
  tool: string;
  reason: string;
}

/** What an import gives: NodeTypes as data, and what was left out (the importers' one shape), and the server's own. */
export interface McpImport extends ImportResult<LeftOutTool> {
  server: { name: string; version: string; protocol_version?: string; era?: string };
  nodeTypes: NodeType[];
  leftOut: LeftOutTool[];
  notes: string[];
  /** The tools as the server listed them (for a package's recorded exchanges). */
  tools: McpTool[];
  /** Names of executor secrets the node types send. */
  secrets: string[];
}

/** Splits a command line on spaces, keeping "quoted" and 'quoted' parts together. */
export function splitCommandLine(line: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g;
  for (const m of line.matchAll(re)) out.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, "$1") : (m[2] ?? m[3]!));
  return out;
}

/** The source `text` names: an http(s) URL, or a command line for a stdio server. */
export function parseSource(text: string): McpSource {
  const trimmed = text.trim();
  if (trimmed === "") throw new McpImportError("--from-mcp needs a server: an http(s) URL or a command");
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed)) {
    let url: URL;
    try {
      url = new URL(trimmed);
    } catch {
      throw new McpImportError(`--from-mcp ${JSON.stringify(text)} is not a valid URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new McpImportError(`--from-mcp must be an http(s) URL or a command, not ${url.protocol} URL`);
    if (url.username || url.password) throw new McpImportError("--from-mcp URL must not carry credentials; pass them with --header");
    return { kind: "http", url: url.href };
  }
  const [command, ...args] = splitCommandLine(trimmed);
  return { kind: "stdio", server: { command: command!, args } };
}

/** A node type id prefix from a server's name (`@scope/server-memory` → `server-memory`). */
export function prefixFromName(name: string): string {
  const slug = name
    .toLowerCase()
    .replace(/^@[^/]+\//, "")
    .replace(/[^a-z0-9.]+/g, "-")
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, "")
    .slice(0, 40)
    .replace(/[^a-z0-9]+$/, "");
  return slug === "" ? "mcp" : slug;
}

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

// One compiler for every tool: making one costs milliseconds (its meta-schemas), and a server may list thousands.
let compiler: Ajv2020 | undefined;

/**
 * Why `schema` cannot be a node type's schema, or undefined: it is compiled in its 2020-12 form, as the fabric will
 * (the registry refuses a publish whose schemas would not compile), so a tool whose schema would not is left out with
 * the reason instead of failing the whole publish.
 */
function schemaProblemOf(schema: unknown): string | undefined {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return "is not a JSON Schema object";
  compiler ??= new Ajv2020({ strict: false, validateFormats: false, addUsedSchema: false, logger: false });
  // Two tools may well share an $id: it is left out for compiling only.
  const { $id: _id, ...rest } = toDraft2020(schema as Record<string, unknown>);
  try {
    compiler.compile(rest);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

function secretValueFromEnv(name: string): string | undefined {
  return process.env[`FABRIC_SECRET_${name}`] ?? process.env[name];
}

/** Connects to the source; the caller closes the client. */
async function connect(source: McpSource, options: McpImportOptions): Promise<Client> {
  const timeout = options.timeoutMs ?? 30_000;
  const client = new Client(CLIENT_INFO, { versionNegotiation: { mode: options.protocol ?? "auto", probe: { timeoutMs: Math.min(timeout, 10_000) } }, listMaxPages: 0 });
  if (source.kind === "http") {
    const headers: Record<string, string> = {};
    for (const h of options.headers ?? []) {
      if (h.secret) {
        const value = (options.secretValue ?? secretValueFromEnv)(h.secret);
        if (value === undefined) throw new McpImportError(`--header ${h.name} names the secret ${h.secret}: set FABRIC_SECRET_${h.secret} (or ${h.secret}) to import`);
        headers[h.name] = (h.prefix ?? "") + value;
      } else if (h.value !== undefined) headers[h.name] = h.value;
    }
    const transport = new StreamableHTTPClientTransport(new URL(source.url), { requestInit: { headers } });
    try {
      await client.connect(transport, { timeout });
    } catch (err) {
      await client.close().catch(() => undefined);
      throw new Error(`could not connect to the MCP server at ${source.url}: ${describe(err)}`, { cause: err });
    }
    return client;
  }
  const { StdioClientTransport } = await import("@modelcontextprotocol/client/stdio");
  class OwnedStdioTransport extends StdioClientTransport {}
  const transport: StdioClientTransport = new OwnedStdioTransport({
    command: source.server.command,
    args: source.server.args ?? [],
    env: childEnvironment({ ...source.server, env_allow: source.server.env_allow ?? ["PATH", "HOME"] }),
    cwd: source.server.cwd,
    stderr: "ignore",
  });
  try {
    await client.connect(transport, { timeout });
  } catch (err) {
    await client.close().catch(() => undefined);
    throw new Error(`could not start the MCP server ${[source.server.command, ...(source.server.args ?? [])].join(" ")}: ${describe(err)}`, { cause: err });
  }
  return client;
}

function describe(err: unknown): string {
  const e = err as { message?: string; cause?: { message?: string; code?: string } };
  const cause = e.cause?.code ?? e.cause?.message;
  return `${e.message ?? String(err)}${cause && !String(e.message).includes(String(cause)) ? ` (${cause})` : ""}`;
}

/** Lists every tool (all pages), bounded by MAX_TOOLS. */
async function listAllTools(client: Client, timeout: number, notes: string[], leftOut: LeftOutTool[]): Promise<McpTool[]> {
  const tools: McpTool[] = [];
  let cursor: string | undefined;
  const seen = new Set<string>();
  for (;;) {
    let page: { tools: unknown[]; nextCursor?: string };
    try {
      page = (await client.listTools(cursor === undefined ? undefined : { cursor }, { timeout, cacheMode: "bypass" })) as never;
    } catch (err) {
      throw new Error(`the MCP server's tools/list failed: ${describe(err)}`, { cause: err });
    }
    for (const t of page.tools) {
      if (tools.length >= MAX_TOOLS) {
        leftOut.push({ tool: (t as { name?: string }).name ?? "?", reason: `past the first ${MAX_TOOLS} tools` });
        continue;
      }
      tools.push(t as McpTool);
    }
    if (!page.nextCursor || seen.has(page.nextCursor)) break;
    if (tools.length >= MAX_TOOLS) {
      notes.push(`the server lists more than ${MAX_TOOLS} tools; only the first ${MAX_TOOLS} were read`);
      break;
    }
    seen.add(page.nextCursor);
    cursor = page.nextCursor;
  }
  return tools;
}

/** The node type of one tool, or the reason it cannot be one. */
export function nodeTypeOfTool(
  tool: McpTool,
  server: { url?: string; server?: string },
  options: { prefix: string; version: string; headers?: ImportHeader[]; protocol?: ProtocolMode },
): { nodeType: Record<string, unknown> } | { reason: string } {
  if (typeof tool.name !== "string" || tool.name === "") return { reason: "has no name" };
  const id = `${options.prefix}.${tool.name}`;
  if (!ID_PATTERN.test(id)) return { reason: `${JSON.stringify(id)} is not a valid node_type_id (letters, digits, and . _ : - only, at most 128)` };
  const inputProblem = schemaProblemOf(tool.inputSchema);
  if (inputProblem) return { reason: `its inputSchema does not compile: ${inputProblem}` };
  if (tool.outputSchema !== undefined) {
    const outputProblem = schemaProblemOf(tool.outputSchema);
    if (outputProblem) return { reason: `its outputSchema does not compile: ${outputProblem}` };
  }
  // A task-required tool is imported pinned (tool_hash): mcp.call sees in the server's listing that it needs a task and
  // calls it as one (handlers/mcp/src/task-call.ts), which it does over Streamable HTTP on the 2025-11-25 era only.
  if (tool.execution?.taskSupport === "required") {
    if (!server.url) return { reason: "it can only be called as an MCP task, which mcp.call runs over Streamable HTTP only (not on a stdio server)" };
    if (typeof options.protocol === "object" && options.protocol.pin !== TASK_PROTOCOL_VERSION) {
      return { reason: `it can only be called as an MCP task, which mcp.call runs on protocol ${TASK_PROTOCOL_VERSION} only (the import pins ${options.protocol.pin})` };
    }
  }
  const mcp: Record<string, unknown> = {
    ...(server.url ? { url: server.url } : { server: server.server }),
    tool: tool.name,
    tool_hash: toolDefinitionHash(tool),
    output: tool.outputSchema ? "structured" : "content",
    retry_safe: isRetrySafe(tool),
  };
  if (options.protocol && options.protocol !== "auto") mcp.protocol = typeof options.protocol === "object" ? options.protocol.pin : options.protocol;
  const plain = (options.headers ?? []).filter((h) => !h.secret);
  const secret = (options.headers ?? []).filter((h) => h.secret);
  if (server.url && plain.length > 0) mcp.headers = Object.fromEntries(plain.map((h) => [h.name.toLowerCase(), h.value ?? ""]));
  if (server.url && secret.length > 0) mcp.secret_headers = Object.fromEntries(secret.map((h) => [h.name.toLowerCase(), { secret: h.secret, ...(h.prefix ? { prefix: h.prefix } : {}) }]));
  const extensions: Record<string, unknown> = {
    "nodefabric.implementation": { ...MCP_CALL_TEMPLATE },
    [MCP_EXTENSION]: mcp,
    "nodefabric.trust_tier": "external",
    "nodefabric.mcp_tool": {
      name: tool.name,
      ...(tool.title ? { title: tool.title } : {}),
      ...(tool.annotations ? { annotations: tool.annotations } : {}),
      // The fabric's schemas are 2020-12: a draft-07 schema was rewritten (handlers/mcp/src/schema-dialect.ts), and says so here.
      ...(isDraft07(tool.inputSchema) || isDraft07(tool.outputSchema) ? { schema_dialect: "draft-07, rewritten as 2020-12" } : {}),
    },
  };
  // A call that may have reached the tool is not repeated unless the tool says that is safe.
  if (!isRetrySafe(tool)) extensions["nodefabric.retry"] = { max_attempts: 1 };
  return {
    nodeType: {
      node_type_id: id,
      version: options.version,
      kind: "atomic",
      description: tool.description ?? tool.title ?? tool.annotations?.title ?? `The MCP tool ${tool.name}`,
      input_schema: toDraft2020(tool.inputSchema),
      output_schema: tool.outputSchema ? toDraft2020(tool.outputSchema) : CONTENT_OUTPUT_SCHEMA,
      constraints: { gates: { side_effect_class: sideEffectClassOf(tool) } },
      extensions,
    },
  };
}

/** Reads the server's tools and makes their node types. */
export async function importMcpServer(source: McpSource, options: McpImportOptions = {}): Promise<McpImport> {
  const progress = options.onProgress ?? (() => undefined);
  const timeout = options.timeoutMs ?? 30_000;
  const notes: string[] = [];
  const leftOut: LeftOutTool[] = [];
  progress(source.kind === "http" ? `connecting to ${source.url}` : `starting ${source.server.command}`);
  const client = await connect(source, options);
  let tools: McpTool[];
  let info: McpImport["server"];
  try {
    const version = client.getServerVersion();
    info = { name: version?.name ?? "mcp", version: version?.version ?? "", protocol_version: client.getNegotiatedProtocolVersion(), era: client.getProtocolEra() };
    tools = await listAllTools(client, timeout, notes, leftOut);
  } finally {
    await client.close().catch(() => undefined);
  }
  progress(`${info.name} ${info.version} lists ${tools.length} tool${tools.length === 1 ? "" : "s"} (protocol ${info.protocol_version ?? "?"})`);
  const prefix = options.prefix ?? prefixFromName(info.name);
  if (!ID_PATTERN.test(`${prefix}.x`)) throw new McpImportError(`--prefix ${JSON.stringify(prefix)} cannot start a node_type_id (letters, digits, and . _ : - only)`);
  const version = options.version ?? "1.0.0";
  const include = options.include?.length ? new Set(options.include) : undefined;
  const exclude = new Set(options.exclude ?? []);
  const target = source.kind === "http" ? { url: source.url } : { server: options.serverName ?? prefix };
  const nodeTypes: NodeType[] = [];
  const ids = new Set<string>();
  for (const tool of tools) {
    const name = typeof tool?.name === "string" ? tool.name : "?";
    if (include && !include.has(name)) continue;
    if (exclude.has(name)) continue;
    const made = nodeTypeOfTool(tool, target, { prefix, version, headers: options.headers, protocol: options.protocol });
    if ("reason" in made) {
      leftOut.push({ tool: name, reason: made.reason });
      continue;
    }
    const id = made.nodeType.node_type_id as string;
    if (ids.has(id)) {
      leftOut.push({ tool: name, reason: `the server lists a tool named ${name} twice; the first is kept` });
      continue;
    }
    ids.add(id);
    // Its fields are the NodeType schema's (node_type_id, version, kind, schemas, constraints, extensions).
    nodeTypes.push(made.nodeType as unknown as NodeType);
  }
  for (const name of include ?? []) if (!tools.some((t) => t.name === name)) notes.push(`--include ${name}: the server has no such tool`);
  const secrets = [...new Set((options.headers ?? []).flatMap((h) => (h.secret ? [h.secret] : [])))];
  return { server: info, nodeTypes, leftOut, notes, tools, secrets };
}

/**
 * A `--header` argument: `Name: value`, or `Name: <prefix>{secret:NAME}` for a credential held as an executor
 * secret (its value is read from the environment at import time, and node types name only the secret).
 */
export function parseHeader(text: string): ImportHeader {
  const i = text.indexOf(":");
  if (i <= 0) throw new McpImportError(`--header ${JSON.stringify(text)} must be "Name: value"`);
  const name = text.slice(0, i).trim();
  const value = text.slice(i + 1).trim();
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new McpImportError(`--header ${JSON.stringify(name)} is not a valid header name`);
  const m = /^(.*?)\{secret:([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(value);
  if (m) return { name, prefix: m[1], secret: m[2] };
  if (/\{secret:/.test(value)) throw new McpImportError(`--header ${name}: {secret:NAME} must end the value, as in "Authorization: Bearer {secret:MCP_TOKEN}"`);
  if (name.toLowerCase() === "authorization") {
    throw new McpImportError('--header Authorization would publish a credential into the registry: write it as "Authorization: Bearer {secret:NAME}" and give the executor FABRIC_SECRET_NAME');
  }
  return { name, value };
}
