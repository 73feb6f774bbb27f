/**
 * What a composite executor runs for a node type: the code of a loaded `defineComposite` definition, or the
 * declarative plan (`extensions["nodefabric.plan"]`) of a composite NodeType published in the registry.
 */
import type { ValidateFunction } from "ajv";
import { trackCache } from "../../observe/caches.js";
import type { NodeType, NodeTypeRef } from "@nodefabric/schemas";
import { FabricError } from "../../http/errors.js";
import type { RegistryClient } from "../../clients/registry-client.js";
import { isCompositeDefinition } from "@nodefabric/sdk";
import type { CompositeContext, JsonObject } from "@nodefabric/sdk";
import type { LoadedDefinition, LoadedHandlers } from "../atomic-executor/handler-loader.js";
import { compileHandlerSchema, createHandlerAjv } from "@nodefabric/sdk/runtime";
import { planOf, runPlan } from "./plan/index.js";

/** A composite the executor can drive. */
export interface CompositeTarget {
  nodeType: NodeType;
  validateInputs: ValidateFunction;
  /** Where it came from, for health and logs. */
  source: "code" | "plan";
  run(inputs: JsonObject, ctx: CompositeContext): Promise<unknown>;
}

const MAX_CACHED_PLANS = 1000;

/** Finds the target of a node type ref, caching plan types (a published version never changes). */
export class CompositeTargets {
  private readonly code = new Map<string, CompositeTarget>();
  private readonly plans = new Map<string, Promise<CompositeTarget>>();

  constructor(
    readonly definitions: LoadedDefinition[],
    private readonly handlers: LoadedHandlers,
    private readonly registry?: RegistryClient,
  ) {
    trackCache("composite.plan_targets", this, (t) => ({ entries: t.plans.size }), { max_entries: MAX_CACHED_PLANS });
    for (const d of definitions) {
      const def = d.definition;
      if (!isCompositeDefinition(def)) continue;
      this.code.set(`${def.nodeType.node_type_id}@${def.nodeType.version}`, {
        nodeType: def.nodeType,
        validateInputs: d.validateInputs,
        source: "code",
        run: (inputs, ctx) => def.run(inputs, ctx),
      });
    }
  }

  /** The target of `ref`; 404 unknown_node_type when it is neither loaded code nor a published plan. */
  async resolve(ref: NodeTypeRef): Promise<CompositeTarget> {
    const key = `${ref.node_type_id}@${ref.version}`;
    const code = this.code.get(key);
    if (code) return code;
    let p = this.plans.get(key);
    if (!p) {
      p = this.fromRegistry(ref);
      this.plans.set(key, p);
      // Failures are not cached: the plan may be published a moment later, or the registry come back.
      p.catch(() => this.plans.delete(key));
      if (this.plans.size > MAX_CACHED_PLANS) this.plans.delete(this.plans.keys().next().value as string);
    }
    return p;
  }

  private unknown(ref: NodeTypeRef, why: string): FabricError {
    const versions = (this.handlers.byId.get(ref.node_type_id) ?? []).filter((d) => isCompositeDefinition(d.definition)).map((d) => d.definition.nodeType.version);
    const details: Record<string, unknown> = { node_type_id: ref.node_type_id, version: ref.version };
    if (versions.length > 0) details.available_versions = versions;
    return new FabricError("unknown_node_type", `this executor does not serve ${ref.node_type_id}@${ref.version}: ${why}`, { details });
  }

  private async fromRegistry(ref: NodeTypeRef): Promise<CompositeTarget> {
    if (!this.registry) throw this.unknown(ref, "no composite code of that node type is loaded, and no registry is configured to look for a plan");
    let nodeType: NodeType;
    try {
      nodeType = await this.registry.get(ref.node_type_id, ref.version);
    } catch (err) {
      if (FabricError.is(err) && err.statusCode === 404) throw this.unknown(ref, "no composite code of that node type is loaded, and the registry does not know it");
      throw err;
    }
    const plan = planOf(nodeType);
    if (nodeType.kind !== "composite" || plan === undefined) {
      throw this.unknown(ref, `no composite code of that node type is loaded, and its NodeType carries no extensions["nodefabric.plan"]`);
    }
    let validateInputs: ValidateFunction;
    try {
      validateInputs = compileHandlerSchema(createHandlerAjv(), nodeType.input_schema as Record<string, unknown> | undefined);
    } catch {
      // The registry refuses schemas that do not compile; one that slipped through accepts what the plan accepts.
      validateInputs = compileHandlerSchema(createHandlerAjv(), undefined);
    }
    return { nodeType, validateInputs, source: "plan", run: (inputs, ctx) => runPlan(plan, inputs, ctx) };
  }
}
