/**
 * Search mode, for large catalogues. (Filled in below.)
 */
import type { NodeType } from "@nodefabric/schemas";
import type { CallerInfo } from "./mcp-server.js";
import type { McpTool, ToolResult } from "./tools.js";

export const SEARCH_TOOL = "nodefabric.search";
export const RUN_TOOL = "nodefabric.run";

export interface SearchSupport {
  search(caller: CallerInfo, args: Record<string, unknown>): Promise<ToolResult>;
  pick(caller: CallerInfo, args: Record<string, unknown>): Promise<{ nodeType: NodeType; input: Record<string, unknown> } | { error: ToolResult }>;
}

export function searchTools(): McpTool[] {
  return [];
}

export function selectionSearch(_deps: unknown, _fabric: unknown): SearchSupport {
  return {
    search: async () => ({ content: [{ type: "text", text: "search is not available" }], isError: true }),
    pick: async () => ({ error: { content: [{ type: "text", text: "search is not available" }], isError: true } }),
  };
}
