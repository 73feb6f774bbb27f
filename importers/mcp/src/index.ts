/**
 * @nodefabric/importer-mcp: an MCP server in (a Streamable HTTP URL, or a command that starts a stdio server), one
 * atomic node type per tool out, run by `mcp.call` of @nodefabric/handler-mcp, plus what was left out and why.
 * `fabric node-types import --from-mcp` loads it only when asked; `npm create fabric-handler -- --from-mcp` bundles it.
 */
export {
  importMcpServer,
  nodeTypeOfTool,
  parseHeader,
  parseSource,
  prefixFromName,
  splitCommandLine,
  McpImportError,
  MCP_CALL_TEMPLATE,
  MAX_TOOLS,
  type ImportHeader,
  type LeftOutTool,
  type McpImport,
  type McpImportOptions,
  type McpSource,
  type McpTool,
} from "./import-mcp-server.js";
