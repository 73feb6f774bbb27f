/**
 * The tools: the node types of the Node Registry, read with the gateway's own service token (the caller's token is
 * meant for the gateway alone and is never passed on), latest version of each id unless a version is pinned, and
 * narrowed by the include and exclude patterns. Read at most once per `refreshMs`; a change of the set is reported so
 * list_changed can be sent.
 */
import type { NodeType } from "@nodefabric/schemas";

export interface CatalogueOptions {
  registryUrl: () => string;
  token: () => Promise<string | undefined>;
  /** Glob patterns (`*` any run of characters) of node_type_ids to expose; none: all. */
  include: readonly string[];
  /** Glob patterns of node_type_ids never exposed (wins over include). */
  exclude: readonly string[];
  /** Versions to expose instead of the latest, by node_type_id. */
  versions: Readonly<Record<string, string>>;
  /** How long one read of the registry is reused (ms). */
  refreshMs: number;
  /** Called when a read finds the set of (id, version) changed since the previous read. */
  onChange?: () => void;
}

const PAGE = 1000;

export function globToRegExp(glob: string): RegExp {
  const esc = glob.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*");
  return new RegExp(`^${esc}$`);
}

export class Catalogue {
  private cached: { at: number; types: NodeType[]; byId: Map<string, NodeType> } | undefined;
  private loading: Promise<NodeType[]> | undefined;
  private fingerprint: string | undefined;
  private readonly include: RegExp[];
  private readonly exclude: RegExp[];

  constructor(private readonly o: CatalogueOptions) {
    this.include = o.include.map(globToRegExp);
    this.exclude = o.exclude.map(globToRegExp);
  }

  exposes(id: string): boolean {
    if (this.exclude.some((r) => r.test(id))) return false;
    return this.include.length === 0 || this.include.some((r) => r.test(id));
  }

  /** The exposed node types, ordered by node_type_id. */
  async list(): Promise<NodeType[]> {
    const c = this.cached;
    if (c && Date.now() - c.at < this.o.refreshMs) return c.types;
    this.loading ??= this.load().finally(() => (this.loading = undefined));
    return this.loading;
  }

  async get(id: string): Promise<NodeType | undefined> {
    await this.list();
    return this.cached?.byId.get(id);
  }

  /** Forgets the cached read, so the next list reads the registry. */
  invalidate(): void {
    this.cached = undefined;
  }

  private async load(): Promise<NodeType[]> {
    const token = await this.o.token();
    const headers: Record<string, string> = { accept: "application/json" };
    if (token) headers.authorization = `Bearer ${token}`;
    const chosen = new Map<string, NodeType>();
    let pageToken: string | undefined;
    for (let i = 0; i < 10_000; i++) {
      const url = `${this.o.registryUrl()}/v1/node-types?limit=${PAGE}${pageToken ? `&page_token=${encodeURIComponent(pageToken)}` : ""}`;
      const res = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) });
      if (!res.ok) throw new Error(`the node registry answered ${res.status} to ${url}`);
      const page = (await res.json()) as NodeType[];
      for (const t of page) {
        if (!this.exposes(t.node_type_id)) continue;
        const pinned = this.o.versions[t.node_type_id];
        if (pinned !== undefined) {
          if (t.version === pinned) chosen.set(t.node_type_id, t);
          continue;
        }
        // Versions come lowest first within an id, so the last one seen is the latest.
        chosen.set(t.node_type_id, t);
      }
      pageToken = res.headers.get("x-next-page-token") ?? undefined;
      if (!pageToken) break;
    }
    const types = [...chosen.values()].sort((a, b) => (a.node_type_id < b.node_type_id ? -1 : a.node_type_id > b.node_type_id ? 1 : 0));
    this.cached = { at: Date.now(), types, byId: chosen };
    const fp = types.map((t) => `${t.node_type_id}@${t.version}`).join("\n");
    const before = this.fingerprint;
    this.fingerprint = fp;
    if (before !== undefined && before !== fp) this.o.onChange?.();
    return types;
  }
}
