/**
 * The plan interpreter. Steps start in a fixed order (the compiled start order) as soon as what they wait
 * for has finished, so independent steps overlap. The order of `ctx.call` invocations depends only on the
 * plan and the inputs, never on which child finishes first: the executor numbers children by call order
 * to build their idempotency keys, and a replay after a crash must number them the same way.
 */
import type { JsonObject, JsonValue } from "@nodefabric/sdk";
import { compilePlan, type CompiledStep } from "./plan-compiler.js";
import { jsonataBoolean, type ExpressionScope } from "./plan-expression.js";
import { evaluateTemplate, TemplateEvaluationError, type Template } from "./plan-template.js";
import type { PlanContext } from "./plan-types.js";

/** An expression that failed at run time; the message names the step (or the plan's outputs) and the field. */
export class PlanEvaluationError extends Error {
  /** The step id, or undefined for the plan's `outputs`. */
  readonly step?: string;
  /** The field inside the step (or plan), such as `inputs/city` or `outputs/temp`. */
  readonly field: string;
  /** The fan-out item being evaluated, for a for_each step. */
  readonly item?: number;

  constructor(step: string | undefined, field: string, item: number | undefined, problem: string, cause?: unknown) {
    const where = step === undefined ? "the plan's outputs" : `plan step "${step}"${item === undefined ? "" : ` (item ${item})`}`;
    super(`${where}: ${field} ${problem}`, cause === undefined ? undefined : { cause });
    this.name = "PlanEvaluationError";
    this.step = step;
    this.field = field;
    this.item = item;
  }
}

function isPlainObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describe(value: JsonValue | undefined): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  return Array.isArray(value) ? "an array" : `a ${typeof value}`;
}

async function evaluateField(template: Template, scope: ExpressionScope, step: string | undefined, item?: number): Promise<JsonValue | undefined> {
  try {
    return await evaluateTemplate(template, scope);
  } catch (err) {
    if (err instanceof TemplateEvaluationError) {
      throw new PlanEvaluationError(step, err.field, item, `failed to evaluate: ${err.message}`, err.cause);
    }
    throw err;
  }
}

function asObject(value: JsonValue | undefined, step: string | undefined, field: string, item?: number): JsonObject {
  if (isPlainObject(value)) return value;
  throw new PlanEvaluationError(step, field, item, `must evaluate to an object, but evaluated to ${describe(value)}`);
}

/** A fan-out's items: JSONata unwraps a sequence of one into its single value, so a non-array is one item. */
function itemsOf(value: JsonValue | undefined): JsonValue[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

/**
 * Runs a declarative plan through `ctx.call` and resolves with its outputs. Rejects with the first child
 * failure as `ctx.call` reported it, with a PlanEvaluationError when an expression fails, with
 * PlanInvalidError for a plan with problems, and with the signal's reason once `ctx.signal` aborts.
 */
export async function runPlan(plan: unknown, inputs: JsonObject, ctx: PlanContext): Promise<JsonObject> {
  const compiled = compilePlan(plan);
  const { signal } = ctx;
  signal.throwIfAborted();

  let stopped: { reason: unknown } | undefined;
  let interrupt: (reason: unknown) => void = () => {};
  // Settles only to stop the run; raced against every wait so a failure or an abort ends it at once.
  const interrupted = new Promise<never>((_, reject) => {
    interrupt = (reason) => {
      if (stopped) return;
      stopped = { reason };
      reject(reason);
    };
  });
  interrupted.catch(() => {});
  const checkStopped = (): void => {
    if (stopped) throw stopped.reason;
  };
  const onAbort = (): void => interrupt(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });

  const values: Array<JsonValue | undefined> = new Array(compiled.steps.length);
  const finished: Array<Promise<unknown>> = new Array(compiled.steps.length);

  const call = (step: CompiledStep, childInputs: JsonObject): Promise<JsonObject> => {
    try {
      return ctx.call(step.ref, childInputs);
    } catch (err) {
      return Promise.reject(err);
    }
  };

  /**
   * Evaluates a step and issues its calls (all of them synchronously, in item order). Resolves once they
   * are issued, with the (boxed, so it is not awaited here) promise of the step's outputs.
   */
  const start = async (step: CompiledStep, scope: ExpressionScope): Promise<{ outputs: Promise<JsonValue> }> => {
    if (step.when && !jsonataBoolean(await evaluateField(step.when, scope, step.id))) return { outputs: Promise.resolve(null) };
    if (!step.forEach) {
      const childInputs = asObject(await evaluateField(step.inputs, scope, step.id), step.id, "inputs");
      checkStopped();
      return { outputs: call(step, childInputs) };
    }
    const items = itemsOf(await evaluateField(step.forEach, scope, step.id));
    const perItem: JsonObject[] = [];
    for (let index = 0; index < items.length; index++) {
      const itemScope: ExpressionScope = { inputs: scope.inputs, steps: scope.steps, item: items[index], index };
      perItem.push(asObject(await evaluateField(step.inputs, itemScope, step.id, index), step.id, "inputs", index));
    }
    checkStopped();
    return { outputs: Promise.all(perItem.map((childInputs) => call(step, childInputs))) };
  };

  try {
    for (const position of compiled.order) {
      const step = compiled.steps[position] as CompiledStep;
      if (step.deps.length > 0) await Promise.race([Promise.all(step.deps.map((d) => finished[d])), interrupted]);
      checkStopped();
      // A step sees only what it waits for, so nothing it reads can depend on timing.
      const steps: ExpressionScope["steps"] = {};
      for (const d of step.deps) steps[(compiled.steps[d] as CompiledStep).id] = { outputs: values[d] ?? null };
      const { outputs } = await start(step, { inputs, steps });
      finished[position] = outputs.then((v) => {
        values[position] = v;
      });
      finished[position].catch(interrupt);
    }
    await Promise.race([Promise.all(finished), interrupted]);
    checkStopped();
    const steps: ExpressionScope["steps"] = {};
    for (const step of compiled.steps) steps[step.id] = { outputs: values[step.index] ?? null };
    return asObject(await evaluateField(compiled.outputs, { inputs, steps }, undefined), undefined, "outputs");
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}
