/**
 * The candidates a planner may run, and how it names them: Selection's set for a subtask (already filtered by the
 * run's allow and deny lists, its side-effect gate and the PDP), without the node types a plan never runs.
 */
import type { CandidateSet, NodeTypeRef } from "@nodefabric/sdk";

export type Candidate = CandidateSet["candidates"][number];

/** The node type of each model call. */
export const CHAT: NodeTypeRef = { node_type_id: "llm.chat", version: "1.0.0" };
/** The node type a plan waits on for its approval (plan-approval.ts). */
export const PLAN_APPROVAL: NodeTypeRef = { node_type_id: "llm.plan-approval", version: "1.0.0" };
export const PLANNER_ID = "llm.planner";
/** Node types a plan never runs as a subtask. */
const NEVER_CANDIDATES = new Set([CHAT.node_type_id, PLAN_APPROVAL.node_type_id]);

/** A node type as prompts and plans name it: `id@version`. */
export function refName(ref: NodeTypeRef): string {
  return `${ref.node_type_id}@${ref.version}`;
}

/** The candidates a planner may run: Selection's set, without llm.chat and llm.plan-approval, and llm.planner only with depth left. */
export function usableCandidates(p: { depth: number }, candidates: Candidate[]): Candidate[] {
  return candidates.filter((c) => !NEVER_CANDIDATES.has(c.node_type_ref.node_type_id) && (c.node_type_ref.node_type_id !== PLANNER_ID || p.depth > 0));
}

/** A candidate's side-effect class, as the approval and the prompts show it. */
export function sideEffectOf(c: Candidate | undefined): string {
  return (c?.constraints?.gates?.side_effect_class as string | undefined) ?? "unknown";
}
