/**
 * What an agent spent, and what its next model call reserves. The budgets themselves (`nodefabric.llm.max_tokens`,
 * `budgets.max_cost`) are the run's: the coordinator reserves each model call from what the run has left before it is
 * sent, and refuses one that does not fit with `budget_exhausted` (docs/llm.md, "Budgets the run keeps"). So an agent
 * hands no call, and no child agent or planner, a copy of what it had left: agents side by side cannot together spend
 * more than the run has.
 */
import type { CompositeContext, JsonObject } from "@nodefabric/sdk";
import { estimatePromptTokens, type ChatInputs } from "../chat.js";

export interface AgentUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost: number;
  model_calls: number;
  tool_calls: number;
}

/** An agent's usage so far, and the size of its next call. */
export class AgentBudget {
  readonly usage: AgentUsage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost: 0, model_calls: 0, tool_calls: 0 };

  constructor(_ctx: CompositeContext) {}

  /**
   * What the next model call reserves (prompt estimate plus `max_output_tokens`), for the labels a policy reads. The
   * run decides whether it fits; nothing is refused here, and no `budget` is passed.
   */
  forCall(request: Pick<ChatInputs, "messages" | "tools" | "response_schema">, maxOut: number): { budget?: JsonObject; reserved: number; refused?: JsonObject } {
    return { reserved: estimatePromptTokens(request) + maxOut };
  }

  /** The budgets of a child agent or planner's envelope: none of its own, it spends from the run's. */
  remainingEnvelope(): { budgets?: { max_cost: number }; extensions?: Record<string, number> } {
    return {};
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
