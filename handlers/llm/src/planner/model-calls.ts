/**
 * The planner's model calls and what they cost. Each call is an `llm.chat` child NodeRun; the run reserves what it may
 * spend from the run's own budgets before it is sent (the coordinator's reservations, docs/llm.md "Budgets the run
 * keeps"), so the planner hands no call, and no child planner, a budget of its own to overspend in parallel. An
 * answer that is not valid goes back to the model with its errors, up to `repair_max` times. Every call and its usage
 * is recorded for the planner's outputs.
 */
import { ChildFailedError, HandlerError, type CompositeContext, type JsonObject, type JsonValue } from "@nodefabric/sdk";
import { defaultProfileName, endpointHostOf, estimatePromptTokens, type ChatMessage, type ChatOutputs } from "../chat.js";
import { fail } from "../failure-codes.js";
import { CHAT } from "./candidates.js";
import type { PlannerInputs } from "./plan-schemas.js";
import { repairMessage } from "./prompts.js";

/** One planner's state across its model calls: its bounds, the calls made, and the usage and cost so far. */
export class Planner {
  readonly modelCalls: Array<{ purpose: string; node_run_id: string; usage?: JsonValue; cost?: number }> = [];
  readonly usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost: 0, model_calls: 0 };
  readonly depth: number;
  readonly maxSteps: number;
  readonly repairMax: number;
  readonly maxOut: number;

  constructor(
    readonly inputs: PlannerInputs,
    readonly goal: string,
    readonly ctx: CompositeContext,
  ) {
    this.depth = inputs.max_depth ?? 1;
    this.maxSteps = inputs.max_steps ?? 8;
    this.repairMax = inputs.repair_max ?? 1;
    this.maxOut = inputs.max_output_tokens ?? 1024;
  }

  /**
   * One model call as an `llm.chat` child, whose prompt and output limit the run reserves before it is sent (a call
   * that does not fit what the run has left fails `budget_exhausted`, and so does the planner); an answer that is not
   * valid (the schema, or `check`) is repaired up to `repair_max` times, each repair its own NodeRun with the
   * validation errors in its prompt, then the planner fails `planner_invalid_output`.
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
        // A call the run refused before sending it (budget_exhausted) was not a model call.
        if (e.code === "budget_exhausted") this.usage.model_calls--;
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

function invalidOutput(purpose: string, errors: string[], calls: number): HandlerError {
  return fail("planner_invalid_output", `the model's ${purpose} answer was still invalid after ${calls} call${calls === 1 ? "" : "s"}: ${errors.slice(0, 3).join("; ")}`, {
    retryable: false,
    details: { purpose, errors, calls },
  });
}
