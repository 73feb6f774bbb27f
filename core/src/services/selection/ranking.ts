/**
 * BM25 ranking of node types against a subtask's goal, with minisearch. Each node type's latest
 * version is one document; its id, description, labels and schema property names are the fields.
 */
import MiniSearch from "minisearch";
import type { Candidate, NodeType } from "@nodefabric/schemas";
import { withinSideEffectCap, type SideEffectClass } from "../../engine/constraints.js";

/** The indexed fields, named as a rationale reports them. */
export const RANKED_FIELDS = ["node_type_id", "description", "labels", "input_schema", "output_schema"] as const;
type RankedField = (typeof RANKED_FIELDS)[number];

// The id is the most deliberate name a node type has; labels are curated; schema fields are incidental.
const FIELD_BOOST: Record<RankedField, number> = {
  node_type_id: 3,
  labels: 2,
  description: 1.5,
  input_schema: 1,
  output_schema: 1,
};

// Words that carry no meaning in a goal, and would otherwise match "check_in" or "for_date" fields.
const STOP_WORDS = new Set([
  "a", "an", "the", "and", "or", "of", "to", "in", "on", "for", "with", "by", "at", "from", "into", "onto",
  "is", "are", "be", "it", "its", "this", "that", "these", "those", "as", "me", "my", "i", "we", "our", "us",
  "you", "your", "please", "some", "any", "then", "than", "so", "do", "does", "another", "other",
]);

/** Splits text into words at anything not a letter or digit and at camelCase boundaries. */
export function splitWords(text: string): string[] {
  return text
    .replace(/([\p{Ll}\p{N}])(\p{Lu})/gu, "$1 $2")
    .replace(/(\p{Lu})(\p{Lu}\p{Ll})/gu, "$1 $2")
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w.length > 0);
}

// A deliberately light English stemmer: enough that "booking", "bookings" and "booked" meet "book".
function stem(word: string): string {
  let w = word;
  if (w.length > 4 && w.endsWith("ies")) w = `${w.slice(0, -3)}y`;
  else if (w.length > 3 && w.endsWith("s") && !/(ss|us|is)$/.test(w)) w = w.slice(0, -1);
  for (const suffix of ["ing", "ed"]) {
    if (w.endsWith(suffix) && w.length - suffix.length >= 3) {
      w = w.slice(0, -suffix.length);
      // "shipping" → "shipp" → "ship"
      if (/([b-df-hj-np-rtv-z])\1$/.test(w) && !/(ll|ss|zz)$/.test(w)) w = w.slice(0, -1);
      break;
    }
  }
  return w;
}

/** The index terms of one word: the lowercase word and, when different, its stem; none for stop words. */
export function termsOf(word: string): string[] {
  const lower = word.toLowerCase();
  if (STOP_WORDS.has(lower)) return [];
  const s = stem(lower);
  return s === lower ? [lower] : [lower, s];
}

/** The distinct search terms of a goal, in order of first appearance. */
export function goalTerms(goal: string): string[] {
  return [...new Set(splitWords(goal).flatMap(termsOf))];
}

const MAX_SCHEMA_DEPTH = 4;
const MAX_FIELD_TEXT = 4000;

/** Property names (and their descriptions) anywhere in a JSON Schema, nested objects and arrays included. */
function schemaText(schema: unknown, depth = 0, out: string[] = []): string[] {
  if (depth > MAX_SCHEMA_DEPTH || schema === null || typeof schema !== "object" || Array.isArray(schema)) return out;
  const s = schema as Record<string, unknown>;
  const props = s.properties;
  if (props && typeof props === "object" && !Array.isArray(props)) {
    for (const [name, sub] of Object.entries(props as Record<string, unknown>)) {
      out.push(name);
      const d = (sub as Record<string, unknown> | null)?.description;
      if (typeof d === "string") out.push(d);
      schemaText(sub, depth + 1, out);
    }
  }
  for (const key of ["items", "additionalProperties"]) schemaText(s[key], depth + 1, out);
  for (const key of ["anyOf", "oneOf", "allOf"]) {
    const list = s[key];
    if (Array.isArray(list)) for (const sub of list) schemaText(sub, depth + 1, out);
  }
  return out;
}

function labelsText(nodeType: NodeType): string {
  const labels = nodeType.metadata?.labels ?? {};
  return Object.entries(labels)
    .map(([k, v]) => `${k} ${v}`)
    .join(" ");
}

type Doc = { id: string } & Record<RankedField, string>;

function toDoc(nodeType: NodeType): Doc {
  return {
    id: nodeType.node_type_id,
    node_type_id: nodeType.node_type_id,
    description: (nodeType.description ?? "").slice(0, MAX_FIELD_TEXT),
    labels: labelsText(nodeType).slice(0, MAX_FIELD_TEXT),
    input_schema: schemaText(nodeType.input_schema).join(" ").slice(0, MAX_FIELD_TEXT),
    output_schema: schemaText(nodeType.output_schema).join(" ").slice(0, MAX_FIELD_TEXT),
  };
}

/** Which node types a subtask may use; everything here is a hard filter, applied before ranking. */
export interface CandidateFilter {
  kind?: "atomic" | "composite";
  /** Absent: any id; present (even empty): only these. */
  allowed?: ReadonlySet<string>;
  denied: ReadonlySet<string>;
  /** The strongest side effect allowed; a node type declaring none counts as "write". */
  sideEffectCap?: SideEffectClass;
}

/** A searchable snapshot of the latest version of every node type. */
export class NodeTypeIndex {
  private readonly search: MiniSearch<Doc>;
  private readonly byId: Map<string, NodeType>;
  /** Identifies the snapshot: the sorted id@version list (versions are immutable). */
  readonly fingerprint: string;

  constructor(latest: NodeType[]) {
    this.byId = new Map(latest.map((t) => [t.node_type_id, t]));
    this.fingerprint = NodeTypeIndex.fingerprintOf(latest);
    this.search = new MiniSearch<Doc>({
      fields: [...RANKED_FIELDS],
      tokenize: (text) => splitWords(text),
      processTerm: (term) => termsOf(term),
    });
    this.search.addAll([...this.byId.values()].map(toDoc));
  }

  /** The fingerprint an index over `latest` would have. */
  static fingerprintOf(latest: NodeType[]): string {
    return latest
      .map((t) => `${t.node_type_id}@${t.version}`)
      .sort()
      .join("\n");
  }

  get size(): number {
    return this.byId.size;
  }

  has(nodeTypeId: string): boolean {
    return this.byId.has(nodeTypeId);
  }

  private admits(t: NodeType, filter: CandidateFilter): boolean {
    if (filter.kind && t.kind !== filter.kind) return false;
    if (filter.allowed && !filter.allowed.has(t.node_type_id)) return false;
    if (filter.denied.has(t.node_type_id)) return false;
    return withinSideEffectCap(t.constraints?.gates?.side_effect_class as SideEffectClass | undefined, filter.sideEffectCap);
  }

  /**
   * The best `limit` node types for `goal` that pass `filter`, scored 0..1 (best = 1). Allowed ids that
   * match no goal term still qualify, after every match, with score 0: the allow list is a deliberate choice.
   */
  rank(goal: string, filter: CandidateFilter, limit: number): Candidate[] {
    const terms = goalTerms(goal);
    const results =
      terms.length === 0
        ? []
        : this.search.search(terms.join(" "), {
            // The goal is already split, stemmed and deduplicated.
            tokenize: (q) => q.split(" "),
            processTerm: (t) => t,
            combineWith: "OR",
            boost: FIELD_BOOST,
            prefix: (term) => term.length >= 3,
            fuzzy: (term) => (term.length >= 5 ? 0.2 : false),
            filter: (r) => this.admits(this.byId.get(r.id as string) as NodeType, filter),
          });
    results.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const best = results[0]?.score ?? 0;
    const out: Candidate[] = results.slice(0, limit).map((r) => {
      const t = this.byId.get(r.id as string) as NodeType;
      return describedCandidate(t, {
        node_type_ref: { node_type_id: t.node_type_id, version: t.version },
        score: best > 0 ? Math.round((r.score / best) * 1000) / 1000 : 0,
        rationale: rationaleOf(r.match),
      });
    });
    if (filter.allowed && out.length < limit) {
      const listed = new Set(out.map((c) => c.node_type_ref.node_type_id));
      const rest = [...filter.allowed]
        .filter((id) => !listed.has(id) && this.byId.has(id) && this.admits(this.byId.get(id) as NodeType, filter))
        .sort();
      for (const id of rest.slice(0, limit - out.length)) {
        const t = this.byId.get(id) as NodeType;
        out.push(
          describedCandidate(t, {
            node_type_ref: { node_type_id: t.node_type_id, version: t.version },
            score: 0,
            rationale: "no goal term matched; included because allowed_node_type_ids lists it",
          }),
        );
      }
    }
    return out;
  }
}

/**
 * A candidate with what a planner needs to choose it and fill its inputs without a second lookup: the node type's
 * constraints (its side-effect gate), and its description and input_schema as `nodefabric.description` and
 * `nodefabric.input_schema`.
 */
function describedCandidate(t: NodeType, c: Candidate): Candidate {
  if (t.constraints) c.constraints = t.constraints;
  const extensions: Record<string, unknown> = {};
  if (t.description) extensions["nodefabric.description"] = t.description;
  if (t.input_schema) extensions["nodefabric.input_schema"] = t.input_schema;
  if (Object.keys(extensions).length > 0) c.extensions = extensions as Candidate["extensions"];
  return c;
}

/** `matched "weather" in node_type_id, description; "rate" in labels`, fields in RANKED_FIELDS order. */
function rationaleOf(match: Record<string, string[]>): string {
  const parts = Object.entries(match).map(([term, fields]) => {
    const ordered = RANKED_FIELDS.filter((f) => fields.includes(f));
    return `"${term}" in ${ordered.join(", ")}`;
  });
  return `matched ${parts.join("; ")}`;
}
