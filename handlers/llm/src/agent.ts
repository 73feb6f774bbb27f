/**
 * `llm.agent@1.0.0`: the tool-calling loop as a durable composite. A model is given tools (node types, decided by the
 * PDP before it sees them), calls some, reads their results and calls again, until it answers, or a bound or the
 * budget ends the loop (docs/llm.md, "llm.agent").
 *
 * Every model call is an `llm.chat` child NodeRun with the tools as function definitions; every tool call is a child
 * NodeRun of the tool's node type with the model's arguments (validated first) as its inputs. Children are made in an
 * order that depends only on the inputs and on earlier children's outputs, with messages that are pure functions of
 * them, so a replay after a crash gets each stored answer back through the child's idempotency key: no model call and
 * no tool call that completed is made again.
 *
 * The parts, in agent/: its inputs and outputs (agent-schemas.ts), the tools and their names (tools.ts), a turn's tool
 * calls (tool-calls.ts) and the budgets (budget.ts).
 */
import { ChildFailedError, defineComposite, HandlerError, type CompositeContext, type JsonObject, type JsonValue } from "@nodefabric/sdk";
import { defaultProfileName, endpointHostOf, type ChatMessage, type ChatOutputs } from "./chat.js";
import { fail } from "./failure-codes.js";
import { CHAT } from "./planner/candidates.js";
import { stableJson } from "./planner/prompts.js";
import { describeErrors, parseJsonAnswer, validatorOf } from "./structured.js";
import { AGENT_INPUT_SCHEMA, AGENT_OUTPUT_SCHEMA, CEILINGS, DEFAULTS, type AgentInputs, type EndedBy, type StepRecord } from "./agent/agent-schemas.js";
import { AgentBudget } from "./agent/budget.js";
import { runToolCalls, toolMessage } from "./agent/tool-calls.js";
import { AGENT_ID, functionOf, resolveTools } from "./agent/tools.js";

export type { AgentInputs } from "./agent/agent-schemas.js";
export { functionNameOf } from "./agent/tools.js";

const DEFAULT_INSTRUCTIONS = "You are a helpful agent. Use the tools when they help; when you have what you need, answer the user.";

/** The text the loop's tools are found by when named by pattern: the goal, or the conversation's last user message. */
function goalOf(inputs: AgentInputs): string {
  if (inputs.goal) return inputs.goal;
  const last = [...(inputs.messages ?? [])].reverse().find((m) => m.role === "user");
  return typeof last?.content === "string" ? last.content.slice(0, 2000) : "";
}

/** One model call of the agent, as an `llm.chat` child; a budget it cannot fit ends the loop ("budget"). */
class ModelCalls {
  constructor(
    private readonly ctx: CompositeContext,
    private readonly inputs: AgentInputs,
    private readonly budget: AgentBudget,
    private readonly maxOut: number,
  ) {}

  async call(purpose: string, messages: ChatMessage[], extra: { tools?: JsonObject[]; response_schema?: JsonObject }): Promise<{ out: ChatOutputs; node_run_id: string } | { budget: JsonObject }> {
    const request: JsonObject = { messages: messages as unknown as JsonValue[], max_output_tokens: this.maxOut, temperature: this.inputs.temperature ?? 0, seed: 0 };
    if (extra.tools && extra.tools.length > 0) request.tools = extra.tools;
    if (extra.response_schema) {
      request.response_schema = extra.response_schema;
      request.schema_name = "final_answer";
    }
    if (this.inputs.profile) request.profile = this.inputs.profile;
    if (this.inputs.model) request.model = this.inputs.model;
    const b = this.budget.forCall({ messages, tools: extra.tools as never, response_schema: extra.response_schema }, this.maxOut);
    if (b.refused) return { budget: b.refused };
    if (b.budget) request.budget = b.budget;
    // What the PDP sees of the call (context.labels), as for the planner's calls.
    const profile = this.inputs.profile ?? defaultProfileName();
    const labels: Record<string, string> = { "nodefabric.llm.purpose": purpose, "nodefabric.llm.profile": profile, "nodefabric.llm.reserved_tokens": String(b.reserved) };
    if (this.inputs.model) labels["nodefabric.llm.model"] = this.inputs.model;
    const host = endpointHostOf(profile);
    if (host) labels["nodefabric.llm.endpoint"] = host;
    const child = this.ctx.spawn(CHAT, request, { metadata: { labels } });
    this.budget.usage.model_calls++;
    try {
      const out = (await child.result) as unknown as ChatOutputs;
      this.budget.settle(out as unknown as JsonObject);
      return { out, node_run_id: await child.node_run_id };
    } catch (err) {
      if (!ChildFailedError.is(err)) throw err;
      const e = err.error;
      this.budget.settle(e.details as JsonObject | undefined);
      if (e.code === "budget_exhausted") {
        // The run refused the call before it was sent (docs/llm.md, "Budgets the run keeps"): it was not a model call.
        this.budget.usage.model_calls--;
        return { budget: { ...((e.details as JsonObject | undefined) ?? {}), node_run_id: err.node_run_id } };
      }
      if (e.code === "budget_exceeded") return { budget: { ...((e.details as JsonObject | undefined) ?? {}), node_run_id: err.node_run_id } };
      // The model call's own failure (auth, refusal, policy, …) is the agent's, under the same code.
      throw new HandlerError(e.code, `the agent's model call (${purpose}) failed: ${e.message}`, { retryable: false, details: { purpose, node_run_id: err.node_run_id, error: e as unknown as JsonObject } });
    }
  }
}

async function runAgent(inputs: AgentInputs, ctx: CompositeContext): Promise<JsonObject> {
  if (!inputs.goal && !(inputs.messages && inputs.messages.length > 0)) {
    throw fail("invalid_inputs", "llm.agent needs a goal or messages", { retryable: false, details: { field: "goal" } });
  }
  const maxTurns = Math.min(inputs.max_turns ?? DEFAULTS.max_turns, CEILINGS.max_turns);
  const maxToolCalls = Math.min(inputs.max_tool_calls ?? DEFAULTS.max_tool_calls, CEILINGS.max_tool_calls);
  const maxParallel = Math.min(inputs.max_parallel_tool_calls ?? DEFAULTS.max_parallel_tool_calls, CEILINGS.max_parallel_tool_calls);
  const outputSchema = inputs.output_schema;
  const validateOutput = outputSchema ? validatorOf(outputSchema) : undefined;

  // The PDP decides each tool (with the run's lists and gate) before the model sees it.
  const toolbox = await resolveTools(ctx, inputs.tools ?? [], goalOf(inputs), maxTurns > 1);
  const functions = toolbox.tools.map((t) => functionOf(t) as unknown as JsonObject);
  const budget = new AgentBudget(ctx);
  const model = new ModelCalls(ctx, inputs, budget, inputs.max_output_tokens ?? DEFAULTS.max_output_tokens);

  const conversation: ChatMessage[] = [{ role: "system", content: inputs.instructions ?? DEFAULT_INSTRUCTIONS }];
  if (inputs.messages && inputs.messages.length > 0) conversation.push(...inputs.messages);
  else conversation.push({ role: "user", content: inputs.goal! });
  const steps: StepRecord[] = [];
  let toolCallsUsed = 0;
  let endedBy: EndedBy | undefined;
  let answer: string | null = null;
  let parsed: JsonValue | undefined;
  let budgetDetails: JsonObject | undefined;

  for (let turn = 1; endedBy === undefined; turn++) {
    if (turn > maxTurns) {
      endedBy = "max_turns";
      break;
    }
    const r = await model.call("agent", conversation, { tools: functions });
    if ("budget" in r) {
      endedBy = "budget";
      budgetDetails = r.budget;
      break;
    }
    const { out } = r;
    const step: StepRecord = { turn, model_call: r.node_run_id, content: out.content, tool_calls: [] };
    steps.push(step);
    if (out.tool_calls.length === 0) {
      answer = out.content;
      endedBy = "final";
      break;
    }
    conversation.push({
      role: "assistant",
      content: out.content,
      tool_calls: out.tool_calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } })),
    });
    const records = await runToolCalls({ ctx, inputs, toolbox, budget, turn, turnsLeft: maxTurns - turn, toolCallsLeft: maxToolCalls - toolCallsUsed, maxParallel }, out.tool_calls);
    toolCallsUsed += records.filter((x) => x.error?.code !== "max_tool_calls").length;
    budget.usage.tool_calls = toolCallsUsed;
    step.tool_calls = records;
    conversation.push(...records.map(toolMessage));
    if (records.some((x) => x.error?.code === "max_tool_calls")) endedBy = "max_tool_calls";
  }

  // A structured final answer: the model's text when it already is one, else one more call that must answer under the schema.
  if (endedBy === "final" && outputSchema && validateOutput) {
    const direct = answer ? parseJsonAnswer(answer) : undefined;
    if (direct?.ok && validateOutput(direct.value)) {
      parsed = direct.value as JsonValue;
    } else {
      const messages: ChatMessage[] = [
        ...conversation,
        { role: "assistant", content: answer ?? "" },
        { role: "user", content: "Give your final answer now as one JSON object valid under the schema you are given, and nothing else." },
      ];
      const r = await model.call("final_answer", messages, { response_schema: outputSchema });
      if ("budget" in r) {
        endedBy = "budget";
        budgetDetails = r.budget;
      } else if (!validateOutput(r.out.parsed)) {
        throw fail("agent_invalid_output", `the agent's final answer does not match output_schema: ${describeErrors(validateOutput.errors).slice(0, 3).join("; ")}`, { retryable: false, details: { errors: describeErrors(validateOutput.errors) } });
      } else {
        parsed = r.out.parsed as JsonValue;
        answer = r.out.content ?? stableJson(parsed);
      }
    }
  }
  budget.usage.tool_calls = toolCallsUsed;

  const json = <T>(v: T) => JSON.parse(JSON.stringify(v)) as JsonValue;
  return {
    answer,
    ...(parsed !== undefined ? { parsed } : {}),
    ended_by: endedBy!,
    ...(budgetDetails ? { budget: budgetDetails } : {}),
    steps: json(steps),
    messages: json(conversation.slice(1)),
    tools: toolbox.tools.map((t) => ({ name: t.name, node_type_ref: t.node_type_ref as unknown as JsonObject, side_effect_class: t.side_effect_class })),
    ...(toolbox.refused.length > 0 ? { tools_refused: toolbox.refused } : {}),
    usage: json(budget.usage),
  };
}

/** `llm.agent@1.0.0`. */
export const llmAgent = defineComposite<AgentInputs, JsonObject>({
  nodeType: {
    node_type_id: AGENT_ID,
    version: "1.0.0",
    description:
      "LLM agent: a model given tools (node types the PDP allows) calls them, reads their results and calls again until it answers. " +
      "Every model call is an llm.chat child NodeRun and every tool call a child NodeRun of its node type, its arguments validated first; " +
      "bounded by max_turns, max_tool_calls and the run's budgets; durable across crashes; another agent can be a tool, with smaller bounds.",
    input_schema: AGENT_INPUT_SCHEMA,
    output_schema: { ...AGENT_OUTPUT_SCHEMA, properties: { ...(AGENT_OUTPUT_SCHEMA.properties as JsonObject), budget: { type: "object" } } },
  },
  run: runAgent,
});
