/**
 * The MCP importer, loaded when asked for: it lives in `@nodefabric/handler-mcp` beside `mcp.call`, which runs what it
 * makes, and brings the MCP client SDK with it. Core does not depend on it, so a fabric that imports no MCP server
 * installs and loads none of it.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { NodeType } from "@nodefabric/schemas";

/** The package that holds the importer and `mcp.call`. */
export const MCP_HANDLER_PACKAGE = "@nodefabric/handler-mcp";

/** What `importMcpServer` gives (see handlers/mcp/src/importer.ts). */
export interface McpImportResult {
  server: { name: string; version: string; protocol_version?: string; era?: string };
  nodeTypes: NodeType[];
  leftOut: Array<{ tool: string; reason: string }>;
  notes: string[];
  secrets: string[];
}

/** The importer's functions this fabric uses. */
export interface McpImporter {
  parseSource(text: string): { kind: "http"; url: string } | { kind: "stdio"; server: { command: string; args?: string[] } };
  parseHeader(text: string): { name: string; value?: string; secret?: string; prefix?: string };
  importMcpServer(source: unknown, options: Record<string, unknown>): Promise<McpImportResult>;
  McpImportError: new (message: string) => Error;
}

/** The importer is not installed where the command runs. */
export class McpImporterMissingError extends Error {}

/** Loads the MCP importer: from where this fabric is installed, else from `cwd`'s node_modules. */
export async function loadMcpImporter(cwd: string = process.cwd()): Promise<McpImporter> {
  try {
    return (await import(`${MCP_HANDLER_PACKAGE}/importer`)) as McpImporter;
  } catch (first) {
    const dir = path.join(cwd, "node_modules", ...MCP_HANDLER_PACKAGE.split("/"));
    const manifest = path.join(dir, "package.json");
    if (existsSync(manifest)) {
      const pkg = JSON.parse(readFileSync(manifest, "utf8")) as { exports?: Record<string, { import?: string } | string> };
      const entry = pkg.exports?.["./importer"];
      const file = typeof entry === "string" ? entry : entry?.import;
      if (file) return (await import(pathToFileURL(path.join(dir, file)).href)) as McpImporter;
    }
    throw new McpImporterMissingError(
      `importing an MCP server needs ${MCP_HANDLER_PACKAGE} (the importer and mcp.call, which runs the node types it makes): npm install ${MCP_HANDLER_PACKAGE}`,
      { cause: first },
    );
  }
}
