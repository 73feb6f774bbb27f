/**
 * How the LLM stand-in streams a completion, in OpenAI's chat-completions streaming shape: Server-Sent Events, each
 * `data:` a `chat.completion.chunk` (the role first, then the content in pieces, each tool call named in its first
 * piece and its arguments in the next ones, then a chunk with `finish_reason`), a last chunk with `choices: []` and
 * the usage when `stream_options.include_usage` asks, and `data: [DONE]`. A stream that breaks sends part of the
 * content, then an error event (`data: {"error":{…}}`, as OpenAI sends one once the status is already 200) or cuts
 * the connection.
 */
import type { ServerResponse } from "node:http";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

interface CompletionBody {
  id?: string;
  model?: string;
  created?: number;
  choices: Array<{ message: { content?: string | null; refusal?: string; tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }> }; finish_reason: string }>;
  usage?: Json;
}

/** Whether an answer body is a chat completion (and so can be streamed). */
export function isCompletion(body: unknown): body is CompletionBody {
  return typeof body === "object" && body !== null && Array.isArray((body as { choices?: unknown }).choices);
}

/** Whether the request asked for the usage in a last chunk. */
export function includeUsage(body: { [key: string]: unknown }): boolean {
  const o = body.stream_options;
  return typeof o === "object" && o !== null && (o as { include_usage?: unknown }).include_usage === true;
}

function pieces(text: string, size: number): string[] {
  const out: string[] = [];
  const chars = Array.from(text); // never split a character
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(""));
  return out;
}

/** The chunks a completion streams as (without the usage chunk and [DONE]). */
export function completionChunks(c: CompletionBody, chunkChars: number, usage: boolean): Json[] {
  const base = { id: c.id ?? "chatcmpl-scripted", object: "chat.completion.chunk", created: c.created ?? 0, model: c.model ?? "scripted-model", system_fingerprint: null };
  const chunk = (delta: Json, finish: string | null = null): Json => ({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...(usage ? { usage: null } : {}) });
  const choice = c.choices[0];
  const m = choice?.message ?? {};
  const out: Json[] = [chunk({ role: "assistant", content: "", refusal: null })];
  if (typeof m.content === "string") for (const p of pieces(m.content, chunkChars)) out.push(chunk({ content: p }));
  if (typeof m.refusal === "string") for (const p of pieces(m.refusal, chunkChars)) out.push(chunk({ refusal: p }));
  (m.tool_calls ?? []).forEach((t, index) => {
    out.push(chunk({ tool_calls: [{ index, id: t.id, type: "function", function: { name: t.function.name, arguments: "" } }] }));
    for (const p of pieces(t.function.arguments, chunkChars)) out.push(chunk({ tool_calls: [{ index, function: { arguments: p } }] }));
  });
  out.push(chunk({}, choice?.finish_reason ?? "stop"));
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Streams `c` as Server-Sent Events on `res`; with `breaks`, stops after part of the content. */
export async function streamAnswer(res: ServerResponse, c: CompletionBody, o: { chunkChars: number; delayMs: number; usage: boolean; breaks?: "error" | "cut" }): Promise<void> {
  res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive" });
  const chunks = completionChunks(c, Math.max(1, o.chunkChars), o.usage);
  // A broken stream gets the role and half of the content before it breaks.
  const upTo = o.breaks ? Math.max(2, Math.floor(chunks.length / 2)) : chunks.length;
  for (let i = 0; i < upTo; i++) {
    if (res.destroyed) return;
    res.write(`data: ${JSON.stringify(chunks[i])}\n\n`);
    if (o.delayMs > 0) await sleep(o.delayMs);
  }
  if (o.breaks === "cut") return void res.socket?.destroy();
  if (o.breaks === "error") {
    const error = { error: { message: "The server had an error while processing your request. Sorry about that!", type: "server_error", param: null, code: null } };
    res.end(`data: ${JSON.stringify(error)}\n\n`);
    return;
  }
  if (o.usage && c.usage !== undefined) {
    res.write(`data: ${JSON.stringify({ id: c.id ?? "chatcmpl-scripted", object: "chat.completion.chunk", created: c.created ?? 0, model: c.model ?? "scripted-model", choices: [], usage: c.usage })}\n\n`);
  }
  res.end("data: [DONE]\n\n");
}
