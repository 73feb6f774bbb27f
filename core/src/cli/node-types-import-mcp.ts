/**
 * `fabric node-types import --from-mcp <url|command>`: every tool of an MCP server published to a running registry
 * as a node type run by `mcp.call@1.0.0` (of `@nodefabric/handler-mcp`), made by `@nodefabric/importer-mcp`, which
 * is loaded only for this command. No package and no deploy: an atomic executor serving `@nodefabric/handler-mcp` runs
 * them at once, through its egress policy, with the credentials the operator holds as executor secrets.
 *
 * A command is a stdio server: its node types name the server by `--server-name`, and the operator starts it by
 * naming it in the executor's FABRIC_MCP_SERVERS file; a node type never carries the command.
 */
import type { NodeType } from "@nodefabric/schemas";
import { sampleFor, type SchemaObject } from "@nodefabric/sdk/samples";
import { ImporterMissingError, loadMcpImporter, type McpImportResult } from "../importers/index.js";
import type { CommandOutput } from "./node-types-import.js";
import { leftOutLines, publishImport } from "./import-publish.js";

/** Options of `fabric node-types import --from-mcp`. */
export interface McpImportCommandOptions {
  fromMcp: string;
  prefix?: string;
  version?: string;
  include?: string[];
  exclude?: string[];
  /** `Name: value`, or `Name: Bearer {secret:NAME}`. */
  headers?: string[];
  /** The operator's name for a stdio server (default: the prefix). */
  serverName?: string;
  /** `auto` (default), `legacy`, or a revision to pin such as `2026-07-28`. */
  protocol?: string;
  timeoutMs?: number;
  dryRun?: boolean;
  token?: string;
  cwd?: string;
}

/** Runs the import against the registry at `registryUrl`; answers the exit code (0 published, 1 failed, 2 bad input). */
export async function nodeTypesImportMcp(registryUrl: string, options: McpImportCommandOptions, out: CommandOutput = process): Promise<number> {
  const progress = (message: string) => out.stderr.write(`fabric: ${message}\n`);
  let importer;
  try {
    importer = await loadMcpImporter(options.cwd);
  } catch (err) {
    out.stderr.write(`fabric: ${(err as Error).message}\n`);
    return err instanceof ImporterMissingError ? 2 : 1;
  }
  let result: McpImportResult;
  let sourceKind: "http" | "stdio";
  let stdioServer: { command: string; args?: string[] } | undefined;
  try {
    const source = importer.parseSource(options.fromMcp);
    sourceKind = source.kind;
    if (source.kind === "stdio") stdioServer = source.server;
    const headers = (options.headers ?? []).map((h) => importer.parseHeader(h));
    if (source.kind === "stdio" && headers.length > 0) throw new importer.McpImportError("--header applies to a server URL, not to a command");
    let protocol: unknown;
    if (options.protocol !== undefined) {
      if (options.protocol === "auto" || options.protocol === "legacy") protocol = options.protocol;
      else if (/^\d{4}-\d{2}-\d{2}$/.test(options.protocol)) protocol = { pin: options.protocol };
      else throw new importer.McpImportError(`--protocol must be auto, legacy or a revision such as 2026-07-28, not ${JSON.stringify(options.protocol)}`);
    }
    result = await importer.importMcpServer(source, {
      prefix: options.prefix,
      version: options.version,
      include: options.include,
      exclude: options.exclude,
      headers,
      serverName: options.serverName,
      protocol,
      timeoutMs: options.timeoutMs,
      onProgress: progress,
    });
  } catch (err) {
    out.stderr.write(`fabric: ${(err as Error).message}\n`);
    return err instanceof importer.McpImportError ? 2 : 1;
  }
  const published = await publishImport(
    result,
    { registryUrl, token: options.token, dryRun: options.dryRun, item: "tool", extension: "nodefabric.mcp", source: options.fromMcp, dryRunView: () => ({ server: result.server, node_types: result.nodeTypes, left_out: result.leftOut, secrets: result.secrets, notes: result.notes }) },
    progress,
    out,
  );
  if (typeof published === "number") return published;
  out.stdout.write(summary(result, published, options, sourceKind, stdioServer));
  return 0;
}

/** What was published, what was left out, what the executor needs, and a run to try. */
function summary(result: McpImportResult, nodeTypes: NodeType[], options: McpImportCommandOptions, kind: "http" | "stdio", stdio?: { command: string; args?: string[] }): string {
  const server = `${result.server.name}${result.server.version ? ` ${result.server.version}` : ""}`;
  const lines = [`published ${nodeTypes.length} node type${nodeTypes.length === 1 ? "" : "s"} of the MCP server ${server} (protocol ${result.server.protocol_version ?? "?"}), run by mcp.call@1.0.0:`];
  for (const t of nodeTypes.slice(0, 15)) lines.push(`  ${t.node_type_id}@${t.version}`);
  if (nodeTypes.length > 15) lines.push(`  … and ${nodeTypes.length - 15} more`);
  if (result.leftOut.length > 0) lines.push(`left out (${result.leftOut.length})${leftOutLines(result.leftOut, "tool", 20)}`);
  if (kind === "http") {
    const host = new URL(options.fromMcp.trim()).host;
    if (result.secrets.length > 0) {
      lines.push("", "The executor sends these secrets only to the hosts they are bound to; where it runs, set:");
      for (const s of result.secrets) lines.push(`  FABRIC_SECRET_${s}=…  FABRIC_EXECUTOR_SECRET_HOSTS_${s}=${host}`);
    }
  } else {
    const mcp = (nodeTypes[0]!.extensions as Record<string, { server?: string }>)["nodefabric.mcp"]!;
    lines.push("", `The node types name the stdio server "${mcp.server}". The executor starts it only when its operator names it:`);
    const entry = JSON.stringify({ servers: { [mcp.server!]: { command: stdio?.command, args: stdio?.args ?? [], env_allow: ["PATH", "HOME"] } } });
    lines.push(`  FABRIC_MCP_SERVERS=<a JSON file> holding ${entry}`, "  (each server: command, args, env, env_allow, cwd; see docs/mcp-import.md)");
  }
  const first = nodeTypes.find((t) => (t.constraints as { gates?: { side_effect_class?: string } } | undefined)?.gates?.side_effect_class === "read") ?? nodeTypes[0]!;
  const sample = sampleFor((first.input_schema ?? { type: "object" }) as SchemaObject, { prefer: "minimal" });
  const input = "value" in sample ? JSON.stringify(sample.value).replace(/'/g, "'\\''") : "{…}";
  lines.push("", "Try it:", `  npx fabric run ${first.node_type_id}@${first.version} --input '${input}'`, "");
  return lines.join("\n");
}
