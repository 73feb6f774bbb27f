/**
 * The planner's prompts. Each is a pure function of the goal, the plan and earlier children's outputs (sorted-key
 * JSON, no clock, no randomness), so a replay after a crash sends the same text and gets the stored answers back.
 */
import type { JsonObject, NodeTypeRef } from "@nodefabric/sdk";
import type { ChatMessage } from "../chat.js";
import { refName, sideEffectOf, type Candidate } from "./candidates.js";
import type { ChildRecord, Subtask } from "./plan-schemas.js";

/** Sorted-key JSON: the same value always gives the same text, whatever order its keys were built in. */
export function stableJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}

/** What the model is told when its answer was not valid, before it answers again. */
export function repairMessage(errors: string[]): ChatMessage {
  return { role: "user", content: `Your answer was not valid. Fix these problems and answer again, with the whole answer:\n${errors.map((e) => `- ${e}`).join("\n")}` };
}

function system(text: string): ChatMessage {
  return { role: "system", content: text };
}

function user(value: unknown): ChatMessage {
  return { role: "user", content: stableJson(value) };
}

/** Subtask mode's plan: the goal split into at most `maxSteps` subtasks. */
export function planPrompt(goal: string, context: JsonObject, maxSteps: number): ChatMessage[] {
  return [
    system(
      "You are a planner. Split the user's goal into the fewest subtasks that reach it, each one a single action a tool can do. " +
        `Use at most ${maxSteps} subtasks. Give each an id, a goal phrased so a tool catalogue search finds the right tool, ` +
        "and in `after` the ids of earlier subtasks whose results it needs (empty when it needs none; subtasks that need nothing from each other run in parallel).",
    ),
    user({ goal, context, max_steps: maxSteps }),
  ];
}

/** The choice of one node type for a subtask, among its usable candidates. */
export function choosePrompt(goal: string, subtask: Subtask, usable: Candidate[]): ChatMessage[] {
  return [
    system("Choose the one tool that best does the subtask. Answer with its name exactly as listed."),
    user({
      goal,
      subtask,
      tools: usable.map((c) => ({ name: refName(c.node_type_ref), description: c.extensions?.["nodefabric.description"] ?? "", side_effect_class: c.constraints?.gates?.side_effect_class ?? "unknown" })),
    }),
  ];
}

/** A subtask's inputs for the node type chosen, valid under its input schema, from the results it waited for. */
export function inputsPrompt(goal: string, subtask: Subtask, ref: NodeTypeRef, schema: JsonObject, earlier: Record<string, unknown>): ChatMessage[] {
  return [
    system(`Write the inputs of the tool ${refName(ref)} for the subtask, as one JSON object valid under the tool's input schema. Use the results of earlier subtasks where they help.`),
    user({ goal, subtask, earlier_results: earlier, input_schema: schema }),
  ];
}

/** Subtask mode's evaluation: whether the results reach the goal, and a recovery per failed subtask. */
export function evaluatePrompt(goal: string, subtasks: Subtask[], results: ReadonlyMap<string, ChildRecord>): ChatMessage[] {
  return [
    system(
      "Judge whether the subtasks' results reach the goal. Summarize the outcome for the user. For each failed subtask you may ask for one recovery: " +
        "retry (run it again), remap (another tool), decompose_further (plan it as its own goal), ask_user (a person decides) or abort.",
    ),
    user({ goal, subtasks: subtasks.map((s) => ({ ...s, result: results.get(s.id) ?? null })) }),
  ];
}

/** Mode "plan": a declarative plan over the listed tools only. */
export function declarativePlanPrompt(goal: string, context: JsonObject, maxSteps: number, usable: Candidate[]): ChatMessage[] {
  return [
    system(
      "You are a planner. Answer a declarative plan that reaches the user's goal with the listed tools only: `steps`, each with an `id`, a " +
        "`node_type_ref` ({ node_type_id, version } of a listed tool), `inputs` valid under the tool's input schema, and optionally `after` (ids of " +
        "steps it must wait for), `when` (a condition) and `for_each` (an array to fan out over, the item as `item`); then `outputs`. Values may be " +
        'JSONata expressions written "{% … %}" that read `inputs.goal`, `inputs.context` and `steps.<id>.outputs`. Steps that do not refer to each ' +
        `other run in parallel. Use at most ${maxSteps} steps.`,
    ),
    user({
      goal,
      context,
      max_steps: maxSteps,
      tools: usable.map((c) => ({ name: refName(c.node_type_ref), description: c.extensions?.["nodefabric.description"] ?? "", side_effect_class: sideEffectOf(c), input_schema: c.extensions?.["nodefabric.input_schema"] ?? {} })),
    }),
  ];
}

/** Mode "plan"'s evaluation: whether the plan's outputs (or its failure) reach the goal. */
export function declarativeEvaluatePrompt(goal: string, outputs: JsonObject | undefined, failure: JsonObject | undefined): ChatMessage[] {
  return [system("Judge whether the plan's result reaches the goal, and summarize the outcome for the user. Leave `recovery` empty."), user({ goal, outputs: outputs ?? null, failure: failure ?? null })];
}
