/**
 * The planner's mode "plan": the model answers one declarative plan, which the fabric's plan compiler checks and its
 * runner runs.
 */
import { ChildFailedError, type CompositeContext, type JsonObject, type JsonValue } from "@nodefabric/sdk";
import { fail } from "../failure-codes.js";
import { boundError, clampChildPlanner } from "./bounds.js";
import { PLANNER_ID, refName, sideEffectOf, usableCandidates } from "./candidates.js";
import type { Planner } from "./model-calls.js";
import { approvePlan } from "./plan-approval.js";
import { declarativePlanSchema, EVALUATION_SCHEMA, type ChildRecord, type DeclarativeStep, type PlannerInputs } from "./plan-schemas.js";
import { declarativeEvaluatePrompt, declarativePlanPrompt } from "./prompts.js";

/**
 * Plans as data: the model answers a declarative plan (the format of `extensions["nodefabric.plan"]`: steps with
 * `after`, `when`, `for_each` and JSONata references to `inputs` and earlier `steps.<id>.outputs`), choosing node
 * types only from Selection's candidate set. The fabric's own plan compiler checks it before anything runs (its
 * problems go back to the model as a repair), and its runner runs it, independent steps in parallel, each step a
 * child of this planner. The plan's `inputs` are `{ goal, context }`.
 */
export async function runDeclarative(p: Planner, inputs: PlannerInputs, goal: string, ctx: CompositeContext): Promise<JsonObject> {
  const checkPlan = ctx.checkPlan?.bind(ctx);
  const runPlanFn = ctx.runPlan?.bind(ctx);
  if (!checkPlan || !runPlanFn) {
    throw fail("invalid_configuration", "this composite executor cannot run declarative plans (ctx.checkPlan, ctx.runPlan); mode \"plan\" needs a newer @nodefabric/core", { retryable: false });
  }
  const allowed = inputs.allowed_node_type_ids;
  const set = await ctx.select({ subtask_id: "plan", goal }, { candidates: { max_candidates_per_subtask: inputs.max_candidates ?? 10, ...(allowed ? { allowed_node_type_ids: allowed } : {}) } });
  const usable = usableCandidates(p, set.candidates);
  if (usable.length === 0) {
    throw fail("no_candidate", `Selection proposed no node type the planner may run for "${goal}"`, { retryable: false, details: { candidate_set_id: set.candidate_set_id, refused: set.candidates.map((c) => refName(c.node_type_ref)) } });
  }
  const byName = new Map(usable.map((c) => [refName(c.node_type_ref), c]));
  const plan = await p.ask<{ steps: DeclarativeStep[]; outputs: JsonValue }>(
    "plan",
    declarativePlanPrompt(goal, inputs.context ?? {}, p.maxSteps, usable),
    declarativePlanSchema(usable),
    (v) => [
      ...checkPlan(v).map((i) => `${i.path}: ${i.message}`),
      ...v.steps.flatMap((st, i) => (byName.has(refName(st.node_type_ref)) ? [] : [`/steps/${i}/node_type_ref: ${refName(st.node_type_ref)} is not one of the listed tools`])),
      ...v.steps.flatMap((st, i) => (st.node_type_ref.node_type_id === PLANNER_ID && (typeof st.inputs !== "object" || st.inputs === null || Array.isArray(st.inputs)) ? [`/steps/${i}/inputs: a step of ${PLANNER_ID} must give its inputs as an object`] : [])),
    ],
  );
  if (plan.steps.length > p.maxSteps) {
    throw boundError(`the model's plan has ${plan.steps.length} steps, more than max_steps ${p.maxSteps}; nothing was run`, { bound: "max_steps", limit: p.maxSteps, planned: plan.steps.length });
  }
  // Bounds only shrink: a child planner's inputs are clamped to what this one has left.
  for (const st of plan.steps) if (st.node_type_ref.node_type_id === PLANNER_ID) st.inputs = clampChildPlanner(st.inputs as JsonObject, p, inputs);
  const steps = plan.steps.map((st) => ({ id: st.id, goal: refName(st.node_type_ref), after: st.after ?? [], node_type: refName(st.node_type_ref), side_effect_class: sideEffectOf(byName.get(refName(st.node_type_ref))) }));
  if (inputs.require_approval) await approvePlan(ctx, goal, steps);

  const children: ChildRecord[] = [];
  const started: Array<Promise<void>> = [];
  let outputs: JsonObject | undefined;
  let failure: JsonObject | undefined;
  try {
    outputs = await runPlanFn(plan as unknown as JsonObject, { goal, context: inputs.context ?? {} }, {
      onChild: (child) => {
        const record: ChildRecord = { subtask_id: "", node_type_ref: child.node_type_ref, node_run_id: "", state: "completed" };
        children.push(record);
        started.push(
          child.node_run_id.then((id) => void (record.node_run_id = id)).catch(() => undefined),
          child.result.then(
            (o) => void (record.outputs = o),
            (err: unknown) => {
              record.state = "failed";
              if (ChildFailedError.is(err)) record.error = err.error as unknown as JsonObject;
            },
          ),
        );
      },
    });
  } catch (err) {
    const e = err as { code?: string; message?: string; error?: { code?: string } };
    failure = { code: ChildFailedError.is(err) ? "child_failed" : (e.code ?? "plan_failed"), message: e.message ?? String(err) };
  }
  await Promise.allSettled(started);
  const evaluation = await p.ask<{ summary: string; success: boolean; recovery: unknown[] }>(
    "evaluate",
    declarativeEvaluatePrompt(goal, outputs, failure),
    EVALUATION_SCHEMA,
  );
  return {
    planner_summary: evaluation.summary,
    success: evaluation.success && failure === undefined,
    plan: plan as unknown as JsonObject,
    ...(outputs ? { plan_outputs: outputs } : {}),
    ...(failure ? { plan_error: failure } : {}),
    child_node_runs: children.map((c) => JSON.parse(JSON.stringify(c)) as JsonObject),
    model_calls: p.modelCalls.map((m) => JSON.parse(JSON.stringify(m)) as JsonObject),
    usage: p.usage,
  };
}
