/**
 * A search of a face's catalogue (MCP's search mode, A2A's `fabric.search` skill): Selection ranks the fabric's node
 * types for a goal (POST /v1/candidate-sets, the fabric's own ranking), and the answer keeps those the face exposes
 * (its Catalogue's include and exclude patterns) and, when given, those the caller may start (its PolicyFilter).
 */
import type { CandidateSet, NodeType } from "@nodefabric/schemas";
import type { Catalogue } from "./catalogue.js";

/** Most node types one search answers. */
export const MAX_SEARCH_RESULTS = 50;

export interface CatalogueSearch {
  selectionUrl: string;
  /** A token Selection accepts (the face's own service token). */
  token?: string;
  catalogue: Catalogue;
  goal: string;
  limit: number;
  /** The subtask id Selection is asked under (names the face in its logs). */
  subtaskId: string;
  /** Narrows the found node types (a PolicyFilter's filter for the caller); none: all are kept. */
  keep?: (types: NodeType[]) => Promise<NodeType[]>;
}

export type CatalogueSearchAnswer = { ok: true; found: { nodeType: NodeType; score?: number }[] } | { ok: false; status: number };

export async function searchCatalogue(s: CatalogueSearch): Promise<CatalogueSearchAnswer> {
  // Selection ranks the whole catalogue; asking for more than the limit leaves room for what the include and exclude
  // patterns (and the policy) hide.
  const res = await fetch(`${s.selectionUrl}/v1/candidate-sets`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(s.token ? { authorization: `Bearer ${s.token}` } : {}) },
    body: JSON.stringify({ subtask_spec: { subtask_id: s.subtaskId, goal: s.goal }, constraints: { candidates: { max_candidates_per_subtask: MAX_SEARCH_RESULTS } } }),
    signal: AbortSignal.timeout(10_000),
  });
  if (!res.ok) return { ok: false, status: res.status };
  const set = (await res.json()) as CandidateSet;
  const found: { nodeType: NodeType; score?: number }[] = [];
  for (const c of set.candidates) {
    if (!s.keep && found.length >= s.limit) break;
    const t = await s.catalogue.get(c.node_type_ref.node_type_id);
    if (!t || found.some((f) => f.nodeType.node_type_id === t.node_type_id)) continue;
    found.push({ nodeType: t, ...(c.score !== undefined ? { score: c.score } : {}) });
  }
  if (!s.keep) return { ok: true, found };
  const allowed = new Set((await s.keep(found.map((f) => f.nodeType))).map((t) => t.node_type_id));
  return { ok: true, found: found.filter((f) => allowed.has(f.nodeType.node_type_id)).slice(0, s.limit) };
}
