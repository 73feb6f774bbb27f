/**
 * A face's list of node types (MCP's tools/list, A2A's skills) asks the PDP, as the coordinator will when the run starts, whether this caller may start a run of each
 * node type (`run.start`, with the caller as the run's principal), and leaves out the ones it denies. One that
 * needs an approval stays listed: it can run once someone approves.
 *
 * Listing is not where access is enforced (every run is decided by the PDP again, and an unreachable PDP denies it
 * there), so a PDP that cannot be asked leaves the list as it is rather than empty. Decisions are kept per caller and
 * node type version for `ttlMs`.
 */
import type { NodeType } from "@nodefabric/schemas";
import type { CallerInfo } from "./caller-info.js";
import { trackCache } from "../observe/caches.js";

export interface PolicyFilterOptions {
  pdpUrl: () => string;
  token: () => Promise<string | undefined>;
  ttlMs: number;
  /** Decisions asked at once. */
  concurrency?: number;
  /** The name its cache is reported under (docs/memory.md); "mcp.policy_decisions" unless given. */
  cacheName?: string;
}

export class PolicyFilter {
  private readonly cache = new Map<string, { at: number; allowed: boolean }>();
  private unreachableUntil = 0;

  constructor(private readonly o: PolicyFilterOptions) {
    trackCache(o.cacheName ?? "mcp.policy_decisions", this, (f) => ({ entries: f.cache.size }), { max_entries: 100_000 });
  }

  async filter(caller: CallerInfo, types: readonly NodeType[]): Promise<NodeType[]> {
    if (Date.now() < this.unreachableUntil) return [...types];
    const now = Date.now();
    const keep = new Array<boolean>(types.length).fill(true);
    const todo: number[] = [];
    types.forEach((t, i) => {
      const hit = this.cache.get(this.key(caller, t));
      if (hit && now - hit.at < this.o.ttlMs) keep[i] = hit.allowed;
      else todo.push(i);
    });
    if (todo.length > 0) {
      const token = await this.o.token();
      let next = 0;
      let failed = false;
      const worker = async () => {
        while (!failed && next < todo.length) {
          const i = todo[next++]!;
          const allowed = await this.decide(caller, types[i]!, token);
          if (allowed === undefined) {
            failed = true;
            return;
          }
          keep[i] = allowed;
          this.cache.set(this.key(caller, types[i]!), { at: Date.now(), allowed });
        }
      };
      await Promise.all(Array.from({ length: Math.min(this.o.concurrency ?? 16, todo.length) }, worker));
      if (failed) {
        // Asked again in a while; meanwhile the list is not filtered (each run is still decided).
        this.unreachableUntil = Date.now() + 5_000;
        return [...types];
      }
    }
    if (this.cache.size > 100_000) this.cache.clear();
    return types.filter((_, i) => keep[i]);
  }

  private key(caller: CallerInfo, t: NodeType): string {
    return `${caller.digest}\n${t.node_type_id}@${t.version}`;
  }

  /** Whether the PDP lets this caller start a run of `t`; undefined when it could not be asked. */
  private async decide(caller: CallerInfo, t: NodeType, token: string | undefined): Promise<boolean | undefined> {
    const p = caller.principal;
    const runContext: Record<string, unknown> = {};
    if (p?.tenant_id !== undefined) runContext.tenant_id = p.tenant_id;
    if (p?.sub !== undefined) {
      runContext.actor = { type: "user", id: p.sub };
      runContext.identity = { sub: p.sub, ...(p.iss ? { iss: p.iss } : {}), ...(p.tenant_id ? { tenant_id: p.tenant_id } : {}) };
    }
    try {
      const res = await fetch(`${this.o.pdpUrl()}/v1/policy:decide`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ action: "run.start", node_type_ref: { node_type_id: t.node_type_id, version: t.version }, run_context: runContext }),
        signal: AbortSignal.timeout(5_000),
      });
      if (!res.ok) return undefined;
      const d = (await res.json()) as { decision?: string };
      return d.decision !== "deny";
    } catch {
      return undefined;
    }
  }
}
