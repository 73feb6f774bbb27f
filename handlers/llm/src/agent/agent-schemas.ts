/**
 * What an agent reads and answers: `llm.agent`'s inputs, its defaults and ceilings, and its input and output schemas.
 */
import type { JsonObject, JsonValue, NodeTypeRef } from "@nodefabric/sdk";
import { CHAT_MESSAGE_SCHEMA, type ChatMessage } from "../chat.js";
import type { ToolSpec } from "./tools.js";

export interface AgentInputs {
  instructions?: string;
  goal?: string;
  messages?: ChatMessage[];
  tools?: ToolSpec[];
  profile?: string;
  model?: string;
  max_output_tokens?: number;
  temperature?: number;
  max_turns?: number;
  max_tool_calls?: number;
  max_parallel_tool_calls?: number;
  output_schema?: JsonObject;
}

/** Why the loop ended. */
export type EndedBy = "final" | "max_turns" | "max_tool_calls" | "budget";

/** What the agent reports of one tool call the model made. */
export interface ToolCallRecord {
  id: string;
  name: string;
  node_type_ref?: NodeTypeRef;
  /** completed: ran and answered; failed: ran and failed; refused: not run (unknown tool, bad arguments, a bound). */
  state: "completed" | "failed" | "refused";
  node_run_id?: string;
  arguments?: JsonValue;
  outputs?: JsonObject;
  error?: JsonObject;
}

/** One turn: a model call and the tool calls it asked for. */
export interface StepRecord {
  turn: number;
  model_call: string;
  content: string | null;
  tool_calls: ToolCallRecord[];
}

export const DEFAULTS = { max_turns: 10, max_tool_calls: 20, max_parallel_tool_calls: 4, max_output_tokens: 1024 };
export const CEILINGS = { max_turns: 50, max_tool_calls: 200, max_parallel_tool_calls: 16 };

export const AGENT_INPUT_SCHEMA: JsonObject = {
  type: "object",
  properties: {
    instructions: { type: "string", maxLength: 50_000, description: "What the agent is and how it works: its system prompt." },
    goal: { type: "string", minLength: 1, maxLength: 20_000, description: "The task, as the user's one message (or give messages)." },
    messages: { type: "array", items: CHAT_MESSAGE_SCHEMA, minItems: 1, maxItems: 500, description: "The conversation so far, OpenAI's chat message format." },
    tools: {
      type: "array",
      maxItems: 100,
      description: "The node types it may call: ids (`demo.echo`, `demo.echo@1.0.0`), patterns (`demo.*`), or Selection queries ({ query }).",
      items: {
        anyOf: [
          { type: "string", minLength: 1, maxLength: 300 },
          { type: "object", properties: { query: { type: "string", minLength: 1, maxLength: 2000 }, max_candidates: { type: "integer", minimum: 1, maximum: 50 } }, required: ["query"], additionalProperties: false },
        ],
      },
    },
    profile: { type: "string", minLength: 1, maxLength: 128 },
    model: { type: "string", minLength: 1, maxLength: 256 },
    max_output_tokens: { type: "integer", minimum: 1, maximum: 1_000_000 },
    temperature: { type: "number", minimum: 0, maximum: 2 },
    max_turns: { type: "integer", minimum: 1, maximum: CEILINGS.max_turns, description: "Model calls of the loop, at most (default 10)." },
    max_tool_calls: { type: "integer", minimum: 0, maximum: CEILINGS.max_tool_calls, description: "Tool calls in all, at most (default 20)." },
    max_parallel_tool_calls: { type: "integer", minimum: 1, maximum: CEILINGS.max_parallel_tool_calls, description: "Tool calls running at once, at most (default 4)." },
    output_schema: { type: "object", description: "A JSON Schema the final answer must match; it is then in `parsed`." },
  },
  anyOf: [{ required: ["goal"] }, { required: ["messages"] }],
  additionalProperties: false,
};

export const AGENT_OUTPUT_SCHEMA: JsonObject = {
  type: "object",
  properties: {
    answer: { type: ["string", "null"] },
    parsed: {},
    ended_by: { enum: ["final", "max_turns", "max_tool_calls", "budget"] },
    steps: { type: "array", items: { type: "object" } },
    messages: { type: "array", items: { type: "object" } },
    tools: { type: "array", items: { type: "object" } },
    tools_refused: { type: "array", items: { type: "object" } },
    usage: { type: "object" },
  },
  required: ["answer", "ended_by", "steps", "usage"],
};
