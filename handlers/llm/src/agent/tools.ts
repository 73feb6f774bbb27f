/**
 * The tools an agent may call: node types named by id (`demo.echo`, `demo.echo@1.0.0`), by pattern (`demo.*`) or by a
 * Selection query, resolved through `ctx.select`, so the run's allow and deny lists, its side-effect gate and the PDP
 * (`node.run.create`) decide each one before the model sees it. Each tool gets a function name the model can use
 * (`^[a-zA-Z0-9_-]{1,64}$`), held in a table: a name the model answers is looked up there, never parsed back.
 */
import type { CompositeContext, JsonObject, NodeTypeRef } from "@nodefabric/sdk";
import type { Candidate } from "../planner/candidates.js";
import { refName, sideEffectOf } from "../planner/candidates.js";

export const AGENT_ID = "llm.agent";
/** Node types an agent never calls as tools: its own model calls and a planner's approval step. */
const NEVER_TOOLS = new Set(["llm.chat", "llm.plan-approval"]);
/** Candidates a pattern or a query may bring, at most (Selection's own cap). */
const MAX_TOOLS = 50;

/** One entry of an agent's `tools`. */
export type ToolSpec = string | { query: string; max_candidates?: number };

/** A tool as the model sees it, and the node type it runs. */
export interface Tool {
  /** The function name the model calls it by. */
  name: string;
  node_type_ref: NodeTypeRef;
  description: string;
  input_schema: JsonObject;
  side_effect_class: string;
}

/** What resolving an agent's `tools` gave: the tools in name order, and what was asked for but is not offered, and why. */
export interface Toolbox {
  tools: Tool[];
  byName: Map<string, Tool>;
  refused: JsonObject[];
}

/** `demo.*` as a regular expression over node type ids (`*` any run of characters, everything else literal). */
function patternOf(p: string): RegExp {
  return new RegExp(`^${p.split("*").map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`);
}

/** A function name for a node type id: its characters outside `[a-zA-Z0-9_-]` as `_`, at most 64, unique in `taken`. */
export function functionNameOf(id: string, taken: Set<string>): string {
  const base = id.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 60) || "tool";
  let name = base;
  for (let n = 2; taken.has(name); n++) name = `${base.slice(0, 60 - String(n).length)}_${n}`;
  taken.add(name);
  return name;
}

/**
 * Resolves `specs` into the agent's tools: exact ids in one Selection request (their allow list), each pattern and each
 * query in its own (a pattern by its literal words, then only the ids it matches). Candidates the PDP or the run's
 * limits refuse are named in `refused` with the reason; `llm.agent` is offered only when `handoffs` allows it.
 */
export async function resolveTools(ctx: CompositeContext, specs: ToolSpec[], goal: string, handoffs: boolean): Promise<Toolbox> {
  const exact: Array<{ id: string; version?: string }> = [];
  const searches: Array<{ key: string; goal: string; bound: number; match?: RegExp }> = [];
  for (const s of specs) {
    if (typeof s !== "string") {
      searches.push({ key: `query:${s.query}`, goal: s.query, bound: Math.min(s.max_candidates ?? 10, MAX_TOOLS) });
    } else if (s.includes("*")) {
      const words = s.split(/[^A-Za-z0-9]+/).filter((w) => w.length > 0).join(" ");
      searches.push({ key: `pattern:${s}`, goal: words || goal || "tools", bound: MAX_TOOLS, match: patternOf(s) });
    } else {
      const at = s.lastIndexOf("@");
      exact.push(at > 0 ? { id: s.slice(0, at), version: s.slice(at + 1) } : { id: s });
    }
  }
  const found = new Map<string, Candidate>();
  const refused: JsonObject[] = [];
  const keep = (c: Candidate) => {
    const id = c.node_type_ref.node_type_id;
    if (NEVER_TOOLS.has(id)) return;
    if (id === AGENT_ID && !handoffs) {
      refused.push({ node_type_ref: c.node_type_ref as unknown as JsonObject, reason_code: "no_turns_left", message: "a handoff to another agent needs turns left" });
      return;
    }
    found.set(refName(c.node_type_ref), c);
  };
  const noteRefused = (set: { extensions?: Record<string, unknown> }) => {
    const r = set.extensions?.["nodefabric.policy_refused"];
    if (Array.isArray(r)) refused.push(...(r as JsonObject[]));
  };
  if (exact.length > 0) {
    const ids = [...new Set(exact.map((e) => e.id))].sort();
    const set = await ctx.select({ subtask_id: "tools", goal: ids.join(" ") || "tools" }, { candidates: { allowed_node_type_ids: ids, max_candidates_per_subtask: Math.min(ids.length, MAX_TOOLS) } });
    noteRefused(set);
    const byId = new Map(set.candidates.map((c) => [c.node_type_ref.node_type_id, c]));
    for (const e of exact) {
      const c = byId.get(e.id);
      const policyRefused = refused.some((r) => (r.node_type_ref as { node_type_id?: string } | undefined)?.node_type_id === e.id);
      if (!c) {
        if (!policyRefused) refused.push({ node_type_ref: { node_type_id: e.id, ...(e.version ? { version: e.version } : {}) }, reason_code: "not_found", message: "no such node type, or the run's limits leave it out" });
        continue;
      }
      if (e.version && c.node_type_ref.version !== e.version) {
        refused.push({ node_type_ref: { node_type_id: e.id, version: e.version }, reason_code: "version_not_found", message: `Selection offers version ${c.node_type_ref.version}` });
        continue;
      }
      keep(c);
    }
  }
  for (const s of searches) {
    const set = await ctx.select({ subtask_id: s.key.slice(0, 200), goal: s.goal }, { candidates: { max_candidates_per_subtask: s.bound } });
    noteRefused(set);
    for (const c of set.candidates) if (!s.match || s.match.test(c.node_type_ref.node_type_id)) keep(c);
  }
  // Named in a stable order (by id, then version), so the same tools always get the same names.
  const candidates = [...found.values()].sort((a, b) => (refName(a.node_type_ref) < refName(b.node_type_ref) ? -1 : 1));
  const taken = new Set<string>();
  const tools = candidates.map((c): Tool => {
    const schema = c.extensions?.["nodefabric.input_schema"] as JsonObject | undefined;
    return {
      name: functionNameOf(c.node_type_ref.node_type_id, taken),
      node_type_ref: { node_type_id: c.node_type_ref.node_type_id, version: c.node_type_ref.version },
      description: String(c.extensions?.["nodefabric.description"] ?? c.node_type_ref.node_type_id).slice(0, 1000),
      input_schema: schema && typeof schema === "object" && !Array.isArray(schema) ? schema : { type: "object" },
      side_effect_class: sideEffectOf(c),
    };
  });
  return { tools, byName: new Map(tools.map((t) => [t.name, t])), refused };
}

/** A tool as one function definition of a chat request. */
export function functionOf(t: Tool): { type: "function"; function: { name: string; description: string; parameters: JsonObject } } {
  const s = t.input_schema;
  // A function's parameters must be an object schema; one that is not (or says nothing) takes any object.
  const parameters = s.type === "object" ? s : { type: "object" };
  return { type: "function", function: { name: t.name, description: `${t.description} (node type ${refName(t.node_type_ref)}, side effects: ${t.side_effect_class})`, parameters } };
}
