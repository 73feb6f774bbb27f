/**
 * What a node type pins of an MCP tool: a hash of the parts of its definition that decide what a call does (name,
 * description, input and output schemas, annotations). Task support (`execution`) is left out: the 2026-07-28
 * protocol has no such field, so one server lists the same tool with it to a 2025 client and without it to a 2026 one. The importer stores it; `mcp.call` compares it
 * with the server's `tools/list` before every call, so a tool that changed on the server fails with
 * `tool_definition_changed` instead of running something nobody reviewed.
 */
import { createHash } from "node:crypto";

/** The fields of an MCP `Tool` this package reads. */
export interface McpTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations?: {
    title?: string;
    readOnlyHint?: boolean;
    destructiveHint?: boolean;
    idempotentHint?: boolean;
    openWorldHint?: boolean;
  };
  execution?: { taskSupport?: "forbidden" | "optional" | "required" };
  [key: string]: unknown;
}

/** JSON with object keys sorted, so equal definitions hash equally whatever order the server wrote them in. */
function canonical(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
}

/** `sha256:<hex>` of the parts of `tool` that decide what a call does. */
export function toolDefinitionHash(tool: McpTool): string {
  const pinned = {
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema,
    outputSchema: tool.outputSchema,
    annotations: tool.annotations
      ? { readOnlyHint: tool.annotations.readOnlyHint, destructiveHint: tool.annotations.destructiveHint, idempotentHint: tool.annotations.idempotentHint, openWorldHint: tool.annotations.openWorldHint }
      : undefined,
  };
  return `sha256:${createHash("sha256").update(canonical(pinned)).digest("hex")}`;
}

/** Read-only, or idempotent (MCP's defaults: not read-only, not idempotent). */
export function isRetrySafe(tool: McpTool): boolean {
  return tool.annotations?.readOnlyHint === true || tool.annotations?.idempotentHint === true;
}

/**
 * The side-effect class of a tool from its annotations, with MCP's defaults (a tool that is not read-only is taken as
 * destructive unless it says `destructiveHint: false`): read-only → `read`; not destructive → `write`; else `irreversible`.
 */
export function sideEffectClassOf(tool: McpTool): "read" | "write" | "irreversible" {
  if (tool.annotations?.readOnlyHint === true) return "read";
  if (tool.annotations?.destructiveHint === false) return "write";
  return "irreversible";
}

/**
 * The output schema of a node type made from a tool without an `outputSchema`: the call's content blocks, and its
 * `structuredContent` when the server sent one anyway. Documented in docs/mcp-import.md.
 */
export const CONTENT_OUTPUT_SCHEMA: Record<string, unknown> = {
  type: "object",
  description: "The MCP tool result: its content blocks (text, image, audio, resource_link, resource) and, when the server sent it, structuredContent.",
  properties: {
    content: {
      type: "array",
      items: {
        type: "object",
        properties: { type: { type: "string" } },
        required: ["type"],
      },
    },
    structuredContent: {},
  },
  required: ["content"],
};
