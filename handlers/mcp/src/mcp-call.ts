/**
 * `mcp.call@1.0.0`: a template definition. The executor runs it for every node type published in the registry with
 * `extensions["nodefabric.implementation"] = { node_type_id: "mcp.call", version: "1.0.0" }`, under that node type's
 * schemas; the handler reads which server and tool to call from `ctx.nodeType.extensions["nodefabric.mcp"]`
 * (see mcp-config.ts). `fabric node-types import --from-mcp <url>` publishes such node types, one per tool.
 *
 * Called directly, with no node type of its own naming a server, it is refused.
 */
import { compiledPerNodeType, defineAtomic, type AtomicContext, type JsonObject } from "@nodefabric/sdk";
import { compileMcpConfig, MCP_EXTENSION, type McpConfig } from "./mcp-config.js";
import { callMcpTool } from "./tool-call.js";
import { stdioServersFromEnvironment, type StdioServerPool } from "./stdio-servers.js";
import { MCP_CALL_SETTINGS } from "./settings.js";
import { fail } from "./failure-codes.js";

// The operator's stdio servers are checked when the executor loads this package: a bad FABRIC_MCP_SERVERS file stops
// the start of an executor that names the package (or leaves a discovered one out, with the reason in its health),
// rather than failing every call later. The servers themselves start on their first call.
if (MCP_CALL_SETTINGS.fromEnv(process.env).servers) stdioServersFromEnvironment();

type NodeTypeOfContext = AtomicContext["nodeType"];

/** The checked `nodefabric.mcp` of a node type. */
export const configOf = compiledPerNodeType((nodeType: NodeTypeOfContext): McpConfig => compileMcpConfig(nodeType, nodeType.extensions?.[MCP_EXTENSION]));

/**
 * The handler of node types whose `nodefabric.mcp` names the server and tool; `stdioServers` is where stdio servers
 * are looked up (default: the executor operator's, FABRIC_MCP_SERVERS). A handler package made from a stdio server
 * passes its own pool.
 */
export function mcpToolHandler(stdioServers?: StdioServerPool) {
  return async (inputs: JsonObject, ctx: AtomicContext): Promise<JsonObject> => {
    if (!ctx.nodeType) throw fail("invalid_configuration", "this executor gives handlers no ctx.nodeType; @nodefabric/handler-mcp needs a newer @nodefabric/core", { retryable: false });
    return callMcpTool(configOf(ctx.nodeType), inputs, ctx, stdioServers);
  };
}

/** `mcp.call@1.0.0`: calls an MCP tool as its node type's `nodefabric.mcp` says; implements published node types. */
export const mcpCall = defineAtomic<JsonObject, JsonObject>({
  template: true,
  nodeType: {
    node_type_id: "mcp.call",
    version: "1.0.0",
    description:
      "MCP tool call: the implementation of node types made from the tools of MCP servers (fabric node-types import --from-mcp), " +
      'published with extensions "nodefabric.implementation" = mcp.call@1.0.0 and "nodefabric.mcp" (server URL or an operator\'s stdio server, tool, ' +
      "tool definition hash, credentials as executor secrets). Called directly it is refused, since it names no server.",
    input_schema: { type: "object" },
    output_schema: { type: "object" },
    constraints: { gates: { side_effect_class: "irreversible" } },
    extensions: { "nodefabric.trust_tier": "external" },
  },
  handler: mcpToolHandler(),
});
