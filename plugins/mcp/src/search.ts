/**
 * Search mode, for catalogues no agent can hold as tools (an imported API of 1,000 operations and more): two tools
 * instead of one per node type.
 * - `nodefabric.search` asks Selection (core's searchCatalogue, the fabric's own ranking) for the node types that
 *   fit a goal, and answers them with their schemas, so the agent knows how to call them;
 * - `nodefabric.run` runs any exposed node type the caller may run, with its input, as an ordinary run.
 */
import { MAX_SEARCH_RESULTS as MAX_RESULTS, searchCatalogue, type PluginServiceContext } from "@nodefabric/core";
import type { CallerInfo } from "@nodefabric/core";
import type { SearchSupport, ServerDeps } from "./server-deps.js";
import { annotationsOf, type McpTool, type ToolResult } from "./tools.js";

export const SEARCH_TOOL = "nodefabric.search";
export const RUN_TOOL = "nodefabric.run";

const nodeTypeSummary = {
  type: "object",
  properties: {
    node_type_id: { type: "string" },
    version: { type: "string" },
    description: { type: "string" },
    score: { type: "number" },
    input_schema: { type: "object" },
    output_schema: { type: "object" },
    annotations: { type: "object" },
  },
  required: ["node_type_id", "version", "input_schema"],
};

export function searchTools(): McpTool[] {
  return [
    {
      name: SEARCH_TOOL,
      title: "Find node types",
      description:
        "Searches this fabric's catalogue for the node types (operations) that fit a goal, best first, with their input and output schemas. " +
        `Then call ${RUN_TOOL} with one of them.`,
      inputSchema: {
        type: "object",
        properties: {
          goal: { type: "string", minLength: 1, maxLength: 2000, description: "What you want to do, in plain words." },
          limit: { type: "integer", minimum: 1, maximum: MAX_RESULTS, description: "How many node types to return (default 10)." },
        },
        required: ["goal"],
        additionalProperties: false,
      },
      outputSchema: { type: "object", properties: { node_types: { type: "array", items: nodeTypeSummary } }, required: ["node_types"] },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    {
      name: RUN_TOOL,
      title: "Run a node type",
      description: `Runs one node type of this fabric (as found with ${SEARCH_TOOL}) with the given input, as a durable run, and answers its outputs.`,
      inputSchema: {
        type: "object",
        properties: {
          node_type_id: { type: "string", minLength: 1, description: "The node type to run." },
          input: { type: "object", description: "Its input, valid under its input_schema." },
        },
        required: ["node_type_id", "input"],
        additionalProperties: false,
      },
      annotations: { readOnlyHint: false, destructiveHint: true, openWorldHint: true },
    },
  ];
}

const toolError = (text: string): ToolResult => ({ content: [{ type: "text", text }], isError: true });

export function selectionSearch(deps: ServerDeps, fabric: PluginServiceContext): SearchSupport {
  return {
    async search(_caller, args) {
      const goal = args.goal;
      const limit = args.limit ?? 10;
      if (typeof goal !== "string" || goal.trim() === "" || goal.length > 2000) return toolError("invalid_inputs: goal must be a non-empty string of at most 2000 characters");
      if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > MAX_RESULTS) return toolError(`invalid_inputs: limit must be an integer from 1 to ${MAX_RESULTS}`);
      const answer = await searchCatalogue({ selectionUrl: fabric.serviceUrl("selection"), token: await fabric.serviceToken?.("selection"), catalogue: deps.catalogue, goal, limit, subtaskId: "mcp-search" });
      if (!answer.ok) return toolError(`unavailable: Selection answered ${answer.status}`);
      const found = answer.found.map(({ nodeType: t, score }) => ({
        node_type_id: t.node_type_id,
        version: t.version,
        ...(t.description ? { description: t.description } : {}),
        ...(score !== undefined ? { score } : {}),
        input_schema: t.input_schema ?? { type: "object" },
        ...(t.output_schema ? { output_schema: t.output_schema } : {}),
        annotations: annotationsOf(t),
      }));
      const structured = { node_types: found };
      return { content: [{ type: "text", text: JSON.stringify(structured) }], structuredContent: structured };
    },
    async pick(_caller, args) {
      const id = args.node_type_id;
      const input = args.input ?? {};
      if (typeof id !== "string" || id === "") return { error: toolError("invalid_inputs: node_type_id must be a non-empty string") };
      if (typeof input !== "object" || input === null || Array.isArray(input)) return { error: toolError("invalid_inputs: input must be an object") };
      const t = await deps.catalogue.get(id);
      if (!t) return { error: toolError(`unknown_node_type: ${id} is not a node type this server exposes (find one with ${SEARCH_TOOL})`) };
      return { nodeType: t, input: input as Record<string, unknown> };
    },
  };
}
