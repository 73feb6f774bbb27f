/**
 * The console's redaction rule (FABRIC_CONSOLE_REDACT, given in config.json as `redact`): every match of its
 * expressions, in every string of a value the node panel shows, becomes "[redacted]". And what an `llm.chat` NodeRun
 * is made of, for the panel's "LLM call" section: the prompt's messages, the answer and the token usage.
 */

export const REDACTED = "[redacted]";

/** A function that redacts every string in a value (the value itself when there is no rule). */
export function redactor(rules: readonly string[] | undefined): (value: unknown) => unknown {
  const list = (rules ?? []).flatMap((r) => {
    try {
      return [new RegExp(r, "g")];
    } catch {
      return [];
    }
  });
  if (list.length === 0) return (v) => v;
  const text = (s: string) => list.reduce((acc, re) => acc.replace(re, REDACTED), s);
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === "string") return text(v);
    if (depth > 100 || v === null || typeof v !== "object") return v;
    if (Array.isArray(v)) return v.map((x) => walk(x, depth + 1));
    return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, walk(x, depth + 1)]));
  };
  return (v) => walk(v, 0);
}

export interface LlmCallView {
  messages: Array<{ role: string; text: string }>;
  answer?: string;
  model?: string;
  profile?: string;
  usage?: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number };
  cost?: number;
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) return "";
  return JSON.stringify(content);
}

/** The LLM call an `llm.chat` NodeRun holds, or undefined for any other node type. */
export function llmCallOf(nodeTypeId: string, inputs: unknown, outputs: unknown): LlmCallView | undefined {
  if (nodeTypeId !== "llm.chat") return undefined;
  const i = (inputs ?? {}) as { messages?: Array<{ role?: string; content?: unknown }> };
  const o = (outputs ?? {}) as { content?: unknown; parsed?: unknown; tool_calls?: unknown[]; model?: string; profile?: string; usage?: LlmCallView["usage"]; cost?: number };
  const view: LlmCallView = { messages: (i.messages ?? []).map((m) => ({ role: String(m.role ?? "?"), text: textOf(m.content) })) };
  if (outputs !== undefined && outputs !== null) {
    view.answer = o.parsed !== undefined ? JSON.stringify(o.parsed, null, 2) : typeof o.content === "string" ? o.content : o.tool_calls?.length ? JSON.stringify(o.tool_calls, null, 2) : "";
    if (o.model) view.model = o.model;
    if (o.profile) view.profile = o.profile;
    if (o.usage) view.usage = o.usage;
    if (typeof o.cost === "number") view.cost = o.cost;
  }
  return view;
}
