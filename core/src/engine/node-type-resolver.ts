/**
 * Where the coordinator learns what a node type is and which executor serves it: the registry, behind caches.
 * A published (id, version) never changes, so NodeTypes are cached for good; the executor directory briefly: the
 * registry lists only executors that sent a heartbeat within its TTL (10 s by default), and a cache well below that
 * keeps a dead executor from being chosen for more than a few seconds. NodeRuns of a node type several executors
 * serve are spread over them in turn, passing over ones that just could not be reached.
 */
import type { NodeType, NodeTypeRef } from "@nodefabric/schemas";
import type { DirectoryEntry, NodeTypeDirectory } from "../engine-ports.js";
import { clock } from "../clock.js";
import { trackCache } from "../observe/caches.js";

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

/** How long a directory lookup is reused: short against the registry's executor TTL (10 s by default). */
export const DIRECTORY_TTL_MS = 2_000;
const MAX_CACHED = 10_000;

/** Resolves through a Node Registry, with caches; falls back to fixed executor URLs when the directory has none. */
export class RegistryResolver implements NodeTypeResolver {
  private readonly types = new Map<string, Promise<NodeType>>();
  private readonly directory = new Map<string, { at: number; value: Promise<DirectoryEntry[]> }>();
  /** The next turn per node type and kind, so each one's NodeRuns go round its own executors. */
  private readonly turns = new Map<string, number>();
  private readonly unreachable = new Map<string, number>();

  constructor(
    private readonly registry: NodeTypeDirectory,
    private readonly fallback: Partial<Record<"atomic" | "composite", string>> = {},
  ) {
    trackCache("engine.node_types", this, (r) => ({ entries: r.types.size + r.directory.size + r.turns.size + r.unreachable.size }), { max_entries: 4 * MAX_CACHED });
  }

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
      this.directory.delete(key);
      this.directory.set(key, entry);
      value.catch(() => this.directory.delete(key));
      if (this.directory.size > MAX_CACHED) this.directory.delete(this.directory.keys().next().value as string);
    }
    let candidates: DirectoryEntry[] = [];
    try {
      candidates = (await entry.value).filter((e) => e.kind === kind);
    } catch {
      candidates = [];
    }
    if (candidates.length > 0) {
      // A directory entry may outlive its executor (it restarted elsewhere): pass over endpoints that just failed.
      const reachable = candidates.filter((c) => (this.unreachable.get(c.endpoint) ?? 0) <= now);
      if (reachable.length > 0) candidates = reachable;
      const turnKey = `${kind}\u0000${key}`;
      // A random first turn, so coordinators started together do not all begin with the same executor.
      const turn = this.turns.get(turnKey) ?? Math.floor(Math.random() * candidates.length);
      this.turns.delete(turnKey);
      this.turns.set(turnKey, (turn + 1) % 1_000_000);
      if (this.turns.size > MAX_CACHED) this.turns.delete(this.turns.keys().next().value as string);
      const pick = candidates[turn % candidates.length]!;
      return { executor_instance_id: pick.executor_instance_id, endpoint: pick.endpoint };
    }
    const url = this.fallback[kind];
    return url ? { executor_instance_id: `${kind}-executor`, endpoint: url } : undefined;
  }

  markUnreachable(endpoint: string): void {
    const now = clock.now();
    if (this.unreachable.size >= MAX_CACHED) for (const [e, until] of this.unreachable) if (until <= now) this.unreachable.delete(e);
    this.unreachable.set(endpoint, now + UNREACHABLE_MS);
  }
}
