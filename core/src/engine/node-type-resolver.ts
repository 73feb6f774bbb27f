/**
 * Where the coordinator learns what a node type is and which executor serves it: the registry, behind caches.
 * A published (id, version) never changes, so NodeTypes are cached for good; the executor directory briefly.
 */
import type { NodeType, NodeTypeRef } from "@nodefabric/schemas";
import type { RegistryClient } from "../clients/registry-client.js";
import { clock } from "../clock.js";

export interface NodeTypeResolver {
  /** The NodeType named by a ref; throws the registry's FabricError (e.g. node_type_not_found). */
  nodeType(ref: NodeTypeRef): Promise<NodeType>;
  /** Base URL of an executor of `kind` that serves the ref, or undefined when none is registered. */
  executorFor(ref: NodeTypeRef, kind: "atomic" | "composite"): Promise<{ executor_instance_id: string; endpoint: string } | undefined>;
  /** Tells the resolver an executor could not be reached, so others are preferred for a while. */
  markUnreachable?(endpoint: string): void;
}

/** How long an executor that could not be reached is passed over while others serve the same node type. */
export const UNREACHABLE_MS = 30_000;

const DIRECTORY_TTL_MS = 2_000;
const MAX_CACHED = 10_000;

/** Resolves through a Node Registry, with caches; falls back to fixed executor URLs when the directory has none. */
export class RegistryResolver implements NodeTypeResolver {
  private readonly types = new Map<string, Promise<NodeType>>();
  private readonly directory = new Map<string, { at: number; value: Promise<Array<{ executor_instance_id: string; endpoint: string; kind: string }>> }>();
  private rr = 0;
  private readonly unreachable = new Map<string, number>();

  constructor(
    private readonly registry: RegistryClient,
    private readonly fallback: Partial<Record<"atomic" | "composite", string>> = {},
  ) {}

  nodeType(ref: NodeTypeRef): Promise<NodeType> {
    const key = `${ref.node_type_id}@${ref.version}`;
    let p = this.types.get(key);
    if (!p) {
      p = this.registry.get(ref.node_type_id, ref.version);
      this.types.set(key, p);
      // Failures are not cached: the type may be published a moment later.
      p.catch(() => this.types.delete(key));
      if (this.types.size > MAX_CACHED) this.types.delete(this.types.keys().next().value as string);
    }
    return p;
  }

  async executorFor(ref: NodeTypeRef, kind: "atomic" | "composite") {
    const key = `${ref.node_type_id}@${ref.version}`;
    const now = clock.now();
    let entry = this.directory.get(key);
    if (!entry || now - entry.at > DIRECTORY_TTL_MS) {
      const value = this.registry.listExecutors({ node_type_id: ref.node_type_id, version: ref.version });
      entry = { at: now, value };
      this.directory.set(key, entry);
      value.catch(() => this.directory.delete(key));
    }
    let candidates: Array<{ executor_instance_id: string; endpoint: string; kind: string }> = [];
    try {
      candidates = (await entry.value).filter((e) => e.kind === kind);
    } catch {
      candidates = [];
    }
    if (candidates.length > 0) {
      // A directory entry may outlive its executor (it restarted elsewhere): pass over endpoints that just failed.
      const reachable = candidates.filter((c) => (this.unreachable.get(c.endpoint) ?? 0) <= now);
      if (reachable.length > 0) candidates = reachable;
      const pick = candidates[this.rr++ % candidates.length];
      return { executor_instance_id: pick.executor_instance_id, endpoint: pick.endpoint };
    }
    const url = this.fallback[kind];
    return url ? { executor_instance_id: `${kind}-executor`, endpoint: url } : undefined;
  }

  markUnreachable(endpoint: string): void {
    this.unreachable.set(endpoint, clock.now() + UNREACHABLE_MS);
  }
}
