/**
 * The approval of a whole plan: `llm.plan-approval@1.0.0`, the step a plan waits on, and the planner's wait for it.
 */
import { ChildFailedError, defineAtomic, HandlerError, type CompositeContext, type JsonObject } from "@nodefabric/sdk";
import { PLAN_APPROVAL } from "./candidates.js";

/** Waits for one approval of what a plan will run; a rejection ends the planner `approval_rejected`, with the reason. */
export async function approvePlan(ctx: CompositeContext, goal: string, steps: Array<{ id: string; goal: string; after: string[]; node_type: string; side_effect_class: string }>): Promise<void> {
  const sideEffects = [...new Set(steps.map((s) => s.side_effect_class))].sort();
  try {
    await ctx.call(PLAN_APPROVAL, { goal, steps, side_effects: sideEffects } as unknown as JsonObject, { constraints: { gates: { require_approval: true } } });
  } catch (err) {
    if (ChildFailedError.is(err)) {
      throw new HandlerError(err.error.code === "approval_rejected" ? "approval_rejected" : err.error.code, `the plan was not approved: ${err.error.message}`, {
        retryable: false,
        details: { node_run_id: err.node_run_id, error: err.error as unknown as JsonObject },
      });
    }
    throw err;
  }
}

/**
 * `llm.plan-approval@1.0.0`: the step a plan waits on. The planner creates it with the gate `require_approval`, so a
 * policy with `@require_approval` parks it until someone approves (it then completes at once) or rejects it (the
 * planner fails `approval_rejected` with the reason). Its inputs show what the plan would run and its side effects.
 */
export const planApproval = defineAtomic<JsonObject, JsonObject>({
  nodeType: {
    node_type_id: PLAN_APPROVAL.node_type_id,
    version: PLAN_APPROVAL.version,
    description: "Plan approval: what an llm.planner waits on before it runs a plan; approving it lets the plan run, rejecting it ends the run.",
    input_schema: {
      type: "object",
      properties: {
        goal: { type: "string" },
        steps: {
          type: "array",
          items: {
            type: "object",
            properties: { id: { type: "string" }, goal: { type: "string" }, after: { type: "array", items: { type: "string" } }, node_type: { type: "string" }, side_effect_class: { type: "string" } },
            required: ["id", "goal", "node_type", "side_effect_class"],
          },
        },
        side_effects: { type: "array", items: { type: "string" } },
        question: { type: "string" },
      },
      required: ["goal", "steps", "side_effects"],
    },
    output_schema: { type: "object", properties: { approved: { const: true }, steps: { type: "integer" } }, required: ["approved"], additionalProperties: false },
    constraints: { gates: { side_effect_class: "read", require_approval: true } },
  },
  handler: (inputs) => ({ approved: true, steps: Array.isArray(inputs.steps) ? inputs.steps.length : 0 }),
});
