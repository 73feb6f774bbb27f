/**
 * The one shape of every importer (OpenAPI, MCP, and the next one): an external description in, NodeTypes as data
 * out, plus what was left out and why, and notes on what was simplified. `fabric node-types import` publishes the
 * node types; `npm create fabric-handler` writes them into a package. docs/architecture.md ("Agents") says why.
 */
import type { NodeType } from "@nodefabric/schemas";

/** A part of the description (an operation, a tool) that did not become a node type, and why. */
export interface LeftOut {
  reason: string;
}

/** What an importer gives: the node types it made, what it left out and why, and notes for the person importing. */
export interface ImportResult<Left extends LeftOut = LeftOut> {
  nodeTypes: NodeType[];
  leftOut: Left[];
  notes: string[];
}
