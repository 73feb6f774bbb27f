/**
 * The streamed-answer reader of llm.chat: Server-Sent Events split anywhere, OpenAI's chunk shapes (content, tool
 * calls' arguments in pieces, the usage in a last chunk with no choices), keep-alive comments, errors sent once the
 * stream had begun, and streams that end early. The chunks are the ones the stand-in of @nodefabric/sdk/testing sends.
 */
import { describe, it, expect } from "vitest";
import { completionChunks } from "@nodefabric/sdk/testing";
import { ChunkFolder, readChatStream, SseParser } from "../src/stream.js";

const enc = new TextEncoder();

/** A body that gives `parts` one after another (bytes cut wherever the test says). */
function bodyOf(parts: Array<string | Uint8Array>, fail?: Error): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i < parts.length) {
        const p = parts[i++];
        controller.enqueue(typeof p === "string" ? enc.encode(p) : p);
      } else if (fail) controller.error(fail);
      else controller.close();
    },
  });
}

const sse = (values: unknown[]) => values.map((v) => `data: ${typeof v === "string" ? v : JSON.stringify(v)}\n\n`).join("");

const COMPLETION = {
  id: "chatcmpl-1",
  model: "gpt-test-2024",
  choices: [
    {
      message: {
        content: "Hello, wörld! 👋 How are you?",
        tool_calls: [
          { id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
          { id: "call_b", type: "function", function: { name: "get_rate", arguments: '{"from":"EUR","to":"NOK"}' } },
        ],
      },
      finish_reason: "tool_calls",
    },
  ],
  usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 },
};

describe("SseParser", () => {
  it("reads events split at any byte, CRLF and CR line ends, comments and multi-line data", () => {
    const text = ": keep-alive\r\n\r\nevent: message\r\ndata: {\"a\":1}\r\n\r\ndata: line one\ndata: line two\n\ndata: x\r\rdata: [DONE]\n\n";
    for (let cut = 1; cut < text.length; cut++) {
      const p = new SseParser();
      const events = [...p.push(text.slice(0, cut)), ...p.push(text.slice(cut)), ...p.end()];
      expect(events, `cut at ${cut}`).toEqual([
        { event: "message", data: '{"a":1}' },
        { event: "message", data: "line one\nline two" },
        { event: "message", data: "x" },
        { event: "message", data: "[DONE]" },
      ]);
    }
  });

  it("gives an event the text ended without closing", () => {
    const p = new SseParser();
    expect(p.push("data: last")).toEqual([]);
    expect(p.end()).toEqual([{ event: "message", data: "last" }]);
  });
});

describe("ChunkFolder", () => {
  it("folds OpenAI's chunks (tool calls by index, usage last) into the completion a non-streamed call answers", () => {
    const texts: string[] = [];
    const f = new ChunkFolder((t) => texts.push(t));
    for (const c of completionChunks(COMPLETION as never, 3, true)) f.add(c);
    f.add({ id: "chatcmpl-1", object: "chat.completion.chunk", model: "gpt-test-2024", choices: [], usage: COMPLETION.usage });
    expect(texts.length).toBeGreaterThan(3);
    expect(texts.join("")).toBe(COMPLETION.choices[0].message.content);
    expect(f.completion()).toEqual({
      model: "gpt-test-2024",
      choices: [{ message: { content: COMPLETION.choices[0].message.content, tool_calls: COMPLETION.choices[0].message.tool_calls }, finish_reason: "tool_calls" }],
      usage: COMPLETION.usage,
    });
  });

  it("keeps content null when only tool calls came, and reads a refusal", () => {
    const f = new ChunkFolder();
    f.add({ choices: [{ index: 0, delta: { role: "assistant", content: null } }] });
    f.add({ choices: [{ index: 0, delta: { refusal: "I can't " } }] });
    f.add({ choices: [{ index: 0, delta: { refusal: "help." }, finish_reason: "stop" }] });
    expect(f.completion().choices[0]).toEqual({ message: { content: null, refusal: "I can't help." }, finish_reason: "stop" });
  });
});

describe("readChatStream", () => {
  it("reads a stream cut into small byte pieces (a character split between them) to [DONE]", async () => {
    const bytes = enc.encode(sse([...completionChunks(COMPLETION as never, 2, true), { choices: [], usage: COMPLETION.usage }, "[DONE]"]));
    const parts: Uint8Array[] = [];
    for (let i = 0; i < bytes.length; i += 7) parts.push(bytes.slice(i, i + 7));
    const texts: string[] = [];
    const end = await readChatStream(bodyOf(parts), (t) => texts.push(t), 1 << 20);
    expect(end.kind).toBe("done");
    if (end.kind !== "done") return;
    expect(end.completion.choices[0].message.content).toBe(COMPLETION.choices[0].message.content);
    expect(end.completion.usage).toEqual(COMPLETION.usage);
    expect(texts.join("")).toBe(COMPLETION.choices[0].message.content);
  });

  it("returns an error event sent midway (OpenAI's shape, and `event: error`) with what came before", async () => {
    const chunks = completionChunks({ choices: [{ message: { content: "Half an answer" }, finish_reason: "stop" }] } as never, 4, false);
    const error = { error: { message: "The server had an error while processing your request.", type: "server_error", param: null, code: null } };
    const end = await readChatStream(bodyOf([sse([chunks[0], chunks[1], error])]), () => {}, 1 << 20);
    expect(end).toMatchObject({ kind: "error", text: JSON.stringify(error), partial: { choices: [{ message: { content: "Half" } }] } });
    const other = await readChatStream(bodyOf([`event: error\ndata: {"message":"overloaded"}\n\n`]), () => {}, 1 << 20);
    expect(other).toMatchObject({ kind: "error", text: '{"message":"overloaded"}' });
  });

  it("says `broken` for a stream that ends with no finish_reason, or whose connection fails", async () => {
    const chunks = completionChunks({ choices: [{ message: { content: "Half an answer" }, finish_reason: "stop" }] } as never, 4, false);
    expect(await readChatStream(bodyOf([sse(chunks.slice(0, 2))]), () => {}, 1 << 20)).toMatchObject({ kind: "broken" });
    const cut = await readChatStream(bodyOf([sse(chunks.slice(0, 2))], new Error("other side closed")), () => {}, 1 << 20);
    expect(cut).toMatchObject({ kind: "broken", cause: { message: "other side closed" } });
    // A server that closes after its finish_reason chunk without [DONE] has still answered.
    expect(await readChatStream(bodyOf([sse(chunks)]), () => {}, 1 << 20)).toMatchObject({ kind: "done" });
  });

  it("stops reading past its size bound", async () => {
    const chunks = completionChunks({ choices: [{ message: { content: "x".repeat(5000) }, finish_reason: "stop" }] } as never, 100, false);
    expect(await readChatStream(bodyOf([sse(chunks)]), () => {}, 1000)).toMatchObject({ kind: "broken", cause: { message: "the stream passed 1000 bytes" } });
  });
});
