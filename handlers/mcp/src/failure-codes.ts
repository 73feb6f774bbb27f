/**
 * The failure codes `mcp.call` raises besides the SDK's (sdk/failure-codes.ts: `upstream_unavailable`,
 * `invalid_configuration`, `egress_denied`, …); docs/errors.md lists them all.
 */
import { defineFailureCodes, failWith } from "@nodefabric/sdk";

export const MCP_FAILURE_CODES = defineFailureCodes({
  tool_error: {
    meaning: "The MCP tool ran and reported an error (`isError`), or its task asked for input a NodeRun cannot give.",
    retryable: false,
    raisedBy: "mcp.call",
  },
  tool_definition_changed: {
    meaning: "The MCP server no longer offers the tool, or offers it with another definition than the one imported (pinned); import the server again.",
    retryable: false,
    raisedBy: "mcp.call",
  },
  upstream_unauthorized: {
    meaning: "The MCP server or A2A agent refused the credentials (HTTP 401/403), or the tenant of the run has no credentials for it.",
    retryable: false,
    raisedBy: "mcp.call, a2a.send",
  },
  upstream_protocol_error: {
    meaning: "The MCP server (or A2A agent) answered something that is not MCP (A2A) or JSON-RPC, a JSON-RPC error, or a tool result that breaks its own outputSchema.",
    retryable: false,
    raisedBy: "mcp.call, a2a.send",
  },
  stdio_not_allowed: {
    meaning: "The node type tries to make the executor start a process (a command of its own); a stdio MCP server is named only by the operator or an installed package.",
    retryable: false,
    raisedBy: "mcp.call",
  },
});

/** The HandlerError of a failure of `mcp.call` (a code of its block or the SDK's). */
export const fail = failWith(MCP_FAILURE_CODES);
