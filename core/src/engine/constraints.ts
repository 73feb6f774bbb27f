/**
 * Constraint envelopes merge from outer to inner (run → node type → spec): the lowest number wins,
 * allow lists intersect, deny lists unite and the strictest gate wins. Selection and the coordinator
 * both use this one merge so they can never disagree about what a subtask may do.
 */
import type { ConstraintEnvelope } from "@nodefabric/schemas";

/** The side-effect classes, weakest first: a cap admits every class at or below it. */
export const SIDE_EFFECT_CLASSES = ["read", "write", "irreversible"] as const;
export type SideEffectClass = (typeof SIDE_EFFECT_CLASSES)[number];

/** Rank of a side-effect class (read 0 < write 1 < irreversible 2). */
export function sideEffectRank(value: SideEffectClass): number {
  return SIDE_EFFECT_CLASSES.indexOf(value);
}

type NumericSection = Record<string, number | undefined>;

function minOf(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.min(a, b);
}

function mergeNumeric<T extends NumericSection>(a: T | undefined, b: T | undefined): T | undefined {
  if (!a) return b ? { ...b } : undefined;
  if (!b) return { ...a };
  const out: NumericSection = { ...a };
  for (const [k, v] of Object.entries(b)) {
    if (typeof v === "number") out[k] = minOf(out[k], v);
  }
  return out as T;
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}

type Candidates = NonNullable<ConstraintEnvelope["candidates"]>;
type Gates = NonNullable<ConstraintEnvelope["gates"]>;

function mergeCandidates(a: Candidates | undefined, b: Candidates | undefined): Candidates | undefined {
  if (!a) return b ? { ...b } : undefined;
  if (!b) return { ...a };
  const out: Candidates = {};
  const max = minOf(a.max_candidates_per_subtask, b.max_candidates_per_subtask);
  if (max !== undefined) out.max_candidates_per_subtask = max;
  // An absent allow list means "anything"; an empty one means "nothing", and intersecting keeps that.
  if (a.allowed_node_type_ids && b.allowed_node_type_ids) {
    const inB = new Set(b.allowed_node_type_ids);
    out.allowed_node_type_ids = unique(a.allowed_node_type_ids.filter((id) => inB.has(id)));
  } else if (a.allowed_node_type_ids || b.allowed_node_type_ids) {
    out.allowed_node_type_ids = unique((a.allowed_node_type_ids ?? b.allowed_node_type_ids)!);
  }
  if (a.denied_node_type_ids || b.denied_node_type_ids) {
    out.denied_node_type_ids = unique([...(a.denied_node_type_ids ?? []), ...(b.denied_node_type_ids ?? [])]);
  }
  return out;
}

function mergeGates(a: Gates | undefined, b: Gates | undefined): Gates | undefined {
  if (!a) return b ? { ...b } : undefined;
  if (!b) return { ...a };
  const out: Gates = {};
  const ca = a.side_effect_class as SideEffectClass | undefined;
  const cb = b.side_effect_class as SideEffectClass | undefined;
  if (ca && cb) out.side_effect_class = sideEffectRank(ca) <= sideEffectRank(cb) ? ca : cb;
  else if (ca || cb) out.side_effect_class = (ca ?? cb)!;
  if (a.require_approval !== undefined || b.require_approval !== undefined) {
    out.require_approval = a.require_approval === true || b.require_approval === true;
  }
  return out;
}

function mergeTwo(a: ConstraintEnvelope, b: ConstraintEnvelope): ConstraintEnvelope {
  const out: ConstraintEnvelope = {};
  const structural = mergeNumeric(a.structural as NumericSection | undefined, b.structural as NumericSection | undefined);
  if (structural) out.structural = structural as ConstraintEnvelope["structural"];
  const candidates = mergeCandidates(a.candidates, b.candidates);
  if (candidates) out.candidates = candidates;
  const budgets = mergeNumeric(a.budgets as NumericSection | undefined, b.budgets as NumericSection | undefined);
  if (budgets) out.budgets = budgets as ConstraintEnvelope["budgets"];
  const gates = mergeGates(a.gates, b.gates);
  if (gates) out.gates = gates;
  // Extensions carry no ordering, so the inner (later) envelope's key wins.
  if (a.extensions || b.extensions) out.extensions = { ...(a.extensions ?? {}), ...(b.extensions ?? {}) } as ConstraintEnvelope["extensions"];
  return out;
}

/**
 * Merges constraint envelopes, outermost first, into one new envelope (inputs are not changed):
 * numbers take the lowest, allow lists intersect, deny lists unite, the strictest gate wins.
 */
export function mergeConstraints(...envelopes: Array<ConstraintEnvelope | null | undefined>): ConstraintEnvelope {
  let out: ConstraintEnvelope = {};
  for (const env of envelopes) {
    if (env) out = mergeTwo(out, env);
  }
  // The merge copies sections shallowly; a deep copy keeps the result from sharing arrays with its inputs.
  return structuredClone(out);
}

/** True when a node type of `declared` side effect passes the `cap`; an undeclared class counts as "write". */
export function withinSideEffectCap(declared: SideEffectClass | undefined, cap: SideEffectClass | undefined): boolean {
  if (!cap) return true;
  return sideEffectRank(declared ?? "write") <= sideEffectRank(cap);
}

/**
 * The PolicyDecisionRequest `context` a NodeRun brings to the coordinator's checkpoints: its `metadata.labels` (kept as
 * `extensions["nodefabric.metadata"]`), as `context.labels`, so a policy can decide on what its creator said about it (for example the model profile of an
 * `llm.chat` call a planner makes, `nodefabric.llm.profile`). Nothing when it has no labels.
 */
export function policyContextOf(nodeRun: { extensions?: Record<string, unknown> }): { context?: { labels: Record<string, string> } } {
  const labels = (nodeRun.extensions?.["nodefabric.metadata"] as { labels?: Record<string, string> } | undefined)?.labels;
  return labels && Object.keys(labels).length > 0 ? { context: { labels } } : {};
}
