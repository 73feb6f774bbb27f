/**
 * The shapes of a declarative composite plan (`extensions["nodefabric.plan"]` of a composite NodeType)
 * and of what the interpreter needs from the composite executor.
 */
import type { NodeTypeRef } from "@nodefabric/schemas";
import type { JsonObject, JsonValue } from "@nodefabric/sdk";

/** The extension key under which a composite NodeType carries its plan. */
export const PLAN_EXTENSION_KEY = "nodefabric.plan";

/** One step of a plan: a child node call, optionally guarded (`when`), fanned out (`for_each`) or ordered (`after`). */
export interface PlanStep {
  id: string;
  node_type_ref: NodeTypeRef;
  /** An object whose values may be `"{% … %}"` expressions at any depth, or one expression yielding an object. */
  inputs?: JsonObject | string;
  when?: JsonValue;
  /** An expression yielding the items to fan out over, or a literal array. */
  for_each?: string | JsonValue[];
  after?: string[];
  description?: string;
}

/** A declarative composite: steps, then outputs computed from the inputs and the steps' outputs. */
export interface Plan {
  steps: PlanStep[];
  outputs: JsonObject | string;
  description?: string;
}

/** One problem found in a plan: a JSON Pointer (under the NodeType by default) and what is wrong there. */
export interface PlanIssue {
  path: string;
  message: string;
}

/**
 * The part of the composite context the interpreter uses. The executor's CompositeContext satisfies it
 * structurally: `call` creates one child NodeRun and resolves with its outputs (or rejects when it fails).
 */
export interface PlanContext {
  call(ref: NodeTypeRef, inputs: JsonObject): Promise<JsonObject>;
  signal: AbortSignal;
}
