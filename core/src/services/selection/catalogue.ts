/**
 * Selection's view of the registry: the latest version of every node type, indexed for ranking and
 * refreshed at most once per TTL. Concurrent requests share one refresh, and an unchanged catalogue
 * keeps its index instead of rebuilding it.
 */
import type { NodeType } from "@nodefabric/schemas";
import { clock } from "../../clock.js";
import { FabricError } from "../../http/errors.js";
import { latestOf } from "../../store/node-type-version-order.js";
import { NodeTypeIndex } from "./ranking.js";

/** Where node types come from: the registry over HTTP, or an in-process source. */
export type NodeTypeSource = () => Promise<NodeType[]>;

export interface RefreshStatus {
  ok: boolean;
  /** Epoch ms of the last attempt. */
  at?: number;
  message?: string;
  nodeTypes?: number;
}

/**
 * Keeps the latest version of each id, by the registry's rule (node-type-version-order.ts): semver versions by semver,
 * any other version just above the semver versions published before it. `all` is the registry's listing (each id's
 * versions in version order) or an in-process source listing versions in publication order; either way the rule picks
 * the same one.
 */
export function latestVersions(all: NodeType[]): NodeType[] {
  const byId = new Map<string, NodeType[]>();
  for (const t of all) {
    const list = byId.get(t.node_type_id);
    if (list) list.push(t);
    else byId.set(t.node_type_id, [t]);
  }
  return [...byId.values()].map((versions) => latestOf(versions, (t) => t.version)!);
}

// Whatever the source throws, Selection's client sees its registry as unavailable (502) or slow (504):
// a registry 4xx or 500 is not the caller's mistake.
function asUpstreamError(err: unknown): FabricError {
  if (FabricError.is(err) && (err.code === "upstream_unavailable" || err.code === "upstream_timeout")) return err;
  const message = FabricError.is(err) ? `${err.code}: ${err.message}` : (err as Error)?.message ?? String(err);
  return new FabricError("upstream_unavailable", `the node registry cannot be read (${message})`, { retryable: true, cause: err });
}

/** The cached, indexed catalogue. */
export class Catalogue {
  private index?: NodeTypeIndex;
  private loadedAt = 0;
  private inflight?: Promise<NodeTypeIndex>;
  private status: RefreshStatus = { ok: true, message: "not loaded yet" };

  constructor(
    private readonly source: NodeTypeSource,
    private readonly ttlMs: number,
  ) {}

  /** The outcome of the last refresh, for the health check. */
  lastRefresh(): RefreshStatus {
    return { ...this.status };
  }

  /** The index, refreshed first when older than the TTL; a failed refresh then throws 502/504. */
  async current(): Promise<NodeTypeIndex> {
    if (this.index && clock.now() - this.loadedAt < this.ttlMs) return this.index;
    return this.refresh();
  }

  /**
   * After a miss (nothing qualified, or an allowed id is unknown), refreshes early when the index is
   * older than `minAgeMs`; a failure keeps the index that was still valid.
   */
  async afterMiss(minAgeMs: number): Promise<NodeTypeIndex | undefined> {
    if (this.index && clock.now() - this.loadedAt < minAgeMs) return undefined;
    const before = this.index;
    try {
      const after = await this.refresh();
      return after === before ? undefined : after;
    } catch {
      return undefined;
    }
  }

  private refresh(): Promise<NodeTypeIndex> {
    this.inflight ??= this.load().finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  private async load(): Promise<NodeTypeIndex> {
    const at = clock.now();
    let all: NodeType[];
    try {
      all = await this.source();
    } catch (err) {
      const e = asUpstreamError(err);
      this.status = { ok: false, at, message: e.message };
      throw e;
    }
    const latest = latestVersions(all);
    if (!this.index || this.index.fingerprint !== NodeTypeIndex.fingerprintOf(latest)) this.index = new NodeTypeIndex(latest);
    this.loadedAt = at;
    this.status = { ok: true, at, nodeTypes: this.index.size };
    return this.index;
  }
}
