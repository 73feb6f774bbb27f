/**
 * A handler package made from an MCP server (`--from-mcp <url|command>`): one atomic node type per tool, kept as data.
 *
 * - `node-types/<tool>.json` holds each NodeType as `fabric node-types import --from-mcp` makes it (schemas, gates from
 *   the annotations, the tool definition's hash), run by this package's own handler rather than `mcp.call`;
 *   `node-types/index.json` lists them.
 * - `src/index.ts` is one `defineAtomicSet` whose handler is `mcpToolHandler` of `@nodefabric/handler-mcp`. A package
 *   made from a command starts that stdio server itself (one child process, shared by its calls): installing the
 *   package is the operator's choice of running it, and no node type from a registry can name another command.
 * - `test/exchanges.json` holds the server's recorded `tools/list` and, per tool, sample arguments and an answer that
 *   fits its output schema; `test/handler.test.ts` serves them from a local stand-in MCP server (the official SDK on
 *   loopback) and runs every node type against it, so `npm test` passes offline as generated. The real server is
 *   never called with sample arguments: a tool may have side effects.
 */
import type { NodeType } from "@nodefabric/schemas";
import { importMcpServer, McpImportError, parseHeader, parseSource, type McpImport, type McpSource, type McpTool } from "@nodefabric/importer-mcp";
import { sampleFor, type SchemaObject } from "@nodefabric/sdk/samples";
import { ScaffoldError } from "./errors.js";
import { DEFAULT_SDK_SPEC, packageManifest } from "./package-manifest.js";
import { baseUrlSettingOf, nodeTypePrefixOf } from "./package-name.js";
import { renderTemplateFolder, type GeneratedFile } from "./template-files.js";

/** Options of mcpPackage. */
export interface McpPackageOptions {
  packageName: string;
  /** The part of every node_type_id before the dot. */
  nodeTypePrefix: string;
  /** `--from-mcp`: an http(s) URL or a command line. */
  source: string;
  include?: string[];
  exclude?: string[];
  /** `--header` values: `Name: value`, or `Name: Bearer {secret:NAME}`. */
  headers?: string[];
  onProgress?: (message: string) => void;
}

/** One recorded exchange: the arguments sent, the server's answer, and the outputs they give. */
export type McpExchange =
  | { node_type_id: string; tool: string; arguments: Record<string, unknown>; result: Record<string, unknown>; outputs: Record<string, unknown> }
  | { node_type_id: string; tool: string; untested: string };

/** What the generated package holds. */
export interface McpPackage {
  files: GeneratedFile[];
  nodeTypeIds: string[];
  tryIt: { nodeTypeId: string; inputs: Record<string, unknown> };
  skipped: string[];
  description: string;
  /** Dependencies the package needs beyond the SDK and the test tools. */
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  /** Executor secrets its node types send. */
  secrets: string[];
}

/** The versions a generated package installs (this release's). */
export const MCP_PACKAGE_VERSIONS = { handlerMcp: "^0.1.0", mcpServer: "^2.4.0" } as const;

function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

/** A seed per tool, so samples differ between tools and stay the same between runs. */
function seedOf(text: string): number {
  let h = 7;
  for (const c of text) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return (h % 100_000) + 1;
}

/** The exchange of one node type: sample arguments, and an answer fitting its output schema. */
function exchangeFor(nodeType: NodeType, tool: McpTool): McpExchange {
  const id = nodeType.node_type_id;
  const inputs = sampleFor((nodeType.input_schema ?? { type: "object" }) as SchemaObject, { seed: seedOf(id), prefer: "minimal" });
  if ("error" in inputs) return { node_type_id: id, tool: tool.name, untested: `no valid sample arguments: ${inputs.error}` };
  const args = inputs.value as Record<string, unknown>;
  const mcp = (nodeType.extensions as Record<string, { output?: string }>)["nodefabric.mcp"]!;
  if (mcp.output === "structured") {
    const sample = sampleFor(nodeType.output_schema as SchemaObject, { seed: seedOf(`${id}:out`), prefer: "minimal" });
    if ("error" in sample) return { node_type_id: id, tool: tool.name, untested: `no valid sample answer: ${sample.error}` };
    const structured = sample.value as Record<string, unknown>;
    return { node_type_id: id, tool: tool.name, arguments: args, result: { content: [{ type: "text", text: JSON.stringify(structured) }], structuredContent: structured }, outputs: structured };
  }
  const content = [{ type: "text", text: `a recorded answer of ${tool.name}` }];
  return { node_type_id: id, tool: tool.name, arguments: args, result: { content }, outputs: { content } };
}

/** Reads the server's tools and makes the package's files (package.json and the shared files are the caller's). */
export async function mcpPackage(options: McpPackageOptions): Promise<McpPackage> {
  let source: McpSource;
  let imported: McpImport;
  try {
    source = parseSource(options.source);
    const headers = (options.headers ?? []).map((h) => parseHeader(h));
    imported = await importMcpServer(source, {
      prefix: options.nodeTypePrefix,
      include: options.include,
      exclude: options.exclude,
      headers,
      serverName: options.nodeTypePrefix,
      onProgress: options.onProgress,
    });
  } catch (err) {
    if (err instanceof McpImportError) throw new ScaffoldError(err.message, { cause: err });
    throw new ScaffoldError((err as Error).message, { cause: err });
  }
  if (imported.nodeTypes.length === 0) {
    const why = imported.leftOut.length > 0 ? `: ${imported.leftOut.slice(0, 10).map((l) => `${l.tool} (${l.reason})`).join("; ")}` : "";
    throw new ScaffoldError(`the MCP server has no tool a node type can be made from${why}`);
  }
  // The package runs them with its own handler: no template to name.
  const nodeTypes = imported.nodeTypes.map((t) => {
    const { ["nodefabric.implementation"]: _template, ...extensions } = t.extensions as Record<string, unknown>;
    return { ...t, extensions } as unknown as NodeType;
  });
  const toolsByName = new Map(imported.tools.map((t) => [t.name, t]));
  const fileOf = (t: NodeType) => `${t.node_type_id.slice(options.nodeTypePrefix.length + 1).replace(/[^A-Za-z0-9._-]/g, "_")}.json`;
  const exchanges = nodeTypes.map((t) => exchangeFor(t, toolsByName.get(((t.extensions as Record<string, { tool: string }>)["nodefabric.mcp"]!).tool)!));
  const tested = exchanges.find((e): e is Extract<McpExchange, { arguments: unknown }> => "arguments" in e && nodeTypeOf(nodeTypes, e.node_type_id)?.constraints?.gates?.side_effect_class === "read")
    ?? exchanges.find((e): e is Extract<McpExchange, { arguments: unknown }> => "arguments" in e);
  const tryIt = { nodeTypeId: `${tested?.node_type_id ?? nodeTypes[0]!.node_type_id}@1.0.0`, inputs: tested?.arguments ?? {} };
  const serverLabel = `${imported.server.name}${imported.server.version ? ` ${imported.server.version}` : ""}`;
  const stdio = source.kind === "stdio" ? source.server : undefined;

  const files: GeneratedFile[] = [
    ...renderTemplateFolder("mcp", {
      packageName: options.packageName,
      serverLabel,
      origin: stdio ? `the stdio MCP server started by \`${[stdio.command, ...(stdio.args ?? [])].join(" ")}\`` : `the MCP server at ${source.kind === "http" ? source.url : ""}`,
      toolCount: String(nodeTypes.length),
      toolsTable: nodeTypes.map((t) => `| \`${t.node_type_id}\` | ${t.constraints?.gates?.side_effect_class ?? ""} | ${(t.description ?? "").replace(/\s+/g, " ").replace(/\|/g, "\\|").slice(0, 120)} |`).join("\n"),
      leftOut: imported.leftOut.length === 0 ? "None: every tool became a node type." : imported.leftOut.map((l) => `- \`${l.tool}\`: ${l.reason}`).join("\n"),
      secrets:
        imported.secrets.length === 0
          ? "None."
          : imported.secrets.map((s) => `- \`FABRIC_SECRET_${s}\`, bound to the server's host with \`FABRIC_EXECUTOR_SECRET_HOSTS_${s}\``).join("\n"),
      tryIt: `npx fabric run ${tryIt.nodeTypeId} --input '${JSON.stringify(tryIt.inputs).replace(/'/g, "'\\''")}'`,
    }),
    { path: "node-types/index.json", content: json({ node_types: nodeTypes.map((t) => ({ node_type_id: t.node_type_id, version: t.version, file: fileOf(t) })) }) },
    ...nodeTypes.map((t) => ({ path: `node-types/${fileOf(t)}`, content: json(t) })),
    { path: "src/index.ts", content: indexSource(options.packageName, serverLabel, stdio ? { name: options.nodeTypePrefix, command: stdio.command, args: stdio.args ?? [] } : undefined) },
    { path: "test/exchanges.json", content: json({ server: imported.server, tools: imported.tools.filter((t) => nodeTypes.some((n) => (n.extensions as Record<string, { tool: string }>)["nodefabric.mcp"]!.tool === t.name)), exchanges }) },
  ];
  return {
    files,
    nodeTypeIds: nodeTypes.map((t) => t.node_type_id),
    tryIt,
    skipped: imported.leftOut.map((l) => `${l.tool}: ${l.reason}`),
    description: `NodeFabric node types for the tools of the MCP server ${serverLabel}, one per tool`,
    dependencies: { "@nodefabric/handler-mcp": MCP_PACKAGE_VERSIONS.handlerMcp },
    devDependencies: { "@modelcontextprotocol/server": MCP_PACKAGE_VERSIONS.mcpServer },
    secrets: imported.secrets,
  };
}

function nodeTypeOf(nodeTypes: NodeType[], id: string): NodeType | undefined {
  return nodeTypes.find((t) => t.node_type_id === id);
}

function indexSource(packageName: string, serverLabel: string, stdio?: { name: string; command: string; args: string[] }): string {
  const head = `/**
 * ${packageName}: the tools of the MCP server ${serverLabel.replace(/\*\//g, "* /")} as NodeFabric node types, one per tool, kept as data in
 * node-types/. Generated by create-fabric-handler --from-mcp; every node type is called by mcpToolHandler of
 * @nodefabric/handler-mcp, which checks the tool's definition against the hash its node type pins before each call.
 */
import { defineAtomicSet } from "@nodefabric/sdk";
`;
  if (!stdio) {
    return `${head}import { mcpToolHandler } from "@nodefabric/handler-mcp";

/** The node types, read from node-types/ when an executor first needs each one. */
export const tools = defineAtomicSet({ directory: new URL("../node-types/", import.meta.url), handler: mcpToolHandler() });

export default tools;
`;
  }
  return `${head}import { mcpToolHandler, StdioServerPool } from "@nodefabric/handler-mcp";

/**
 * The stdio server this package starts: one child process, shared by every call, started again if it dies. It sees
 * only PATH of the executor's environment (add names to env_allow, or values to env), in a working folder of its own.
 */
export const servers = new StdioServerPool({
  ${JSON.stringify(stdio.name)}: { command: ${JSON.stringify(stdio.command)}, args: ${JSON.stringify(stdio.args)}, env_allow: ["PATH", "HOME"] },
});

/** The node types, read from node-types/ when an executor first needs each one. */
export const tools = defineAtomicSet({ directory: new URL("../node-types/", import.meta.url), handler: mcpToolHandler(servers) });

export default tools;
`;
}

/** Every file of a package made from an MCP server, package.json and the shared files included. */
export async function renderMcpPackage(spec: {
  packageName: string;
  source: string;
  headers?: string[];
  include?: string[];
  exclude?: string[];
  sdkSpec?: string;
  schemasSpec?: string;
  onProgress?: (message: string) => void;
}): Promise<McpPackage & { baseUrlSetting: string }> {
  const nodeTypePrefix = nodeTypePrefixOf(spec.packageName);
  const baseUrlSetting = baseUrlSettingOf(nodeTypePrefix);
  const made = await mcpPackage({ packageName: spec.packageName, nodeTypePrefix, source: spec.source, headers: spec.headers, include: spec.include, exclude: spec.exclude, onProgress: spec.onProgress });
  const manifest = packageManifest({ packageName: spec.packageName, description: made.description, sdkSpec: spec.sdkSpec ?? DEFAULT_SDK_SPEC, schemasSpec: spec.schemasSpec, shipsNodeTypes: true });
  const withDeps = {
    ...manifest,
    dependencies: made.dependencies,
    devDependencies: Object.fromEntries(Object.entries({ ...(manifest.devDependencies as Record<string, string>), ...made.devDependencies }).sort(([a], [b]) => a.localeCompare(b))),
  };
  // package.json keeps its order: dependencies before the peer and dev ones.
  const ordered: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(withDeps)) {
    if (k === "dependencies") continue;
    if (k === "peerDependencies") ordered.dependencies = withDeps.dependencies;
    ordered[k] = v;
  }
  const files = [{ path: "package.json", content: json(ordered) }, ...renderTemplateFolder("shared", { packageName: spec.packageName, nodeTypePrefix, baseUrlSetting }), ...made.files];
  return { ...made, files, baseUrlSetting };
}
