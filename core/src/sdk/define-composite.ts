/**
 * `defineComposite`: how a handler package declares a composite node type and the code that drives its children.
 */
import { DEFINITION_BRAND, SDK_VERSION, isDefinition } from "./define-atomic.js";
import type { CompositeDefinition, CompositeFn, JsonObject, NodeTypeDefinition } from "./types.js";

/** Declares a composite node type driven by `run`, which creates children through its context. */
export function defineComposite<I = JsonObject, O = JsonObject>(spec: { nodeType: NodeTypeDefinition; run: CompositeFn<I, O> }): CompositeDefinition<I, O> {
  if (typeof spec !== "object" || spec === null) throw new TypeError("defineComposite: pass { nodeType, run }");
  const { nodeType, run } = spec;
  if (typeof nodeType !== "object" || nodeType === null) throw new TypeError("defineComposite: nodeType is required");
  if (typeof nodeType.node_type_id !== "string" || nodeType.node_type_id === "") {
    throw new TypeError("defineComposite: nodeType.node_type_id must be a non-empty string");
  }
  if (typeof nodeType.version !== "string" || nodeType.version === "") {
    throw new TypeError(`defineComposite: nodeType.version of ${nodeType.node_type_id} must be a non-empty string`);
  }
  if (typeof run !== "function") throw new TypeError(`defineComposite: the run function of ${nodeType.node_type_id} must be a function`);
  const definition = {
    kind: "composite" as const,
    sdkVersion: SDK_VERSION,
    nodeType: { ...(nodeType as Record<string, unknown>), kind: "composite" } as CompositeDefinition["nodeType"],
    run,
  };
  Object.defineProperty(definition, DEFINITION_BRAND, { value: true });
  return Object.freeze(definition);
}

/** True for a composite definition made by any installed copy of the SDK. */
export function isCompositeDefinition(value: unknown): value is CompositeDefinition {
  return isDefinition(value) && value.kind === "composite" && typeof (value as { run?: unknown }).run === "function";
}
