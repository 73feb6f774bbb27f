/**
 * What an agent may still spend, and what it spent: the one place the agent reads the run's token and cost budgets
 * (`nodefabric.llm.max_tokens`, `budgets.max_cost`), the same way the planner does today (counted from its calls'
 * `usage` and `cost`, and passed to each `llm.chat` as its `budget`). When the coordinator reserves budgets for the
 * run, only this file changes.
 */
import type { CompositeContext, JsonObject } from "@nodefabric/sdk";
import { estimatePromptTokens, LLM_MAX_TOKENS_EXTENSION, type ChatInputs } from "../chat.js";

export interface AgentUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost: number;
  model_calls: number;
  tool_calls: number;
}

/** An agent's budgets and its usage so far. */
export class AgentBudget {
  readonly usage: AgentUsage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost: 0, model_calls: 0, tool_calls: 0 };
  private readonly tokenLimit?: number;
  private readonly costLimit?: number;

  constructor(ctx: CompositeContext) {
    const t = ctx.constraints?.extensions?.[LLM_MAX_TOKENS_EXTENSION];
    if (typeof t === "number") this.tokenLimit = t;
    const c = ctx.constraints?.budgets?.max_cost;
    if (typeof c === "number") this.costLimit = c;
  }

  /**
   * The `budget` of the next model call, or why it cannot be made: its reservation (prompt estimate plus
   * `max_output_tokens`) does not fit what is left. Undefined budget: none is set.
   */
  forCall(request: Pick<ChatInputs, "messages" | "tools" | "response_schema">, maxOut: number): { budget?: JsonObject; reserved: number; refused?: JsonObject } {
    const reserved = estimatePromptTokens(request) + maxOut;
    if (this.tokenLimit === undefined && this.costLimit === undefined) return { reserved };
    const budget: JsonObject = {};
    if (this.tokenLimit !== undefined) {
      const left = Math.max(0, this.tokenLimit - this.usage.total_tokens);
      budget.max_tokens = left;
      if (reserved > left) return { reserved, refused: { budget: LLM_MAX_TOKENS_EXTENSION, limit: this.tokenLimit, used: this.usage.total_tokens, reserved } };
    }
    if (this.costLimit !== undefined) {
      const left = Math.max(0, this.costLimit - this.usage.cost);
      budget.max_cost = left;
      if (left <= 0) return { reserved, refused: { budget: "max_cost", limit: this.costLimit, used: this.usage.cost } };
    }
    return { budget, reserved };
  }

  /** The budgets left, as the constraint envelope of a child agent or planner (only what is set). */
  remainingEnvelope(): { budgets?: { max_cost: number }; extensions?: Record<string, number> } {
    const out: { budgets?: { max_cost: number }; extensions?: Record<string, number> } = {};
    if (this.costLimit !== undefined) out.budgets = { max_cost: Math.max(0, this.costLimit - this.usage.cost) };
    if (this.tokenLimit !== undefined) out.extensions = { [LLM_MAX_TOKENS_EXTENSION]: Math.max(0, this.tokenLimit - this.usage.total_tokens) };
    return out;
  }

  /** Counts a model call's `usage` and `cost` (its outputs, or a failure's details). */
  settle(from: JsonObject | undefined): void {
    const usage = from?.usage as { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number } | undefined;
    if (usage) {
      this.usage.prompt_tokens += usage.prompt_tokens ?? 0;
      this.usage.completion_tokens += usage.completion_tokens ?? 0;
      this.usage.total_tokens += usage.total_tokens ?? 0;
    }
    if (typeof from?.cost === "number") this.usage.cost += from.cost;
  }

  /** Counts what a child agent or planner reported spending (its outputs' `usage`). */
  settleChild(usage: JsonObject | undefined): void {
    if (!usage) return;
    this.settle({ usage: { prompt_tokens: usage.prompt_tokens ?? 0, completion_tokens: usage.completion_tokens ?? 0, total_tokens: usage.total_tokens ?? 0 }, cost: usage.cost ?? 0 } as JsonObject);
    if (typeof usage.model_calls === "number") this.usage.model_calls += usage.model_calls;
  }
}
