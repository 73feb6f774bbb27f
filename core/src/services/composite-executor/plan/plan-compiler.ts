/**
 * Reading a plan: every problem it has (for the registry, at publish) and, when it has none, the compiled
 * form the interpreter runs (expressions parsed once, dependencies resolved, a fixed start order).
 */
import { createHash } from "node:crypto";
import { trackCache } from "../../../observe/caches.js";
import { validatorFor, type NodeTypeRef } from "@nodefabric/schemas";
import { issuesFromAjv } from "../../../http/validation.js";
import { canonicalJson } from "../../../canonical-json.js";
import { expressionSource, type ExpressionReads, type PlanExpression } from "./plan-expression.js";
import { compileTemplate, pointerSegment, type Template, type TemplateSink } from "./plan-template.js";
import { PLAN_EXTENSION_KEY, type PlanIssue } from "./plan-types.js";

/** Where a plan sits in a NodeTypePublishRequest: the prefix of every problem path. */
export const PLAN_POINTER = `/node_type/extensions/${PLAN_EXTENSION_KEY}`;

const PLAN_FIELDS = new Set(["steps", "outputs", "description"]);
const STEP_FIELDS = new Set(["id", "node_type_ref", "inputs", "when", "for_each", "after", "description"]);
// Ids are read as JSONata names (`steps.<id>`), so they must be plain identifiers.
const STEP_ID = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const ROOT_NAMES = "inputs, steps.<id>.outputs, and (in the inputs of a for_each step) item and index";
const CACHE_LIMIT = 256;

/** One step, ready to run. */
export interface CompiledStep {
  id: string;
  /** Position in the plan's `steps`. */
  index: number;
  ref: NodeTypeRef;
  inputs: Template;
  when?: Template;
  forEach?: Template;
  /** Plan positions of the steps this one waits for (read through `steps.<id>` or named in `after`). */
  deps: number[];
}

/** A plan with no problems, compiled. */
export interface CompiledPlan {
  steps: CompiledStep[];
  /** Plan positions in the order steps start: plan order, except that a step never precedes what it waits for. */
  order: number[];
  outputs: Template;
}

/** A plan that cannot run; `issues` lists its problems. */
export class PlanInvalidError extends Error {
  readonly issues: PlanIssue[];
  constructor(issues: PlanIssue[]) {
    super(`the plan is invalid: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`);
    this.name = "PlanInvalidError";
    this.issues = issues;
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function objectOrExpression(value: unknown): boolean {
  return isPlainObject(value) || expressionSource(value) !== undefined;
}

interface StepDraft {
  index: number;
  raw: Record<string, unknown>;
  id?: string;
  ref?: NodeTypeRef;
  deps: Set<number>;
}

/** The reads of one expression, checked against the plan's steps; dependencies are recorded on `deps`. */
function checkReads(
  reads: ExpressionReads,
  pointer: string,
  allowItem: boolean,
  ids: Map<string, number>,
  deps: Set<number> | undefined,
  issues: PlanIssue[],
): void {
  for (const { name, position } of reads.rootNames) {
    if (name === "inputs" || name === "steps") continue;
    if (name === "item" || name === "index") {
      if (!allowItem) issues.push({ path: pointer, message: `uses "${name}" (at character ${position}), which only the inputs of a for_each step can see` });
      continue;
    }
    issues.push({ path: pointer, message: `reads "${name}" (at character ${position}), which is not defined here; expressions see ${ROOT_NAMES}` });
  }
  for (const { name, position } of reads.stepRefs) {
    const target = ids.get(name);
    if (target === undefined) {
      issues.push({ path: pointer, message: `refers to steps.${name} (at character ${position}), but the plan has no step "${name}"` });
    } else {
      deps?.add(target);
    }
  }
  for (const position of reads.bareSteps) {
    issues.push({ path: pointer, message: `reads steps without naming a step (at character ${position}); write steps.<id>.outputs so the dependency is known` });
  }
}

function templateSink(pointer: string, allowItem: boolean, ids: Map<string, number>, deps: Set<number> | undefined, issues: PlanIssue[]): TemplateSink {
  return {
    expression(field: string, expression: PlanExpression) {
      checkReads(expression.reads, `${pointer}/${field}`, allowItem, ids, deps, issues);
    },
    syntaxError(field: string, message: string) {
      issues.push({ path: `${pointer}/${field}`, message: `is not a valid JSONata expression: ${message}` });
    },
  };
}

/** Strongly connected components that form cycles (more than one step, or a step waiting for itself). */
function cycles(deps: Array<Set<number>>): number[][] {
  const n = deps.length;
  const index = new Array<number>(n).fill(-1);
  const low = new Array<number>(n).fill(0);
  const onStack = new Array<boolean>(n).fill(false);
  const stack: number[] = [];
  const found: number[][] = [];
  let counter = 0;
  const visit = (v: number): void => {
    index[v] = low[v] = counter++;
    stack.push(v);
    onStack[v] = true;
    for (const w of deps[v] as Set<number>) {
      if (index[w] === -1) {
        visit(w);
        low[v] = Math.min(low[v] as number, low[w] as number);
      } else if (onStack[w]) {
        low[v] = Math.min(low[v] as number, index[w] as number);
      }
    }
    if (low[v] === index[v]) {
      const component: number[] = [];
      let w: number;
      do {
        w = stack.pop() as number;
        onStack[w] = false;
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (deps[v] as Set<number>).has(v)) found.push(component.sort((a, b) => a - b));
    }
  };
  for (let v = 0; v < n; v++) if (index[v] === -1) visit(v);
  return found.sort((a, b) => (a[0] as number) - (b[0] as number));
}

/** One concrete loop through a cycle component, from its first step back to it (breadth first, so the shortest). */
function loopThrough(component: number[], deps: Array<Set<number>>): number[] {
  const start = component[0] as number;
  const members = new Set(component);
  const previous = new Map<number, number>();
  const queue = [start];
  for (let head = 0; head < queue.length; head++) {
    const v = queue[head] as number;
    for (const w of deps[v] as Set<number>) {
      if (!members.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let at: number | undefined = v; at !== undefined && at !== start; at = previous.get(at)) path.push(at);
        return [...path.slice(0, 1), ...path.slice(1).reverse(), start];
      }
      if (!previous.has(w)) {
        previous.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

/** Plan order, except that each step comes after everything it waits for (the dependency graph is acyclic here). */
function startOrder(deps: Array<Set<number>>): number[] {
  const placed = new Array<boolean>(deps.length).fill(false);
  const order: number[] = [];
  while (order.length < deps.length) {
    let next = -1;
    for (let i = 0; i < deps.length && next === -1; i++) {
      if (!placed[i] && [...(deps[i] as Set<number>)].every((d) => placed[d])) next = i;
    }
    placed[next] = true;
    order.push(next);
  }
  return order;
}

/** Every problem of a plan, and its compiled form when there are none. */
function analyzePlan(plan: unknown, base: string): { issues: PlanIssue[]; compiled?: CompiledPlan } {
  const issues: PlanIssue[] = [];
  if (!isPlainObject(plan)) {
    issues.push({ path: base, message: "must be an object with steps and outputs" });
    return { issues };
  }
  for (const key of Object.keys(plan)) {
    if (!PLAN_FIELDS.has(key)) issues.push({ path: `${base}/${pointerSegment(key)}`, message: "is not a field of a plan (steps, outputs, description)" });
  }
  if (plan.description !== undefined && typeof plan.description !== "string") issues.push({ path: `${base}/description`, message: "must be a string" });

  const drafts: StepDraft[] = [];
  const ids = new Map<string, number>();
  if (plan.steps === undefined) {
    issues.push({ path: `${base}/steps`, message: "is required" });
  } else if (!Array.isArray(plan.steps)) {
    issues.push({ path: `${base}/steps`, message: "must be an array of steps" });
  } else {
    const isRef = validatorFor("node_type_ref");
    plan.steps.forEach((raw: unknown, index: number) => {
      const pointer = `${base}/steps/${index}`;
      if (!isPlainObject(raw)) {
        issues.push({ path: pointer, message: "must be an object with an id and a node_type_ref" });
        return;
      }
      const draft: StepDraft = { index, raw, deps: new Set() };
      drafts.push(draft);
      for (const key of Object.keys(raw)) {
        if (!STEP_FIELDS.has(key)) {
          issues.push({ path: `${pointer}/${pointerSegment(key)}`, message: "is not a field of a step (id, node_type_ref, inputs, when, for_each, after, description)" });
        }
      }
      if (raw.description !== undefined && typeof raw.description !== "string") issues.push({ path: `${pointer}/description`, message: "must be a string" });
      if (raw.id === undefined) {
        issues.push({ path: `${pointer}/id`, message: "is required" });
      } else if (typeof raw.id !== "string" || !STEP_ID.test(raw.id)) {
        issues.push({ path: `${pointer}/id`, message: "must be a name of letters, digits and _ that does not start with a digit (it is read as steps.<id>)" });
      } else if (ids.has(raw.id)) {
        issues.push({ path: `${pointer}/id`, message: `"${raw.id}" is already the id of step ${ids.get(raw.id)}; step ids must be unique` });
      } else {
        ids.set(raw.id, index);
        draft.id = raw.id;
      }
      if (raw.node_type_ref === undefined) {
        issues.push({ path: `${pointer}/node_type_ref`, message: "is required" });
      } else if (!isRef(raw.node_type_ref)) {
        for (const issue of issuesFromAjv(isRef.errors)) {
          issues.push({ path: `${pointer}/node_type_ref${issue.path === "/" ? "" : issue.path}`, message: issue.message });
        }
      } else {
        draft.ref = raw.node_type_ref;
      }
    });
  }

  const compiledSteps: Array<CompiledStep | undefined> = [];
  for (const draft of drafts) {
    const { raw, index, deps } = draft;
    const pointer = `${base}/steps/${index}`;
    const fanOut = raw.for_each !== undefined;
    let inputs: Template = { kind: "literal", value: {} };
    if (raw.inputs !== undefined) {
      if (objectOrExpression(raw.inputs)) inputs = compileTemplate(raw.inputs, "inputs", templateSink(pointer, fanOut, ids, deps, issues));
      else issues.push({ path: `${pointer}/inputs`, message: "must be an object, or an expression that evaluates to one" });
    }
    const when = raw.when === undefined ? undefined : compileTemplate(raw.when, "when", templateSink(pointer, false, ids, deps, issues));
    let forEach: Template | undefined;
    if (fanOut) {
      if (Array.isArray(raw.for_each) || expressionSource(raw.for_each) !== undefined) {
        forEach = compileTemplate(raw.for_each, "for_each", templateSink(pointer, false, ids, deps, issues));
      } else {
        issues.push({ path: `${pointer}/for_each`, message: "must be an expression that evaluates to an array, or an array" });
      }
    }
    if (raw.after !== undefined) {
      if (!Array.isArray(raw.after)) {
        issues.push({ path: `${pointer}/after`, message: "must be an array of step ids" });
      } else {
        raw.after.forEach((name: unknown, k: number) => {
          const target = typeof name === "string" ? ids.get(name) : undefined;
          if (target === undefined) issues.push({ path: `${pointer}/after/${k}`, message: `names no step of this plan (${JSON.stringify(name)})` });
          else deps.add(target);
        });
      }
    }
    compiledSteps[index] =
      draft.id !== undefined && draft.ref !== undefined
        ? { id: draft.id, index, ref: draft.ref, inputs, when, forEach, deps: [] }
        : undefined;
  }

  let outputs: Template = { kind: "literal", value: {} };
  if (plan.outputs === undefined) {
    issues.push({ path: `${base}/outputs`, message: "is required" });
  } else if (!objectOrExpression(plan.outputs)) {
    issues.push({ path: `${base}/outputs`, message: "must be an object, or an expression that evaluates to one" });
  } else {
    outputs = compileTemplate(plan.outputs, "outputs", templateSink(base, false, ids, undefined, issues));
  }

  // The graph spans every position of `steps`, so cycles are found even when other problems exist.
  const steps = Array.isArray(plan.steps) ? plan.steps : [];
  const graph = steps.map(() => new Set<number>());
  for (const draft of drafts) graph[draft.index] = draft.deps;
  const idAt = (i: number): string => drafts.find((d) => d.index === i)?.id ?? `#${i}`;
  for (const component of cycles(graph)) {
    const loop = loopThrough(component, graph).map(idAt);
    const names = component.map((i) => `"${idAt(i)}"`).join(", ");
    issues.push({
      path: `${base}/steps/${component[0]}`,
      message: `steps ${names} wait for each other in a cycle: ${loop.join(" → ")} (each waits for the next, through steps.<id> references or after)`,
    });
  }

  if (issues.length > 0) return { issues };
  const ready = compiledSteps as CompiledStep[];
  for (const step of ready) step.deps = [...graph[step.index]!].sort((a, b) => a - b);
  return { issues, compiled: { steps: ready, order: startOrder(graph), outputs } };
}

/**
 * Every problem of a plan, each with a JSON Pointer under the NodeType
 * (`/node_type/extensions/nodefabric.plan/…`). With `nodeType`, also checks that it is a composite.
 */
export function validatePlan(plan: unknown, nodeType?: { kind?: unknown }): PlanIssue[] {
  const issues: PlanIssue[] = [];
  if (nodeType !== undefined && nodeType.kind !== "composite") {
    issues.push({ path: "/node_type/kind", message: `must be "composite" for a node type that carries extensions["${PLAN_EXTENSION_KEY}"]` });
  }
  issues.push(...analyzePlan(plan, PLAN_POINTER).issues);
  return issues;
}

/** The problems of the plan a NodeType carries; none when it carries no plan. */
export function validateNodeTypePlan(nodeType: { kind?: unknown; extensions?: unknown }): PlanIssue[] {
  const extensions = nodeType.extensions;
  if (!isPlainObject(extensions) || !Object.hasOwn(extensions, PLAN_EXTENSION_KEY)) return [];
  return validatePlan(extensions[PLAN_EXTENSION_KEY], nodeType);
}

/** The plan stored in a NodeType's extensions, if any. */
export function planOf(nodeType: { extensions?: unknown }): unknown {
  const extensions = nodeType.extensions;
  return isPlainObject(extensions) ? extensions[PLAN_EXTENSION_KEY] : undefined;
}

const byObject = new WeakMap<object, CompiledPlan>();
const byHash = new Map<string, CompiledPlan>();
trackCache("composite.compiled_plans", byHash, (m) => ({ entries: m.size }), { max_entries: CACHE_LIMIT });

/**
 * The compiled form of a plan; throws PlanInvalidError when it has problems. Compiled plans are cached
 * by object and by a hash of their content, so a plan's expressions are parsed once.
 */
export function compilePlan(plan: unknown): CompiledPlan {
  if (typeof plan === "object" && plan !== null) {
    const known = byObject.get(plan);
    if (known) return known;
  }
  const hash = createHash("sha256").update(canonicalJson(plan) ?? "undefined").digest("hex");
  let compiled = byHash.get(hash);
  if (compiled) {
    // Refresh its place so the least recently used plan is the one evicted.
    byHash.delete(hash);
  } else {
    const analysis = analyzePlan(plan, PLAN_POINTER);
    if (!analysis.compiled) throw new PlanInvalidError(analysis.issues);
    compiled = analysis.compiled;
  }
  byHash.set(hash, compiled);
  if (byHash.size > CACHE_LIMIT) byHash.delete(byHash.keys().next().value as string);
  if (typeof plan === "object" && plan !== null) byObject.set(plan, compiled);
  return compiled;
}
