/**
 * The tool calls of one turn. Each call the model makes is looked up in the agent's table of tools (an unknown name is
 * refused), its arguments parsed and validated against the node type's `input_schema` (bad ones are refused), and
 * only then run as a child NodeRun of that node type, with the arguments as its inputs. Those that run, run in
 * parallel, at most `max_parallel_tool_calls` at once, started in the model's order (so each gets the same call index,
 * and idempotency key, in a replay). Whatever happened to a call goes back to the model as the tool's message: its
 * outputs, or an error naming why (refused, failed, denied by the PDP, rejected by a person).
 */
import { ChildFailedError, HandlerError, type JsonObject, type JsonValue } from "@nodefabric/sdk";
import type { ChatMessage, ChatOutputs } from "../chat.js";
import { refName } from "../planner/candidates.js";
import { stableJson } from "../planner/prompts.js";
import { describeErrors, parseJsonAnswer, validatorOf } from "../structured.js";
import type { AgentInputs, ToolCallRecord } from "./agent-schemas.js";
import type { AgentBudget } from "./budget.js";
import { AGENT_ID, type Tool, type Toolbox } from "./tools.js";

/** Longest tool result given back to the model, in characters (the rest is cut, and the cut is said). */
const MAX_RESULT_CHARS = 16_000;

/** What running a turn's tool calls needs of the agent. */
export interface TurnContext {
  ctx: import("@nodefabric/sdk").CompositeContext;
  inputs: AgentInputs;
  toolbox: Toolbox;
  budget: AgentBudget;
  turn: number;
  /** Model calls the agent has left after this turn's. */
  turnsLeft: number;
  /** Tool calls the agent may still make (before this turn's). */
  toolCallsLeft: number;
  maxParallel: number;
}

function refusal(call: ChatOutputs["tool_calls"][number], code: string, message: string, extra: Partial<ToolCallRecord> = {}): ToolCallRecord {
  return { id: call.id, name: call.name, state: "refused", error: { code, message }, ...extra };
}

/** A child agent's inputs: bounds at most what this one has left, its tools within this one's, its profile and model. */
export function clampChildAgent(args: JsonObject, t: TurnContext, callsLeft: number): JsonObject {
  const out: JsonObject = { ...args };
  const at = (k: string, limit: number) => (typeof args[k] === "number" ? Math.min(args[k] as number, limit) : limit);
  out.max_turns = Math.max(1, at("max_turns", t.turnsLeft));
  out.max_tool_calls = Math.max(0, at("max_tool_calls", callsLeft));
  out.max_parallel_tool_calls = Math.max(1, at("max_parallel_tool_calls", t.maxParallel));
  const own = t.toolbox.tools.map((x) => refName(x.node_type_ref));
  const asked = Array.isArray(args.tools) ? (args.tools as JsonValue[]).filter((s): s is string => typeof s === "string") : undefined;
  out.tools = asked ? own.filter((r) => asked.includes(r) || asked.includes(r.slice(0, r.lastIndexOf("@")))) : own;
  if (t.inputs.profile) out.profile = t.inputs.profile;
  else delete out.profile;
  if (t.inputs.model) out.model = t.inputs.model;
  else delete out.model;
  return out;
}

/** Runs the model's tool calls of one turn; answers a record of each, in the model's order. */
export async function runToolCalls(t: TurnContext, calls: ChatOutputs["tool_calls"]): Promise<ToolCallRecord[]> {
  const records: ToolCallRecord[] = [];
  const toRun: Array<{ index: number; tool: Tool; args: JsonObject }> = [];
  let left = t.toolCallsLeft;
  for (const call of calls) {
    if (left <= 0) {
      records.push(refusal(call, "max_tool_calls", "not run: the agent has used its max_tool_calls"));
      continue;
    }
    left--;
    const tool = t.toolbox.byName.get(call.name);
    if (!tool) {
      records.push(refusal(call, "unknown_tool", `there is no tool named "${call.name.slice(0, 100)}"; the tools are: ${[...t.toolbox.byName.keys()].join(", ") || "none"}`));
      continue;
    }
    const parsed = call.arguments.trim() === "" ? ({ ok: true, value: {} } as const) : parseJsonAnswer(call.arguments);
    if (!parsed.ok || typeof parsed.value !== "object" || parsed.value === null || Array.isArray(parsed.value)) {
      records.push(refusal(call, "invalid_arguments", `the arguments are not a JSON object${parsed.ok ? "" : `: ${parsed.error}`}`, { node_type_ref: tool.node_type_ref }));
      continue;
    }
    let args = parsed.value as JsonObject;
    const validate = validatorOf(tool.input_schema);
    if (!validate(args)) {
      records.push(refusal(call, "invalid_arguments", `the arguments do not match the tool's input schema: ${describeErrors(validate.errors).join("; ")}`, { node_type_ref: tool.node_type_ref, arguments: args }));
      continue;
    }
    if (tool.node_type_ref.node_type_id === AGENT_ID) {
      if (t.turnsLeft < 1) {
        records.push(refusal(call, "max_turns", "not run: a handoff to another agent needs turns left, and this agent has none", { node_type_ref: tool.node_type_ref, arguments: args }));
        continue;
      }
      args = clampChildAgent(args, t, left);
    }
    records.push({ id: call.id, name: call.name, node_type_ref: tool.node_type_ref, state: "completed", arguments: args });
    toRun.push({ index: records.length - 1, tool, args });
  }

  // At most maxParallel at once; each worker takes the next call in order, so calls start in the model's order.
  let next = 0;
  const worker = async () => {
    while (next < toRun.length) {
      const { index, tool, args } = toRun[next++];
      records[index] = await runOne(t, records[index], tool, args);
    }
  };
  await Promise.all(Array.from({ length: Math.min(t.maxParallel, toRun.length) }, worker));
  return records;
}

async function runOne(t: TurnContext, record: ToolCallRecord, tool: Tool, args: JsonObject): Promise<ToolCallRecord> {
  const isAgent = tool.node_type_ref.node_type_id === AGENT_ID;
  const options: import("@nodefabric/sdk").CallOptions = { metadata: { labels: { "nodefabric.llm.agent.turn": String(t.turn), "nodefabric.llm.agent.tool_call": record.id.slice(0, 128) } } };
  if (isAgent) {
    // Bounds only shrink down the tree: the child agent's budgets are what this one has left, and it may create
    // only the node types this one may call (itself among them) and its own model calls.
    const allowed = [...new Set([...t.toolbox.tools.map((x) => x.node_type_ref.node_type_id), AGENT_ID, "llm.chat"])].sort();
    options.constraints = { ...t.budget.remainingEnvelope(), candidates: { allowed_node_type_ids: allowed } };
  }
  const child = t.ctx.spawn(tool.node_type_ref, args, options);
  try {
    const outputs = await child.result;
    if (isAgent) t.budget.settleChild(outputs.usage as JsonObject | undefined);
    return { ...record, state: "completed", node_run_id: await child.node_run_id, outputs };
  } catch (err) {
    // The coordinator refused to create the child (a structural limit, an allow list): the model reads why.
    if (HandlerError.is(err) && !t.ctx.signal.aborted && err.code !== "canceled") {
      return { ...record, state: "failed", error: { code: err.code, message: err.message } };
    }
    if (!ChildFailedError.is(err)) throw err;
    const e = err.error;
    return { ...record, state: "failed", node_run_id: err.node_run_id, error: { code: e.code, message: e.message, ...(e.details !== undefined ? { details: e.details as JsonValue } : {}) } };
  }
}

/** The tool's message for one call: its outputs, or the error that names why it did not answer. */
export function toolMessage(r: ToolCallRecord): ChatMessage {
  let text: string;
  if (r.state === "completed") {
    text = stableJson(r.outputs ?? {});
  } else {
    const e = r.error ?? {};
    const why = r.state === "refused" ? "the call was refused and not run" : "the tool failed";
    text = stableJson({ error: { code: e.code ?? "error", message: `${why}: ${String(e.message ?? "")}` } });
  }
  if (text.length > MAX_RESULT_CHARS) text = `${text.slice(0, MAX_RESULT_CHARS)}… [cut: the result has ${text.length} characters]`;
  return { role: "tool", tool_call_id: r.id, content: text };
}
