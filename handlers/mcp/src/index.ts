/**
 * @nodefabric/handler-mcp: `mcp.call`, the implementation of node types made from MCP servers' tools
 * (`fabric node-types import --from-mcp`), and the importer that makes them.
 */
import { mcpCall } from "./mcp-call.js";

export { mcpCall, mcpToolHandler, configOf } from "./mcp-call.js";
export { compileMcpConfig, MCP_EXTENSION, type McpConfig, type ProtocolMode } from "./mcp-config.js";
export { callMcpTool, forgetProtocolEras, mapFailure, CLIENT_INFO } from "./tool-call.js";
export { StdioServerPool, childEnvironment, checkStdioServerConfig, operatorStdioServers, resetOperatorStdioServers, stdioServersFromEnvironment, STDIO_SERVERS_ENV, type StdioServerConfig } from "./stdio-servers.js";
export { toolDefinitionHash, isRetrySafe, sideEffectClassOf, CONTENT_OUTPUT_SCHEMA, type McpTool } from "./tool-definition.js";
export default mcpCall;
export { importMcpServer, nodeTypeOfTool, parseHeader, parseSource, prefixFromName, splitCommandLine, McpImportError, MCP_CALL_TEMPLATE, MAX_TOOLS } from "./importer.js";
export type { ImportHeader, LeftOutTool, McpImport, McpImportOptions, McpSource } from "./importer.js";
