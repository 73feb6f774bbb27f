/**
 * A declarative composite's plan (`extensions["nodefabric.plan"]`, see docs/plans.md) as a graph: steps and their
 * dependencies, placed in columns by depth so that every edge points rightwards.
 */

export interface PlanStepNode {
  /** The step's id; the plan's outputs are the node OUTPUTS_ID, which no step id can be. */
  id: string;
  nodeType: string;
  forEach: boolean;
  when: boolean;
  /** Ids of the steps this one waits for. */
  deps: string[];
  column: number;
  row: number;
}

export interface PlanGraph {
  steps: PlanStepNode[];
  /** [from, to]: `to` waits for `from`. */
  edges: Array<[string, string]>;
  columns: number;
  rows: number;
}

export const OUTPUTS_ID = "(outputs)";

/**
 * `steps.<id>` as written in an expression. The registry finds dependencies in the parsed JSONata; a page that only
 * draws them reads the text instead, to spare the browser a JSONata parser. `after` is exact either way.
 */
const STEP_REFERENCE = /\bsteps\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)/g;

function expressionsIn(value: unknown, into: string[]): string[] {
  if (typeof value === "string") {
    if (value.startsWith("{%") && value.endsWith("%}")) into.push(value);
  } else if (Array.isArray(value)) {
    for (const v of value) expressionsIn(v, into);
  } else if (value !== null && typeof value === "object") {
    for (const v of Object.values(value)) expressionsIn(v, into);
  }
  return into;
}

interface RawStep {
  id?: unknown;
  node_type_ref?: { node_type_id?: unknown; version?: unknown };
  inputs?: unknown;
  when?: unknown;
  for_each?: unknown;
  after?: unknown;
}

/** The plan of a node type, or undefined when it has none (or one too broken to draw). */
export function planOf(nodeType: { extensions?: Record<string, unknown> }): { steps: RawStep[]; outputs?: unknown } | undefined {
  const plan = nodeType.extensions?.["nodefabric.plan"] as { steps?: unknown; outputs?: unknown } | undefined;
  if (typeof plan !== "object" || plan === null || !Array.isArray(plan.steps)) return undefined;
  return { steps: plan.steps.filter((s): s is RawStep => typeof s === "object" && s !== null), outputs: plan.outputs };
}

/** Steps, dependency edges and a layered layout: a step's column is one more than the deepest step it waits for. */
export function layoutPlan(plan: { steps: RawStep[]; outputs?: unknown }): PlanGraph {
  // The outputs are drawn as a last node, fed by the steps they read.
  const all: RawStep[] = [...plan.steps, { id: OUTPUTS_ID, inputs: plan.outputs }];
  const ids = all.map((s, i) => (typeof s.id === "string" ? s.id : `#${i}`));
  const known = new Set(ids);
  const depsOf = new Map<string, string[]>();
  all.forEach((s, i) => {
    const deps = new Set<string>();
    for (const expr of expressionsIn([s.inputs, s.when, s.for_each], [])) {
      for (const m of expr.matchAll(STEP_REFERENCE)) if (known.has(m[1]!) && m[1] !== ids[i]) deps.add(m[1]!);
    }
    if (Array.isArray(s.after)) for (const a of s.after) if (typeof a === "string" && known.has(a) && a !== ids[i]) deps.add(a);
    depsOf.set(ids[i]!, [...deps]);
  });

  // Depth by memoised search; a cycle (the registry refuses those, but the page must not hang) counts as depth 0.
  const depth = new Map<string, number>();
  const visiting = new Set<string>();
  const depthOf = (id: string): number => {
    const known = depth.get(id);
    if (known !== undefined) return known;
    if (visiting.has(id)) return 0;
    visiting.add(id);
    let d = 0;
    for (const dep of depsOf.get(id) ?? []) d = Math.max(d, depthOf(dep) + 1);
    visiting.delete(id);
    depth.set(id, d);
    return d;
  };

  const rowsUsed: number[] = [];
  const steps: PlanStepNode[] = all.map((s, i) => {
    const id = ids[i]!;
    // The outputs come last, after every step, whatever they read.
    const column = id === OUTPUTS_ID ? Math.max(0, ...ids.slice(0, -1).map((x) => depthOf(x) + 1)) : depthOf(id);
    const row = rowsUsed[column] ?? 0;
    rowsUsed[column] = row + 1;
    const ref = s.node_type_ref ?? {};
    const nodeType =
      id === OUTPUTS_ID ? "" : typeof ref.node_type_id === "string" ? `${ref.node_type_id}@${typeof ref.version === "string" ? ref.version : "?"}` : "?";
    return { id, nodeType, forEach: s.for_each !== undefined, when: s.when !== undefined, deps: depsOf.get(id)!, column, row };
  });
  const edges: Array<[string, string]> = [];
  for (const s of steps) for (const d of s.deps) edges.push([d, s.id]);
  return { steps, edges, columns: rowsUsed.length, rows: Math.max(0, ...rowsUsed) };
}
