/**
 * `llm.planner@1.0.0`: a composite that plans with a model, bounded, budgeted and governed.
 *
 * The loop: **plan** (the model splits the goal into subtasks, each with the ids it needs `after`), **select** (Selection
 * gives each subtask a bounded candidate set, already filtered by the run's allow and deny lists and side-effect gate;
 * the model chooses only among it), an optional **approval** of the whole plan, then **map and run** in waves (a
 * wave is every subtask whose dependencies are done: the model writes each one's inputs against the chosen node
 * type's `input_schema`, then the wave's children run in parallel), and **evaluate** (the model judges the results and
 * may ask for a bounded recovery: `retry`, `remap`, `decompose_further`, `ask_user` or `abort`).
 *
 * Every model call is an `llm.chat` child NodeRun, made in an order that depends only on the inputs and on earlier
 * children's outputs, with prompts that are pure functions of them (sorted-key JSON, no clock, no randomness). A
 * replay after a crash therefore gets the stored answers back through the children's idempotency keys, and no
 * completed call is sent to the model again.
 *
 * Model output is untrusted: it never widens a bound (a child planner gets at most its parent's remaining depth and
 * steps), never chooses outside the candidate set, and a plan over a bound fails with `planner_bound_exceeded`,
 * never cut short.
 *
 * The parts, in planner/: what it reads and what the model answers (plan-schemas.ts), the prompts (prompts.ts), the
 * model calls and their budgets (model-calls.ts), the candidates it may run (candidates.ts), the bounds (bounds.ts),
 * the approval of a plan (plan-approval.ts), and its two modes (subtask-mode.ts, declarative-mode.ts).
 */
import { defineComposite, type CompositeContext, type JsonObject } from "@nodefabric/sdk";
import { fail } from "./failure-codes.js";
import { PLANNER_ID } from "./planner/candidates.js";
import { runDeclarative } from "./planner/declarative-mode.js";
import { Planner } from "./planner/model-calls.js";
import type { PlannerInputs } from "./planner/plan-schemas.js";
import { runSubtasks } from "./planner/subtask-mode.js";

export { PLAN_APPROVAL } from "./planner/candidates.js";
export { planApproval } from "./planner/plan-approval.js";
export type { PlannerInputs } from "./planner/plan-schemas.js";
export { stableJson } from "./planner/prompts.js";

async function runPlanner(inputs: PlannerInputs, ctx: CompositeContext): Promise<JsonObject> {
  const goal = inputs.goal ?? inputs.prompt;
  if (!goal) throw fail("invalid_inputs", "llm.planner needs a goal (or prompt)", { retryable: false, details: { field: "goal" } });
  const p = new Planner(inputs, goal, ctx);
  if (inputs.mode === "plan") return runDeclarative(p, inputs, goal, ctx);
  return runSubtasks(p, inputs, goal, ctx);
}

/** `llm.planner@1.0.0`. */
export const llmPlanner = defineComposite<PlannerInputs, JsonObject>({
  nodeType: {
    node_type_id: PLANNER_ID,
    version: "1.0.0",
    description:
      "LLM planner: splits a goal into subtasks with a model, chooses a node type for each among Selection's candidates, writes their inputs, " +
      "runs independent subtasks in parallel and evaluates the results. Every model call is an llm.chat child NodeRun; bounds only shrink; " +
      "token and cost budgets are reserved before each call; the plan can wait for one approval.",
    input_schema: {
      type: "object",
      properties: {
        goal: { type: "string", minLength: 1, maxLength: 20_000 },
        prompt: { type: "string", minLength: 1, maxLength: 20_000 },
        context: { type: "object" },
        max_steps: { type: "integer", minimum: 1, maximum: 50 },
        max_depth: { type: "integer", minimum: 0, maximum: 5 },
        repair_max: { type: "integer", minimum: 0, maximum: 5 },
        max_replans: { type: "integer", minimum: 0, maximum: 5 },
        max_candidates: { type: "integer", minimum: 1, maximum: 20 },
        profile: { type: "string", minLength: 1, maxLength: 128 },
        model: { type: "string", minLength: 1, maxLength: 256 },
        max_output_tokens: { type: "integer", minimum: 1, maximum: 1_000_000 },
        allowed_node_type_ids: { type: "array", items: { type: "string" }, maxItems: 1000 },
        require_approval: { type: "boolean" },
        mode: { enum: ["subtasks", "plan"] },
      },
      anyOf: [{ required: ["goal"] }, { required: ["prompt"] }],
      additionalProperties: false,
    },
    output_schema: {
      type: "object",
      properties: {
        planner_summary: { type: "string" },
        success: { type: "boolean" },
        plan: { type: "object" },
        child_node_runs: { type: "array", items: { type: "object" } },
        model_calls: { type: "array", items: { type: "object" } },
        usage: { type: "object" },
        plan_outputs: { type: "object" },
        plan_error: { type: "object" },
      },
      required: ["planner_summary", "child_node_runs"],
    },
  },
  run: runPlanner,
});
