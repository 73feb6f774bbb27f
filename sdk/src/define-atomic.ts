/**
 * `defineAtomic`: how a handler package declares an atomic node type and its handler.
 */
import { PACKAGE_VERSION } from "./version.js";
import type { AtomicDefinition, FabricDefinition, HandlerFn, JsonObject, NodeTypeDefinition } from "./types.js";

/** Version of this SDK; executors accept definitions made by a compatible one. */
export const SDK_VERSION: string = PACKAGE_VERSION;

/**
 * Marks definitions with a symbol from the global registry, so an executor recognises definitions made
 * by another installed copy of the SDK (a handler package brings its own in devDependencies).
 */
export const DEFINITION_BRAND: unique symbol = Symbol.for("nodefabric.definition") as never;

/** Declares an atomic node type served by `handler`; with `template: true` it may implement published node types too. */
export function defineAtomic<I = JsonObject, O = JsonObject>(spec: {
  nodeType: NodeTypeDefinition;
  handler: HandlerFn<I, O>;
  template?: boolean;
}): AtomicDefinition<I, O> {
  const template = (spec as { template?: unknown } | null)?.template;
  if (template !== undefined && typeof template !== "boolean") throw new TypeError("defineAtomic: template must be a boolean");
  return makeDefinition("atomic", "defineAtomic", spec, "handler", template ? { template: true } : undefined) as AtomicDefinition<I, O>;
}

/**
 * Checks what a define function was given and builds its frozen, branded definition: `fnKey` names the function
 * the definition carries (`handler` for atomics, `run` for composites).
 */
export function makeDefinition(kind: "atomic" | "composite", name: string, spec: unknown, fnKey: "handler" | "run", extra?: Record<string, unknown>): FabricDefinition {
  if (typeof spec !== "object" || spec === null) throw new TypeError(`${name}: pass { nodeType, ${fnKey} }`);
  const { nodeType, [fnKey]: fn } = spec as Record<string, unknown> & { nodeType?: NodeTypeDefinition };
  if (typeof nodeType !== "object" || nodeType === null) throw new TypeError(`${name}: nodeType is required`);
  if (typeof nodeType.node_type_id !== "string" || nodeType.node_type_id === "") {
    throw new TypeError(`${name}: nodeType.node_type_id must be a non-empty string`);
  }
  if (typeof nodeType.version !== "string" || nodeType.version === "") {
    throw new TypeError(`${name}: nodeType.version of ${nodeType.node_type_id} must be a non-empty string`);
  }
  if (typeof fn !== "function") {
    throw new TypeError(`${name}: the ${fnKey === "run" ? "run function" : "handler"} of ${nodeType.node_type_id} must be a function`);
  }
  const definition = {
    kind,
    sdkVersion: SDK_VERSION,
    nodeType: { ...(nodeType as Record<string, unknown>), kind },
    [fnKey]: fn,
    ...extra,
  };
  Object.defineProperty(definition, DEFINITION_BRAND, { value: true });
  return Object.freeze(definition) as unknown as FabricDefinition;
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
