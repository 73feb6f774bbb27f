/**
 * `defineAtomic`: how a handler package declares an atomic node type and its handler.
 */
import { SERVICE_VERSION } from "../version.js";
import type { AtomicDefinition, FabricDefinition, HandlerFn, JsonObject, NodeTypeDefinition } from "./types.js";

/** Version of this SDK; executors accept definitions made by a compatible one. */
export const SDK_VERSION: string = SERVICE_VERSION;

/**
 * Marks definitions with a symbol from the global registry, so an executor recognises definitions made
 * by another installed copy of the SDK (a handler package brings its own in devDependencies).
 */
export const DEFINITION_BRAND: unique symbol = Symbol.for("nodefabric.definition") as never;

/** Declares an atomic node type served by `handler`. */
export function defineAtomic<I = JsonObject, O = JsonObject>(spec: {
  nodeType: NodeTypeDefinition;
  handler: HandlerFn<I, O>;
}): AtomicDefinition<I, O> {
  if (typeof spec !== "object" || spec === null) throw new TypeError("defineAtomic: pass { nodeType, handler }");
  const { nodeType, handler } = spec;
  if (typeof nodeType !== "object" || nodeType === null) throw new TypeError("defineAtomic: nodeType is required");
  if (typeof nodeType.node_type_id !== "string" || nodeType.node_type_id === "") {
    throw new TypeError("defineAtomic: nodeType.node_type_id must be a non-empty string");
  }
  if (typeof nodeType.version !== "string" || nodeType.version === "") {
    throw new TypeError(`defineAtomic: nodeType.version of ${nodeType.node_type_id} must be a non-empty string`);
  }
  if (typeof handler !== "function") throw new TypeError(`defineAtomic: the handler of ${nodeType.node_type_id} must be a function`);
  const definition = {
    kind: "atomic" as const,
    sdkVersion: SDK_VERSION,
    nodeType: { ...(nodeType as Record<string, unknown>), kind: "atomic" } as AtomicDefinition["nodeType"],
    handler,
  };
  Object.defineProperty(definition, DEFINITION_BRAND, { value: true });
  return Object.freeze(definition);
}

/** True for a definition of any kind made by any installed copy of the SDK. */
export function isDefinition(value: unknown): value is FabricDefinition {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string | symbol, unknown>;
  return v[DEFINITION_BRAND] === true && (v.kind === "atomic" || v.kind === "composite") && typeof v.nodeType === "object" && v.nodeType !== null;
}

/** True for an atomic definition made by any installed copy of the SDK. */
export function isAtomicDefinition(value: unknown): value is AtomicDefinition {
  return isDefinition(value) && value.kind === "atomic" && typeof (value as { handler?: unknown }).handler === "function";
}
