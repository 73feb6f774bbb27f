/**
 * The planner's subtask mode (the default), as the model loop of planner.ts describes it: **plan** the goal into
 * subtasks, **select** a bounded candidate set for each and let the model choose among it, an optional **approval**,
 * then **map and run** in waves (each subtask's inputs written by the model, the wave's children side by side), and
 * **evaluate**, with the bounded recoveries the evaluation asks for.
 */
import { ChildFailedError, type CompositeContext, type JsonObject, type NodeTypeRef } from "@nodefabric/sdk";
import { fail } from "../failure-codes.js";
import { describeErrors, validatorOf } from "../structured.js";
import { boundError, clampChildPlanner } from "./bounds.js";
import { PLAN_APPROVAL, PLANNER_ID, refName, sideEffectOf, usableCandidates, type Candidate } from "./candidates.js";
import type { Planner } from "./model-calls.js";
import { approvePlan } from "./plan-approval.js";
import { choiceSchema, EVALUATION_SCHEMA, PLAN_SCHEMA, planProblems, type ChildRecord, type PlannerInputs, type Subtask } from "./plan-schemas.js";
import { choosePrompt, evaluatePrompt, inputsPrompt, planPrompt } from "./prompts.js";

/** Waves of subtasks: each holds those whose `after` are all in earlier waves, in plan order. */
function wavesOf(subtasks: Subtask[]): Subtask[][] {
  const level = new Map<string, number>();
  const waves: Subtask[][] = [];
  for (const s of subtasks) {
    const l = s.after.length === 0 ? 0 : Math.max(...s.after.map((a) => (level.get(a) ?? 0) + 1));
    level.set(s.id, l);
    (waves[l] ??= []).push(s);
  }
  return waves.filter(Boolean);
}

/** Runs a planner in subtask mode; answers its outputs. */
export async function runSubtasks(p: Planner, inputs: PlannerInputs, goal: string, ctx: CompositeContext): Promise<JsonObject> {
  const structural = ctx.constraints?.structural;

  // ---------------------------------------------------------------- plan
  const plan = await p.ask<{ subtasks: Subtask[] }>(
    "plan",
    planPrompt(goal, inputs.context ?? {}, p.maxSteps),
    PLAN_SCHEMA,
    (v) => planProblems(v.subtasks),
  );
  const subtasks = plan.subtasks;
  if (subtasks.length > p.maxSteps) {
    throw boundError(`the model's plan has ${subtasks.length} subtasks, more than max_steps ${p.maxSteps}; nothing was run`, { bound: "max_steps", limit: p.maxSteps, planned: subtasks.length });
  }
  // Children this plan can make at most: a model call to choose and one to map per subtask, the subtask itself, the
  // approval and the evaluation; checked before anything runs, never cut short later.
  const perComposite = structural?.max_children_per_composite;
  const planned = p.usage.model_calls + subtasks.length * 3 + 1 + (inputs.require_approval ? 1 : 0);
  if (perComposite !== undefined && planned > perComposite) {
    throw boundError(`the plan of ${subtasks.length} subtasks could need ${planned} child NodeRuns, more than max_children_per_composite ${perComposite}; nothing was run`, {
      bound: "max_children_per_composite",
      limit: perComposite,
      planned,
    });
  }

  // ---------------------------------------------------------------- select and choose
  const allowed = inputs.allowed_node_type_ids;
  const candidatesOf = new Map<string, Candidate[]>();
  const chosen = new Map<string, Candidate>();
  for (const s of subtasks) {
    const set = await ctx.select(
      { subtask_id: s.id, goal: s.goal },
      { candidates: { max_candidates_per_subtask: inputs.max_candidates ?? 5, ...(allowed ? { allowed_node_type_ids: allowed } : {}) } },
    );
    const usable = usableCandidates(p, set.candidates);
    if (usable.length === 0) {
      throw fail("no_candidate", `Selection proposed no node type the planner may run for subtask "${s.id}" (${s.goal})`, {
        retryable: false,
        details: {
          subtask_id: s.id,
          goal: s.goal,
          candidate_set_id: set.candidate_set_id,
          refused: set.candidates.map((c) => refName(c.node_type_ref)),
          // The candidates the PDP denied this run before the model could see them, with its reasons.
          ...(set.extensions?.["nodefabric.policy_refused"] ? { policy_refused: set.extensions["nodefabric.policy_refused"] } : {}),
        },
      });
    }
    candidatesOf.set(s.id, usable);
    if (usable.length === 1) {
      chosen.set(s.id, usable[0]);
      continue;
    }
    const names = usable.map((c) => refName(c.node_type_ref));
    const choice = await p.ask<{ choice: string }>(
      "choose",
      choosePrompt(goal, s, usable),
      choiceSchema(names),
      (v) => (names.includes(v.choice) ? [] : [`/choice: must be one of ${names.join(", ")}`]),
    );
    chosen.set(s.id, usable[names.indexOf(choice.choice)]);
  }

  // ---------------------------------------------------------------- approval of the whole plan
  if (inputs.require_approval) {
    // Parked by the PDP until someone approves or rejects it; nothing else runs meanwhile.
    await approvePlan(
      ctx,
      goal,
      subtasks.map((s) => {
        const c = chosen.get(s.id)!;
        return { id: s.id, goal: s.goal, after: s.after, node_type: refName(c.node_type_ref), side_effect_class: sideEffectOf(c) };
      }),
    );
  }

  // ---------------------------------------------------------------- map and run, wave by wave
  const results = new Map<string, ChildRecord>();
  /** Writes a subtask's inputs (a model call), then starts its child and returns at once with the child's outcome to come. */
  const startSubtask = async (s: Subtask, candidate: Candidate): Promise<{ outcome: Promise<ChildRecord> }> => {
    const ref = candidate.node_type_ref;
    const schema = (candidate.extensions?.["nodefabric.input_schema"] as JsonObject | undefined) ?? { type: "object" };
    const earlier = Object.fromEntries(s.after.map((a) => [a, results.get(a)?.outputs ?? null]));
    let childInputs = await mapInputs(p, goal, s, ref, schema, earlier);
    if (ref.node_type_id === PLANNER_ID) childInputs = clampChildPlanner(childInputs, p, inputs);
    return { outcome: spawnSubtask(p, s, ref, childInputs) };
  };
  const runSubtask = async (s: Subtask, candidate: Candidate): Promise<ChildRecord> => (await startSubtask(s, candidate)).outcome;
  for (const wave of wavesOf(subtasks)) {
    // The wave's inputs are written one after another, in plan order, then its children run side by side.
    const started: Array<Promise<ChildRecord>> = [];
    for (const s of wave) {
      const failedDep = s.after.find((a) => results.get(a)?.state !== "completed");
      if (failedDep) {
        started.push(Promise.resolve(skipped(s, chosen.get(s.id)!.node_type_ref, failedDep)));
        continue;
      }
      started.push((await startSubtask(s, chosen.get(s.id)!)).outcome);
    }
    for (const r of await Promise.all(started)) results.set(r.subtask_id, r);
  }

  // ---------------------------------------------------------------- evaluate, and recover within bounds
  const maxReplans = inputs.max_replans ?? 1;
  let evaluation: { summary: string; success: boolean; recovery: Array<{ subtask_id: string; action: string; reason: string }> } | undefined;
  for (let round = 0; ; round++) {
    evaluation = await p.ask<typeof evaluation & object>(
      "evaluate",
      evaluatePrompt(goal, subtasks, results),
      EVALUATION_SCHEMA,
      (v) => v.recovery.filter((r) => !results.has(r.subtask_id)).map((r) => `/recovery: "${r.subtask_id}" is not a subtask id`),
    );
    // One recovery per failed subtask that ran (the first asked for it); one whose dependency failed is not run again.
    const seen = new Set<string>();
    const wanted = evaluation.recovery.filter((r) => {
      const prev = results.get(r.subtask_id);
      if (!prev || prev.state !== "failed" || !prev.node_run_id || seen.has(r.subtask_id)) return false;
      seen.add(r.subtask_id);
      return true;
    });
    if (wanted.length === 0 || evaluation.success) break;
    if (round >= maxReplans) {
      await ctx.evaluate(results.get(wanted[0].subtask_id)!.node_run_id || ctx.node_run_id, { status: "fail", reason_code: "max_replans", message: `recovery refused: the planner used its ${maxReplans} re-planning rounds` }).catch(() => undefined);
      break;
    }
    for (const r of wanted) {
      const s = subtasks.find((x) => x.id === r.subtask_id)!;
      const prev = results.get(s.id)!;
      const result = { status: "fail" as const, reason_code: "planner_evaluation", message: r.reason.slice(0, 500) };
      if (r.action === "abort") {
        if (prev.node_run_id) await ctx.evaluate(prev.node_run_id, result, { type: "abort", message: `the planner aborted: ${r.reason}` });
        throw fail("planner_aborted", `the planner aborted after subtask "${s.id}" failed: ${r.reason}`, { retryable: false, details: { subtask_id: s.id } });
      }
      if (r.action === "retry" && prev.node_run_id) {
        // The same node type with the same inputs, as a new child the coordinator records as a retry of the old one.
        try {
          const outputs = await ctx.evaluate(prev.node_run_id, result, { type: "retry", message: r.reason.slice(0, 500) });
          results.set(s.id, { ...prev, state: "completed", outputs: outputs ?? {}, error: undefined, recovery: "retry" });
        } catch (err) {
          if (!ChildFailedError.is(err)) throw err;
          results.set(s.id, { ...prev, node_run_id: err.node_run_id, state: "failed", error: err.error as unknown as JsonObject, recovery: "retry" });
        }
        continue;
      }
      if (r.action === "remap") {
        const list = candidatesOf.get(s.id)!;
        const next = list[list.findIndex((c) => refName(c.node_type_ref) === refName(prev.node_type_ref)) + 1];
        if (!next) {
          if (prev.node_run_id) await ctx.evaluate(prev.node_run_id, { ...result, reason_code: "remap_refused", message: "no other candidate in the subtask's candidate set" });
          continue;
        }
        if (prev.node_run_id) await ctx.evaluate(prev.node_run_id, { ...result, details: { remap_to: refName(next.node_type_ref) } });
        chosen.set(s.id, next);
        results.set(s.id, { ...(await runSubtask(s, next)), recovery: "remap" });
        continue;
      }
      if (r.action === "decompose_further") {
        if (p.depth <= 0) {
          if (prev.node_run_id) await ctx.evaluate(prev.node_run_id, { ...result, reason_code: "max_depth", message: "decompose_further refused: the planner is at max_depth" }, { type: "decompose_further" });
          continue;
        }
        if (prev.node_run_id) await ctx.evaluate(prev.node_run_id, result, { type: "decompose_further", message: r.reason.slice(0, 500) });
        const childInputs = clampChildPlanner({ goal: s.goal }, p, inputs);
        results.set(s.id, { ...(await spawnSubtask(p, s, { node_type_id: PLANNER_ID, version: "1.0.0" }, childInputs)), recovery: "decompose_further" });
        continue;
      }
      if (r.action === "ask_user") {
        if (prev.node_run_id) await ctx.evaluate(prev.node_run_id, result, { type: "ask_user", message: r.reason.slice(0, 500) });
        try {
          await ctx.call(PLAN_APPROVAL, { goal, steps: [{ id: s.id, goal: s.goal, after: s.after, node_type: refName(prev.node_type_ref), side_effect_class: "unknown" }], side_effects: [], question: r.reason } as unknown as JsonObject, {
            constraints: { gates: { require_approval: true } },
          });
          results.set(s.id, { ...prev, recovery: "ask_user: accepted" });
        } catch (err) {
          if (!ChildFailedError.is(err)) throw err;
          throw fail("approval_rejected", `the user did not accept the failure of subtask "${s.id}": ${err.error.message}`, { retryable: false, details: { subtask_id: s.id } });
        }
      }
    }
  }

  const children = subtasks.map((s) => results.get(s.id)!).map((r) => JSON.parse(JSON.stringify(r)) as JsonObject);
  return {
    planner_summary: evaluation!.summary,
    success: evaluation!.success && [...results.values()].every((r) => r.state === "completed"),
    plan: { subtasks: subtasks.map((s) => ({ ...s, node_type: refName(chosen.get(s.id)!.node_type_ref) })) } as unknown as JsonObject,
    child_node_runs: children,
    model_calls: p.modelCalls.map((m) => JSON.parse(JSON.stringify(m)) as JsonObject),
    usage: p.usage,
  };
}

/** Writes a subtask's inputs with a model call, valid under the chosen node type's input schema. */
async function mapInputs(p: Planner, goal: string, s: Subtask, ref: NodeTypeRef, schema: JsonObject, earlier: Record<string, unknown>): Promise<JsonObject> {
  const props = schema.properties as JsonObject | undefined;
  // A node type that takes nothing needs no model call.
  if (schema.type === "object" && props && Object.keys(props).length === 0) return {};
  const validate = validatorOf(schema);
  const out = await p.ask<JsonObject>(
    "inputs",
    inputsPrompt(goal, s, ref, schema, earlier),
    schema.type === "object" ? schema : { type: "object" },
    (v) => (validate(v) ? [] : describeErrors(validate.errors)),
  );
  return out;
}

/**
 * Runs a subtask as a child and records its outcome. A child planner spends from the run's budgets as this one does
 * (each of its model calls reserved by the run), never from a copy of what this one had left: planners side by side
 * cannot together spend more than the run has. What it spent counts in this one's `usage` once it ends.
 */
async function spawnSubtask(p: Planner, s: Subtask, ref: NodeTypeRef, inputs: JsonObject): Promise<ChildRecord> {
  const ctx = p.ctx;
  const isPlanner = ref.node_type_id === PLANNER_ID;
  const child = ctx.spawn(ref, inputs, { metadata: { labels: { "nodefabric.llm.subtask": s.id } } });
  try {
    const outputs = await child.result;
    if (isPlanner) p.settleFrom(outputs.usage as JsonObject | undefined);
    return { subtask_id: s.id, node_type_ref: ref, node_run_id: await child.node_run_id, state: "completed", outputs };
  } catch (err) {
    if (!ChildFailedError.is(err)) throw err;
    return { subtask_id: s.id, node_type_ref: ref, node_run_id: err.node_run_id, state: "failed", error: err.error as unknown as JsonObject };
  }
}

/** The record of a subtask not run because one it needs did not complete. */
function skipped(s: Subtask, ref: NodeTypeRef, dep: string): ChildRecord {
  return { subtask_id: s.id, node_type_ref: ref, node_run_id: "", state: "failed", error: { code: "dependency_failed", message: `subtask "${dep}" it needs did not complete` } };
}
