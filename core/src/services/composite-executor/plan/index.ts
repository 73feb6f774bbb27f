/**
 * Declarative composites: plans carried in `extensions["nodefabric.plan"]`, their validation at publish,
 * and their interpreter. See docs/plans.md.
 */
export { runPlan, PlanEvaluationError } from "./plan-runner.js";
export { validatePlan, validateNodeTypePlan, compilePlan, planOf, PlanInvalidError, PLAN_POINTER } from "./plan-compiler.js";
export type { CompiledPlan, CompiledStep } from "./plan-compiler.js";
export { PLAN_EXTENSION_KEY } from "./plan-types.js";
export type { Plan, PlanStep, PlanIssue, PlanContext } from "./plan-types.js";
