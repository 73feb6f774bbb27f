/**
 * The registry's catalogue as the console pages need it: every version of every node type, grouped by id, and
 * whether an executor serves each. It may be long, so one read is shared by the pages that show it for a little while.
 */
import { useEffect, useState } from "preact/hooks";
import { listExecutors, listNodeTypes, type Executor, type NodeType } from "../api";
import { servedBy, type Served } from "../serving";

export interface NodeTypeGroup {
  id: string;
  /** In the registry's version order: the last is the latest. */
  versions: NodeType[];
  latest: NodeType;
  /** Lower-case text the search looks in: id, title, description, labels and annotations of every version. */
  haystack: string;
}

export interface Catalogue {
  groups: NodeTypeGroup[];
  executors: Executor[] | undefined;
  served(nodeType: NodeType): Served;
}

/** Pages of the registry's list read at most; 1,000 node types each. */
const MAX_PAGES = 50;

/** How long a read catalogue is reused by the next page that asks: node types published meanwhile show after that. */
const FRESH_MS = 30_000;

let cached: { at: number; catalogue: Promise<Catalogue> } | undefined;

async function readAll(): Promise<NodeType[]> {
  const all: NodeType[] = [];
  let token: string | undefined;
  for (let i = 0; i < MAX_PAGES; i++) {
    const page = await listNodeTypes({ limit: 1000, page_token: token });
    all.push(...page.nodeTypes);
    token = page.nextPageToken;
    if (!token) break;
  }
  return all;
}

function textOf(nt: NodeType): string {
  const meta = nt.metadata ?? {};
  const labels = Object.entries(meta.labels ?? {}).map(([k, v]) => `${k} ${v}`);
  const annotations = Object.values(meta.annotations ?? {});
  return [nt.node_type_id, nt.description ?? "", (nt.input_schema as { title?: string } | undefined)?.title ?? "", ...labels, ...annotations].join(" ");
}

async function load(): Promise<Catalogue> {
  const [types, executors] = await Promise.all([readAll(), listExecutors().catch(() => undefined)]);
  const byId = new Map<string, NodeType[]>();
  for (const nt of types) {
    const list = byId.get(nt.node_type_id);
    if (list) list.push(nt);
    else byId.set(nt.node_type_id, [nt]);
  }
  const groups: NodeTypeGroup[] = [...byId].map(([id, versions]) => ({
    id,
    versions,
    latest: versions[versions.length - 1]!,
    haystack: [...new Set(versions.map(textOf))].join(" ").toLowerCase(),
  }));
  return { groups, executors, served: servedBy(executors) };
}

/** The catalogue, read again when the last read is older than FRESH_MS or `reload` is asked. */
export function catalogue(reload = false): Promise<Catalogue> {
  if (reload || !cached || Date.now() - cached.at > FRESH_MS) {
    const read = { at: Date.now(), catalogue: load() };
    cached = read;
    // A failed read is not kept: the next page visit tries again.
    read.catalogue.catch(() => {
      if (cached === read) cached = undefined;
    });
  }
  return cached.catalogue;
}

export function useCatalogue(): { catalogue?: Catalogue; error?: unknown } {
  const [state, setState] = useState<{ catalogue?: Catalogue; error?: unknown }>({});
  useEffect(() => {
    let live = true;
    catalogue().then(
      (c) => live && setState({ catalogue: c }),
      (error: unknown) => live && setState({ error }),
    );
    return () => {
      live = false;
    };
  }, []);
  return state;
}

/** Every node type id, for pickers. */
export function useNodeTypeIds(): string[] {
  const { catalogue: c } = useCatalogue();
  return c ? c.groups.map((g) => g.id) : [];
}
