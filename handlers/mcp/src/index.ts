/**
 * @nodefabric/handler-mcp: `mcp.call`, the implementation of node types made from MCP servers' tools, and the
 * definitions the importer (@nodefabric/importer-mcp, `fabric node-types import --from-mcp`) makes them with.
 */
import { mcpCall } from "./mcp-call.js";

export { mcpCall, mcpToolHandler, configOf } from "./mcp-call.js";
export { compileMcpConfig, MCP_EXTENSION, type McpConfig, type ProtocolMode } from "./mcp-config.js";
export { callMcpTool, forgetProtocolEras, mapFailure, CLIENT_INFO } from "./tool-call.js";
export { StdioServerPool, childEnvironment, checkStdioServerConfig, operatorStdioServers, resetOperatorStdioServers, stdioServersFromEnvironment, STDIO_SERVERS_ENV, type StdioServerConfig } from "./stdio-servers.js";
export { toolDefinitionHash, isRetrySafe, sideEffectClassOf, CONTENT_OUTPUT_SCHEMA, type McpTool } from "./tool-definition.js";
export { MCP_FAILURE_CODES } from "./failure-codes.js";
export { MCP_CALL_SETTINGS } from "./settings.js";
export default mcpCall;
export { TASK_PROTOCOL_VERSION } from "./task-call.js";
export { isDraft07, toDraft2020 } from "./schema-dialect.js";
