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
 */
import { ChildFailedError, defineAtomic, defineComposite, HandlerError, type CandidateSet, type CompositeContext, type JsonObject, type JsonValue, type NodeTypeRef } from "@nodefabric/sdk";
import { defaultProfileName, endpointHostOf, estimatePromptTokens, LLM_MAX_TOKENS_EXTENSION, type ChatMessage, type ChatOutputs } from "./chat.js";
import { describeErrors, validatorOf } from "./structured.js";
import { fail } from "./failure-codes.js";

type Candidate = CandidateSet["candidates"][number];

const CHAT: NodeTypeRef = { node_type_id: "llm.chat", version: "1.0.0" };
export const PLAN_APPROVAL: NodeTypeRef = { node_type_id: "llm.plan-approval", version: "1.0.0" };
const PLANNER_ID = "llm.planner";
/** Node types a plan never runs as a subtask. */
const NEVER_CANDIDATES = new Set([CHAT.node_type_id, PLAN_APPROVAL.node_type_id]);

export interface PlannerInputs {
  goal?: string;
  prompt?: string;
  context?: JsonObject;
  max_steps?: number;
  max_depth?: number;
  repair_max?: number;
  max_replans?: number;
  max_candidates?: number;
  profile?: string;
  model?: string;
  max_output_tokens?: number;
  allowed_node_type_ids?: string[];
  require_approval?: boolean;
  mode?: "subtasks" | "plan";
}

interface Subtask {
  id: string;
  goal: string;
  after: string[];
}

interface ChildRecord {
  subtask_id: string;
  node_type_ref: NodeTypeRef;
  node_run_id: string;
  state: "completed" | "failed";
  outputs?: JsonObject;
  error?: JsonObject;
  recovery?: string;
}

/** Sorted-key JSON: the same value always gives the same text, whatever order its keys were built in. */
export function stableJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}

function refName(ref: NodeTypeRef): string {
  return `${ref.node_type_id}@${ref.version}`;
}

function boundError(message: string, details: Record<string, unknown>): HandlerError {
  return fail("planner_bound_exceeded", message, { retryable: false, details });
}

const PLAN_SCHEMA = {
  type: "object",
  properties: {
    subtasks: {
      type: "array",
      items: {
        type: "object",
        properties: {
          id: { type: "string", pattern: "^[A-Za-z0-9_-]{1,32}$" },
          goal: { type: "string", minLength: 1, maxLength: 2000 },
          after: { type: "array", items: { type: "string" } },
        },
        required: ["id", "goal", "after"],
        additionalProperties: false,
      },
    },
  },
  required: ["subtasks"],
  additionalProperties: false,
};

const EVALUATION_SCHEMA = {
  type: "object",
  properties: {
    summary: { type: "string", maxLength: 4000 },
    success: { type: "boolean" },
    recovery: {
      type: "array",
      items: {
        type: "object",
        properties: {
          subtask_id: { type: "string" },
          action: { enum: ["retry", "remap", "decompose_further", "ask_user", "abort"] },
          reason: { type: "string", maxLength: 1000 },
        },
        required: ["subtask_id", "action", "reason"],
        additionalProperties: false,
      },
    },
  },
  required: ["summary", "success", "recovery"],
  additionalProperties: false,
};

/** The checks a plan must pass beyond its schema; each problem is a line the model can act on. */
function planProblems(subtasks: Subtask[]): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const [i, s] of subtasks.entries()) {
    if (seen.has(s.id)) problems.push(`/subtasks/${i}/id: "${s.id}" is used twice`);
    for (const a of s.after) {
      if (a === s.id) problems.push(`/subtasks/${i}/after: a subtask cannot wait for itself`);
      // Only earlier subtasks: this also makes a cycle impossible.
      else if (!seen.has(a)) problems.push(`/subtasks/${i}/after: "${a}" is not the id of an earlier subtask`);
    }
    seen.add(s.id);
  }
  if (subtasks.length === 0) problems.push("/subtasks: the plan has no subtask");
  return problems;
}

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

class Planner {
  readonly modelCalls: Array<{ purpose: string; node_run_id: string; usage?: JsonValue; cost?: number }> = [];
  readonly usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost: 0, model_calls: 0 };
  private readonly tokenLimit?: number;
  private readonly costLimit?: number;
  readonly depth: number;
  readonly maxSteps: number;
  readonly repairMax: number;
  readonly maxOut: number;

  constructor(
    readonly inputs: PlannerInputs,
    readonly goal: string,
    readonly ctx: CompositeContext,
  ) {
    const t = ctx.constraints?.extensions?.[LLM_MAX_TOKENS_EXTENSION];
    if (typeof t === "number") this.tokenLimit = t;
    const c = ctx.constraints?.budgets?.max_cost;
    if (typeof c === "number") this.costLimit = c;
    this.depth = inputs.max_depth ?? 1;
    this.maxSteps = inputs.max_steps ?? 8;
    this.repairMax = inputs.repair_max ?? 1;
    this.maxOut = inputs.max_output_tokens ?? 1024;
  }

  /**
   * One model call as an `llm.chat` child, with the remaining token and cost budgets reserved by the child before it
   * sends anything; an answer that is not valid (the schema, or `check`) is repaired up to `repair_max` times, each
   * repair its own NodeRun with the validation errors in its prompt, then the planner fails `planner_invalid_output`.
   */
  async ask<T>(purpose: string, messages: ChatMessage[], schema: JsonObject, check?: (value: T) => string[]): Promise<T> {
    const conversation = [...messages];
    for (let attempt = 0; ; attempt++) {
      const inputs: JsonObject = {
        messages: conversation as unknown as JsonValue[],
        response_schema: schema,
        schema_name: purpose,
        temperature: 0,
        seed: 0,
        max_output_tokens: this.maxOut,
      };
      if (this.inputs.profile) inputs.profile = this.inputs.profile;
      if (this.inputs.model) inputs.model = this.inputs.model;
      const budget: JsonObject = {};
      if (this.tokenLimit !== undefined) budget.max_tokens = Math.max(0, this.tokenLimit - this.usage.total_tokens);
      if (this.costLimit !== undefined) budget.max_cost = Math.max(0, this.costLimit - this.usage.cost);
      if (Object.keys(budget).length > 0) {
        // Refused here too, so the reason names the planner's budget: the child would refuse it the same way.
        const reserve = estimatePromptTokens({ messages: conversation, response_schema: schema }) + this.maxOut;
        if (budget.max_tokens !== undefined && reserve > (budget.max_tokens as number)) {
          throw fail("budget_exceeded", `the planner's next model call (${purpose}) reserves ${reserve} tokens, and only ${String(budget.max_tokens)} of its token budget ${this.tokenLimit} remain; it was not sent`, {
            retryable: false,
            details: { budget: LLM_MAX_TOKENS_EXTENSION, limit: this.tokenLimit, used: this.usage.total_tokens, reserved: reserve, purpose },
          });
        }
        inputs.budget = budget;
      }
      // What the PDP sees of the call (as context.labels at node.run.create and node.run.execute): its purpose, profile,
      // model and the tokens it reserves.
      const labels: Record<string, string> = {
        "nodefabric.llm.purpose": purpose,
        "nodefabric.llm.profile": this.inputs.profile ?? defaultProfileName(),
        "nodefabric.llm.reserved_tokens": String(estimatePromptTokens({ messages: conversation, response_schema: schema }) + this.maxOut),
      };
      if (this.inputs.model) labels["nodefabric.llm.model"] = this.inputs.model;
      const host = endpointHostOf(labels["nodefabric.llm.profile"]);
      if (host) labels["nodefabric.llm.endpoint"] = host;
      const child = this.ctx.spawn(CHAT, inputs, { metadata: { labels } });
      const record: { purpose: string; node_run_id: string; usage?: JsonValue; cost?: number } = { purpose, node_run_id: "" };
      this.modelCalls.push(record);
      this.usage.model_calls++;
      let out: ChatOutputs;
      try {
        out = (await child.result) as unknown as ChatOutputs;
      } catch (err) {
        record.node_run_id = await child.node_run_id.catch(() => "");
        if (!ChildFailedError.is(err)) throw err;
        const e = err.error;
        this.settle(e.details as JsonObject | undefined);
        if (e.code === "llm_invalid_output") {
          const details = (e.details ?? {}) as { content?: string; errors?: string[] };
          if (attempt < this.repairMax) {
            conversation.push({ role: "assistant", content: details.content ?? "" }, repairMessage(details.errors ?? [e.message]));
            continue;
          }
          throw invalidOutput(purpose, details.errors ?? [e.message], attempt + 1);
        }
        // The model call's own failure (budget, auth, refusal, …) is the planner's, under the same code.
        throw new HandlerError(e.code, `the planner's model call (${purpose}) failed: ${e.message}`, { retryable: false, details: { purpose, node_run_id: err.node_run_id, error: e as unknown as JsonObject } });
      }
      record.node_run_id = await child.node_run_id;
      record.usage = out.usage as unknown as JsonValue;
      record.cost = out.cost;
      this.settle(out as unknown as JsonObject);
      const value = out.parsed as T;
      const problems = check ? check(value) : [];
      if (problems.length === 0) return value;
      if (attempt < this.repairMax) {
        conversation.push({ role: "assistant", content: out.content ?? JSON.stringify(out.parsed) }, repairMessage(problems));
        continue;
      }
      throw invalidOutput(purpose, problems, attempt + 1);
    }
  }

  /** The budgets left to this planner, as the envelope of a child planner (only what is set). */
  remainingEnvelope(): { budgets?: { max_cost: number }; extensions?: Record<string, number> } {
    const out: { budgets?: { max_cost: number }; extensions?: Record<string, number> } = {};
    if (this.costLimit !== undefined) out.budgets = { max_cost: Math.max(0, this.costLimit - this.usage.cost) };
    if (this.tokenLimit !== undefined) out.extensions = { [LLM_MAX_TOKENS_EXTENSION]: Math.max(0, this.tokenLimit - this.usage.total_tokens) };
    return out;
  }

  /** Counts what a child planner reported spending (its outputs' `usage`). */
  settleFrom(usage: JsonObject | undefined): void {
    if (!usage) return;
    this.settle({ usage: { prompt_tokens: usage.prompt_tokens ?? 0, completion_tokens: usage.completion_tokens ?? 0, total_tokens: usage.total_tokens ?? 0 }, cost: usage.cost ?? 0 } as JsonObject);
    this.usage.model_calls += typeof usage.model_calls === "number" ? usage.model_calls : 0;
  }

  private settle(from: JsonObject | undefined): void {
    const usage = from?.usage as { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number } | undefined;
    if (usage) {
      this.usage.prompt_tokens += usage.prompt_tokens ?? 0;
      this.usage.completion_tokens += usage.completion_tokens ?? 0;
      this.usage.total_tokens += usage.total_tokens ?? 0;
    }
    if (typeof from?.cost === "number") this.usage.cost += from.cost;
  }
}

function repairMessage(errors: string[]): ChatMessage {
  return { role: "user", content: `Your answer was not valid. Fix these problems and answer again, with the whole answer:\n${errors.map((e) => `- ${e}`).join("\n")}` };
}

function invalidOutput(purpose: string, errors: string[], calls: number): HandlerError {
  return fail("planner_invalid_output", `the model's ${purpose} answer was still invalid after ${calls} call${calls === 1 ? "" : "s"}: ${errors.slice(0, 3).join("; ")}`, {
    retryable: false,
    details: { purpose, errors, calls },
  });
}

function system(text: string): ChatMessage {
  return { role: "system", content: text };
}

function user(value: unknown): ChatMessage {
  return { role: "user", content: stableJson(value) };
}

async function runPlanner(inputs: PlannerInputs, ctx: CompositeContext): Promise<JsonObject> {
  const goal = inputs.goal ?? inputs.prompt;
  if (!goal) throw fail("invalid_inputs", "llm.planner needs a goal (or prompt)", { retryable: false, details: { field: "goal" } });
  const p = new Planner(inputs, goal, ctx);
  if (inputs.mode === "plan") return runDeclarative(p, inputs, goal, ctx);
  const structural = ctx.constraints?.structural;

  // ---------------------------------------------------------------- plan
  const plan = await p.ask<{ subtasks: Subtask[] }>(
    "plan",
    [
      system(
        "You are a planner. Split the user's goal into the fewest subtasks that reach it, each one a single action a tool can do. " +
          `Use at most ${p.maxSteps} subtasks. Give each an id, a goal phrased so a tool catalogue search finds the right tool, ` +
          "and in `after` the ids of earlier subtasks whose results it needs (empty when it needs none; subtasks that need nothing from each other run in parallel).",
      ),
      user({ goal, context: inputs.context ?? {}, max_steps: p.maxSteps }),
    ],
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
    const usable = set.candidates.filter(
      (c) => !NEVER_CANDIDATES.has(c.node_type_ref.node_type_id) && (c.node_type_ref.node_type_id !== PLANNER_ID || p.depth > 0),
    );
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
      [
        system("Choose the one tool that best does the subtask. Answer with its name exactly as listed."),
        user({
          goal,
          subtask: s,
          tools: usable.map((c) => ({ name: refName(c.node_type_ref), description: c.extensions?.["nodefabric.description"] ?? "", side_effect_class: c.constraints?.gates?.side_effect_class ?? "unknown" })),
        }),
      ],
      { type: "object", properties: { choice: { enum: names }, reason: { type: "string", maxLength: 500 } }, required: ["choice"], additionalProperties: false },
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
      [
        system(
          "Judge whether the subtasks' results reach the goal. Summarize the outcome for the user. For each failed subtask you may ask for one recovery: " +
            "retry (run it again), remap (another tool), decompose_further (plan it as its own goal), ask_user (a person decides) or abort.",
        ),
        user({ goal, subtasks: subtasks.map((s) => ({ ...s, result: results.get(s.id) ?? null })) }),
      ],
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

/** The candidates a planner may run: Selection's set, without llm.chat and llm.plan-approval, and llm.planner only with depth left. */
function usableCandidates(p: Planner, candidates: Candidate[]): Candidate[] {
  return candidates.filter((c) => !NEVER_CANDIDATES.has(c.node_type_ref.node_type_id) && (c.node_type_ref.node_type_id !== PLANNER_ID || p.depth > 0));
}

function sideEffectOf(c: Candidate | undefined): string {
  return (c?.constraints?.gates?.side_effect_class as string | undefined) ?? "unknown";
}

/** Waits for one approval of what a plan will run; a rejection ends the planner `approval_rejected`, with the reason. */
async function approvePlan(ctx: CompositeContext, goal: string, steps: Array<{ id: string; goal: string; after: string[]; node_type: string; side_effect_class: string }>): Promise<void> {
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

interface DeclarativeStep {
  id: string;
  node_type_ref: NodeTypeRef;
  inputs?: JsonValue;
  when?: JsonValue;
  for_each?: JsonValue;
  after?: string[];
}

/**
 * Plans as data: the model answers a declarative plan (the format of `extensions["nodefabric.plan"]`: steps with
 * `after`, `when`, `for_each` and JSONata references to `inputs` and earlier `steps.<id>.outputs`), choosing node
 * types only from Selection's candidate set. The fabric's own plan compiler checks it before anything runs (its
 * problems go back to the model as a repair), and its runner runs it, independent steps in parallel, each step a
 * child of this planner. The plan's `inputs` are `{ goal, context }`.
 */
async function runDeclarative(p: Planner, inputs: PlannerInputs, goal: string, ctx: CompositeContext): Promise<JsonObject> {
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
  const schema: JsonObject = {
    type: "object",
    properties: {
      steps: {
        type: "array",
        items: {
          type: "object",
          properties: {
            id: { type: "string", pattern: "^[A-Za-z_][A-Za-z0-9_]{0,63}$" },
            node_type_ref: {
              type: "object",
              properties: { node_type_id: { enum: [...new Set(usable.map((c) => c.node_type_ref.node_type_id))] }, version: { type: "string" } },
              required: ["node_type_id", "version"],
              additionalProperties: false,
            },
            inputs: {},
            when: {},
            for_each: {},
            after: { type: "array", items: { type: "string" } },
          },
          required: ["id", "node_type_ref"],
          additionalProperties: false,
        },
      },
      outputs: {},
    },
    required: ["steps", "outputs"],
    additionalProperties: false,
  };
  const plan = await p.ask<{ steps: DeclarativeStep[]; outputs: JsonValue }>(
    "plan",
    [
      system(
        "You are a planner. Answer a declarative plan that reaches the user's goal with the listed tools only: `steps`, each with an `id`, a " +
          "`node_type_ref` ({ node_type_id, version } of a listed tool), `inputs` valid under the tool's input schema, and optionally `after` (ids of " +
          "steps it must wait for), `when` (a condition) and `for_each` (an array to fan out over, the item as `item`); then `outputs`. Values may be " +
          'JSONata expressions written "{% … %}" that read `inputs.goal`, `inputs.context` and `steps.<id>.outputs`. Steps that do not refer to each ' +
          `other run in parallel. Use at most ${p.maxSteps} steps.`,
      ),
      user({
        goal,
        context: inputs.context ?? {},
        max_steps: p.maxSteps,
        tools: usable.map((c) => ({ name: refName(c.node_type_ref), description: c.extensions?.["nodefabric.description"] ?? "", side_effect_class: sideEffectOf(c), input_schema: c.extensions?.["nodefabric.input_schema"] ?? {} })),
      }),
    ],
    schema,
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
    [system("Judge whether the plan's result reaches the goal, and summarize the outcome for the user. Leave `recovery` empty."), user({ goal, outputs: outputs ?? null, failure: failure ?? null })],
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

async function mapInputs(p: Planner, goal: string, s: Subtask, ref: NodeTypeRef, schema: JsonObject, earlier: Record<string, unknown>): Promise<JsonObject> {
  const props = schema.properties as JsonObject | undefined;
  // A node type that takes nothing needs no model call.
  if (schema.type === "object" && props && Object.keys(props).length === 0) return {};
  const validate = validatorOf(schema);
  const out = await p.ask<JsonObject>(
    "inputs",
    [
      system(`Write the inputs of the tool ${refName(ref)} for the subtask, as one JSON object valid under the tool's input schema. Use the results of earlier subtasks where they help.`),
      user({ goal, subtask: s, earlier_results: earlier, input_schema: schema }),
    ],
    schema.type === "object" ? schema : { type: "object" },
    (v) => (validate(v) ? [] : describeErrors(validate.errors)),
  );
  return out;
}

/** A child planner's inputs: never more depth, steps or repairs than its parent has left, whatever the model wrote. */
function clampChildPlanner(generated: JsonObject, p: Planner, parent: PlannerInputs): JsonObject {
  const out: JsonObject = { ...generated };
  const remaining = p.depth - 1;
  const asked = (k: string, limit: number) => (typeof generated[k] === "number" ? Math.min(generated[k] as number, limit) : limit);
  out.max_depth = Math.max(0, asked("max_depth", remaining));
  out.max_steps = Math.max(1, asked("max_steps", p.maxSteps));
  out.repair_max = Math.max(0, asked("repair_max", p.repairMax));
  out.max_replans = Math.max(0, asked("max_replans", parent.max_replans ?? 1));
  if (parent.require_approval) out.require_approval = true;
  if (parent.profile) out.profile = parent.profile;
  else delete out.profile;
  if (parent.model) out.model = parent.model;
  else delete out.model;
  if (parent.allowed_node_type_ids) {
    const asked = Array.isArray(generated.allowed_node_type_ids) ? (generated.allowed_node_type_ids as string[]) : parent.allowed_node_type_ids;
    out.allowed_node_type_ids = asked.filter((id) => parent.allowed_node_type_ids!.includes(id));
  }
  return out;
}

async function spawnSubtask(p: Planner, s: Subtask, ref: NodeTypeRef, inputs: JsonObject): Promise<ChildRecord> {
  const ctx = p.ctx;
  // A child planner may spend only what this one has left when it starts (its envelope's budgets only shrink), and
  // what it spent counts here once it ends.
  const isPlanner = ref.node_type_id === PLANNER_ID;
  const child = ctx.spawn(ref, inputs, { metadata: { labels: { "nodefabric.llm.subtask": s.id } }, ...(isPlanner ? { constraints: p.remainingEnvelope() } : {}) });
  try {
    const outputs = await child.result;
    if (isPlanner) p.settleFrom(outputs.usage as JsonObject | undefined);
    return { subtask_id: s.id, node_type_ref: ref, node_run_id: await child.node_run_id, state: "completed", outputs };
  } catch (err) {
    if (!ChildFailedError.is(err)) throw err;
    return { subtask_id: s.id, node_type_ref: ref, node_run_id: err.node_run_id, state: "failed", error: err.error as unknown as JsonObject };
  }
}

function skipped(s: Subtask, ref: NodeTypeRef, dep: string): ChildRecord {
  return { subtask_id: s.id, node_type_ref: ref, node_run_id: "", state: "failed", error: { code: "dependency_failed", message: `subtask "${dep}" it needs did not complete` } };
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
