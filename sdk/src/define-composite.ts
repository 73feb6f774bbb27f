/**
 * `defineComposite`: how a handler package declares a composite node type and the code that drives its children.
 */
import { isDefinition, makeDefinition } from "./define-atomic.js";
import type { CompositeDefinition, CompositeFn, JsonObject, NodeTypeDefinition } from "./types.js";

/** Declares a composite node type driven by `run`, which creates children through its context. */
export function defineComposite<I = JsonObject, O = JsonObject>(spec: { nodeType: NodeTypeDefinition; run: CompositeFn<I, O> }): CompositeDefinition<I, O> {
  return makeDefinition("composite", "defineComposite", spec, "run") as unknown as CompositeDefinition<I, O>;
}

/** True for a composite definition made by any installed copy of the SDK. */
export function isCompositeDefinition(value: unknown): value is CompositeDefinition {
  return isDefinition(value) && value.kind === "composite" && typeof (value as { run?: unknown }).run === "function";
}
