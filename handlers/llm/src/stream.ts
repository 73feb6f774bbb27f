/**
 * Reading a streamed chat completion: Server-Sent Events of OpenAI's chat-completions streaming format
 * (`data: {"choices":[{"delta":{…}}]}` chunks, `data: [DONE]` at the end, the usage in a last chunk with no choices
 * when the request asked `stream_options: {include_usage: true}`). The chunks are folded into the one completion a
 * non-streamed call would have answered, so what `llm.chat` returns does not depend on whether the server streamed;
 * the text is handed on as it arrives.
 *
 * An error a server sends once the stream has begun (its status is already 200) comes as an event whose data is an
 * error body (`{"error":{…}}`, OpenAI's, vLLM's and llama.cpp's shape) or as `event: error`; it is returned as such.
 * A stream that ends before its last chunk (the connection cut) is `broken`.
 */

/** The completion the chunks add up to, in the shape of a non-streamed answer. */
export interface FoldedCompletion {
  model?: string;
  choices: Array<{ message: { content?: string | null; refusal?: string; tool_calls?: FoldedToolCall[] }; finish_reason?: string }>;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown; total_tokens?: unknown };
}

interface FoldedToolCall {
  id?: string;
  type: "function";
  function: { name: string; arguments: string };
}

export type StreamEnd =
  | { kind: "done"; completion: FoldedCompletion }
  /** The server sent an error body mid-stream (`text` is its data, for readErrorBody). */
  | { kind: "error"; text: string; partial: FoldedCompletion }
  /** The stream ended (or the connection broke) before `[DONE]` and before any finish_reason. */
  | { kind: "broken"; partial: FoldedCompletion; cause?: unknown };

/** Folds chunk after chunk into one completion; `onText` gets each piece of the answer's content as it comes. */
export class ChunkFolder {
  private model?: string;
  private content = "";
  private sawContent = false;
  private refusal = "";
  private finish?: string;
  private usage?: FoldedCompletion["usage"];
  private readonly calls: FoldedToolCall[] = [];

  constructor(private readonly onText: (text: string) => void = () => {}) {}

  /** True once a chunk said why the answer ended. */
  get finished(): boolean {
    return this.finish !== undefined;
  }

  /** One chunk (`chat.completion.chunk`). Only the first choice is read, as `llm.chat` asks for one. */
  add(chunk: unknown): void {
    if (typeof chunk !== "object" || chunk === null) return;
    const c = chunk as { model?: unknown; choices?: unknown; usage?: unknown };
    if (typeof c.model === "string" && c.model) this.model = c.model;
    if (typeof c.usage === "object" && c.usage !== null) this.usage = c.usage as FoldedCompletion["usage"];
    const choices = Array.isArray(c.choices) ? (c.choices as Array<Record<string, unknown>>) : [];
    const choice = choices.find((x) => (x?.index ?? 0) === 0);
    if (!choice || typeof choice !== "object") return;
    // Some servers (older llama.cpp) put the whole message, not a delta, in their last chunk.
    const delta = (choice.delta ?? choice.message) as Record<string, unknown> | undefined;
    if (delta && typeof delta === "object") {
      if (typeof delta.content === "string" && delta.content !== "") {
        this.content += delta.content;
        this.sawContent = true;
        this.onText(delta.content);
      }
      if (typeof delta.refusal === "string") this.refusal += delta.refusal;
      if (Array.isArray(delta.tool_calls)) for (const t of delta.tool_calls) this.addToolCall(t);
    }
    if (typeof choice.finish_reason === "string" && choice.finish_reason) this.finish = choice.finish_reason;
  }

  /** A tool call's delta: the first names it (`index`, `id`, `function.name`), the next ones add to its arguments. */
  private addToolCall(t: unknown): void {
    if (typeof t !== "object" || t === null) return;
    const d = t as { index?: unknown; id?: unknown; function?: { name?: unknown; arguments?: unknown } };
    const index = typeof d.index === "number" && Number.isInteger(d.index) && d.index >= 0 && d.index < 1024 ? d.index : this.calls.length;
    const call = (this.calls[index] ??= { type: "function", function: { name: "", arguments: "" } });
    if (typeof d.id === "string" && d.id) call.id = d.id;
    if (typeof d.function?.name === "string") call.function.name += d.function.name;
    if (typeof d.function?.arguments === "string") call.function.arguments += d.function.arguments;
    else if (d.function?.arguments !== undefined && d.function.arguments !== null) call.function.arguments += JSON.stringify(d.function.arguments);
  }

  /** What the chunks so far add up to. */
  completion(): FoldedCompletion {
    const message: FoldedCompletion["choices"][number]["message"] = { content: this.sawContent ? this.content : null };
    if (this.refusal) message.refusal = this.refusal;
    const calls = this.calls.filter((c) => c !== undefined);
    if (calls.length > 0) message.tool_calls = calls;
    const out: FoldedCompletion = { choices: [{ message, ...(this.finish !== undefined ? { finish_reason: this.finish } : {}) }] };
    if (this.model !== undefined) out.model = this.model;
    if (this.usage !== undefined) out.usage = this.usage;
    return out;
  }
}

/** The events of a Server-Sent Events text, fed in pieces as they arrive (lines may be split anywhere). */
export class SseParser {
  private buffer = "";
  private data: string[] = [];
  private event = "";

  /** Feeds more text; returns the events it completed. */
  push(text: string): Array<{ event: string; data: string }> {
    this.buffer += text;
    const out: Array<{ event: string; data: string }> = [];
    for (;;) {
      const nl = this.buffer.search(/\r\n|\r|\n/);
      if (nl < 0) break;
      // A lone \r at the very end may be the first half of \r\n: wait for the next piece.
      if (this.buffer[nl] === "\r" && nl === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + (this.buffer.startsWith("\r\n", nl) ? 2 : 1));
      const ended = this.line(line);
      if (ended) out.push(ended);
    }
    return out;
  }

  /** Ends the text: an event not yet closed by a blank line is given too. */
  end(): Array<{ event: string; data: string }> {
    const out = this.buffer ? this.push("\n") : [];
    const last = this.line("");
    return last ? [...out, last] : out;
  }

  private line(line: string): { event: string; data: string } | undefined {
    if (line === "") {
      if (this.data.length === 0) {
        this.event = "";
        return undefined;
      }
      const ev = { event: this.event || "message", data: this.data.join("\n") };
      this.data = [];
      this.event = "";
      return ev;
    }
    if (line.startsWith(":")) return undefined; // a comment (keep-alive)
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    return undefined;
  }
}

/** Whether a data payload is an error body rather than a chunk. */
function isErrorData(value: unknown): boolean {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return (v.error !== undefined && v.error !== null) || v.object === "error";
}

/**
 * Reads a whole streamed answer from `body`, handing each piece of content to `onText`. Never throws for what the
 * server sent; a failure to read (the connection cut, an abort) ends the stream as `broken` with the cause, so the
 * caller decides (an abort of the execution is rethrown there).
 */
export async function readChatStream(body: ReadableStream<Uint8Array>, onText: (text: string) => void, maxBytes: number): Promise<StreamEnd> {
  const folder = new ChunkFolder(onText);
  const parser = new SseParser();
  const decoder = new TextDecoder();
  let bytes = 0;
  const handle = (events: Array<{ event: string; data: string }>): StreamEnd | undefined => {
    for (const ev of events) {
      const data = ev.data.trim();
      if (data === "[DONE]") return { kind: "done", completion: folder.completion() };
      let value: unknown;
      try {
        value = JSON.parse(data);
      } catch {
        if (ev.event === "error") return { kind: "error", text: data, partial: folder.completion() };
        continue; // not JSON: skipped, as clients of this format do
      }
      if (ev.event === "error" || isErrorData(value)) return { kind: "error", text: data, partial: folder.completion() };
      folder.add(value);
    }
    return undefined;
  };
  const reader = body.getReader();
  try {
    for (;;) {
      let next: Awaited<ReturnType<typeof reader.read>>;
      try {
        next = await reader.read();
      } catch (cause) {
        return { kind: "broken", partial: folder.completion(), cause };
      }
      if (next.done) break;
      bytes += next.value.byteLength;
      if (bytes > maxBytes) return { kind: "broken", partial: folder.completion(), cause: new Error(`the stream passed ${maxBytes} bytes`) };
      const ended = handle(parser.push(decoder.decode(next.value, { stream: true })));
      if (ended) return ended;
    }
    const ended = handle([...parser.push(decoder.decode()), ...parser.end()]);
    if (ended) return ended;
  } finally {
    reader.cancel().catch(() => undefined);
  }
  // No [DONE]: a server that closes after its last chunk (some do) has still said why the answer ended.
  return folder.finished ? { kind: "done", completion: folder.completion() } : { kind: "broken", partial: folder.completion() };
}
