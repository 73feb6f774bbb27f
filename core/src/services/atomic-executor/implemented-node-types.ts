/**
 * Node types an atomic executor serves with no code of their own. A NodeType published in the registry whose
 * `extensions["nodefabric.implementation"]` names a loaded definition made with `defineAtomic({ template: true })`
 * runs that definition's handler under the published NodeType: its schemas validate, its timeout applies, and the
 * handler reads its configuration from `ctx.nodeType.extensions`. This is how an operator publishes, say, an
 * HTTP-backed node type at run time with no deploy.
 */
import type { NodeType, NodeTypeRef } from "@nodefabric/schemas";
import { RegistryClient } from "../../clients/registry-client.js";
import { bearerHeaders, type ServiceTokens } from "../../clients/service-tokens.js";
import { FabricError } from "../../http/errors.js";
import { clock } from "../../clock.js";
import type { AtomicDefinition } from "@nodefabric/sdk";
import type { LoadedDefinition, LoadedHandlers } from "./handler-loader.js";
import { compileHandlerSchema, createHandlerAjv } from "@nodefabric/sdk/runtime";

export { IMPLEMENTATION_EXTENSION, implementationOf } from "../../node-type-implementation.js";
import { implementationOf } from "../../node-type-implementation.js";

/** How long a node type that turned out not to be servable here is remembered, so bad requests do not each ask the registry. */
export const MISS_TTL_MS = 30_000;

const MAX_CACHED = 1000;


/** What one registry lookup found: a definition to run, nothing (the usual 404), or a reason this executor cannot run it. */
type Lookup = { kind: "found"; loaded: LoadedDefinition } | { kind: "missing" } | { kind: "refused"; message: string; details: Record<string, unknown> };

interface CacheEntry {
  lookup: Promise<Lookup>;
  expiresAt: number;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** Finds, through the registry, the template definition that executes a node type this executor holds no code for. */
export class ImplementedNodeTypes {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly registry: RegistryClient;

  constructor(
    private readonly handlers: LoadedHandlers,
    registryUrl: string,
    tokens?: ServiceTokens,
  ) {
    this.registry = new RegistryClient(registryUrl, { connections: 4, headersTimeoutMs: 10_000, headers: bearerHeaders(tokens, "node-registry") });
  }

  /**
   * The definition that executes `ref`: a template's handler under the published NodeType. Undefined when the registry
   * does not know `ref` or it names no implementation; throws 404 unknown_node_type, with the reason, when it names one
   * this executor cannot run, and 503 unavailable when the registry cannot be asked.
   */
  async find(ref: NodeTypeRef): Promise<LoadedDefinition | undefined> {
    const key = `${ref.node_type_id}@${ref.version}`;
    let entry = this.cache.get(key);
    if (entry && entry.expiresAt <= clock.now()) {
      this.cache.delete(key);
      entry = undefined;
    }
    if (!entry) {
      // A published (id, version) never changes, so what was found is kept for good; concurrent requests share one lookup.
      const created: CacheEntry = { lookup: this.lookUp(ref), expiresAt: Number.POSITIVE_INFINITY };
      this.cache.set(key, created);
      created.lookup.then(
        (found) => {
          if (found.kind !== "found") created.expiresAt = clock.now() + MISS_TTL_MS;
        },
        // A registry that could not be asked is asked again next time.
        () => {
          if (this.cache.get(key) === created) this.cache.delete(key);
        },
      );
      if (this.cache.size > MAX_CACHED) this.cache.delete(this.cache.keys().next().value as string);
      entry = created;
    }
    const found = await entry.lookup;
    if (found.kind === "found") return found.loaded;
    if (found.kind === "refused") throw new FabricError("unknown_node_type", found.message, { details: found.details });
    return undefined;
  }

  /** Closes the registry client. */
  close(): Promise<void> {
    return this.registry.close();
  }

  private async lookUp(ref: NodeTypeRef): Promise<Lookup> {
    const name = `${ref.node_type_id}@${ref.version}`;
    let nodeType: NodeType;
    try {
      nodeType = await this.registry.get(ref.node_type_id, ref.version);
    } catch (err) {
      if (FabricError.is(err) && err.statusCode === 404) return { kind: "missing" };
      throw new FabricError("unavailable", `this executor does not hold ${name} and cannot ask the node registry whether another node type implements it: ${(err as Error).message}`, {
        retryable: true,
        headers: { "retry-after": "1" },
        details: { node_type_id: ref.node_type_id, version: ref.version },
      });
    }
    const implementation = implementationOf(nodeType);
    if (nodeType.version !== ref.version || !implementation) return { kind: "missing" };

    const details = { node_type_id: ref.node_type_id, version: ref.version, implementation };
    const implName = `${implementation.node_type_id}@${implementation.version}`;
    const template = this.handlers.find(implementation.node_type_id, implementation.version);
    if (!template || template.definition.kind !== "atomic") {
      return { kind: "refused", details, message: `this executor does not serve ${name}: it is implemented by ${implName}, which this executor does not hold` };
    }
    if ((template.definition as AtomicDefinition).template !== true) {
      return {
        kind: "refused",
        details,
        message: `this executor does not serve ${name}: it is implemented by ${implName}, which does not implement other node types (its definition is not a template)`,
      };
    }
    if (nodeType.kind !== "atomic") {
      return { kind: "refused", details, message: `this executor does not serve ${name}: it is a ${nodeType.kind} node type, and ${implName} implements atomic ones` };
    }
    const ajv = createHandlerAjv();
    const validators: Partial<Record<"input_schema" | "output_schema", LoadedDefinition["validateInputs"]>> = {};
    for (const which of ["input_schema", "output_schema"] as const) {
      try {
        validators[which] = compileHandlerSchema(ajv, nodeType[which] as Record<string, unknown> | undefined);
      } catch (err) {
        return { kind: "refused", details, message: `this executor does not serve ${name}: its ${which} does not compile: ${(err as Error).message}` };
      }
    }
    // Handlers see it as ctx.nodeType, and every execution shares this one cached object.
    deepFreeze(nodeType);
    const base = template.definition as AtomicDefinition;
    const definition: AtomicDefinition = Object.freeze({ kind: "atomic", sdkVersion: base.sdkVersion, nodeType: nodeType as AtomicDefinition["nodeType"], handler: base.handler });
    return {
      kind: "found",
      loaded: { definition, source: template.source, validateInputs: validators.input_schema!, validateOutputs: validators.output_schema! },
    };
  }
}
