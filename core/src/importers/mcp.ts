/**
 * The MCP importer as `fabric node-types import --from-mcp` uses it: @nodefabric/importer-mcp, loaded when asked for.
 * It brings the MCP client SDK with it; core depends on neither.
 */
import type { NodeType } from "@nodefabric/schemas";
import { loadImporter, type ImporterPackage } from "./load-importer.js";

/** The package that holds the MCP importer. */
export const MCP_IMPORTER: ImporterPackage = { name: "@nodefabric/importer-mcp", imports: "an MCP server", runBy: "mcp.call of @nodefabric/handler-mcp" };

/** What `importMcpServer` gives (McpImport of @nodefabric/importer-mcp), as far as the command reads it. */
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

/** Loads the MCP importer (see loadImporter). */
export function loadMcpImporter(cwd?: string): Promise<McpImporter> {
  return loadImporter<McpImporter>(MCP_IMPORTER, cwd);
}
