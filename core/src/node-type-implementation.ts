/**
 * `extensions["nodefabric.implementation"]` of a NodeType: the loaded definition that runs it (for example
 * `http.request@1.0.0` for an HTTP-backed node type published at run time). Executors, the registry and the CLI read
 * it the same way.
 */
import type { NodeType, NodeTypeRef } from "@nodefabric/schemas";

/** The extension of a NodeType that names the definition implementing it: `{ node_type_id, version }`. */
export const IMPLEMENTATION_EXTENSION = "nodefabric.implementation";

/** The ref a NodeType names in `extensions["nodefabric.implementation"]`, or undefined when it names none or names it badly. */
export function implementationOf(nodeType: NodeType): NodeTypeRef | undefined {
  const value = nodeType.extensions?.[IMPLEMENTATION_EXTENSION] as { node_type_id?: unknown; version?: unknown } | undefined;
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  if (typeof value.node_type_id !== "string" || value.node_type_id === "" || typeof value.version !== "string" || value.version === "") return undefined;
  return { node_type_id: value.node_type_id, version: value.version };
}
