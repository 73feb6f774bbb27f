/**
 * llm.chat's streamed answer through a whole fabric (core's fabricFixture) against the scripted stand-in streaming
 * real OpenAI chunks on loopback HTTP: the text arrives as node_run_output_delta events, in order, coalesced, before
 * the NodeRun ends, and concatenated it is the final content; a reader that resumes after a seq gets the rest once; a
 * long answer's deltas stop at their bound while the output stays whole; an error midway makes the call again (a
 * restart, counted on the NodeRun); a server that ignores `stream` still works; and a model URL the executor's egress
 * policy refuses is refused with `egress_denied`, nothing sent.
 */
import { describe, it, expect, beforeAll, afterAll, beforeEach } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fabricFixture, type FabricFixture } from "@nodefabric/core/testing";
import { completionChunks, startLlmStandIn, type LlmStandIn } from "@nodefabric/sdk/testing";
import { OUTPUT_DELTA_MAX_CHARS } from "@nodefabric/sdk/runtime";
import { llmChat, resetLlmConfig } from "../src/index.js";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const USER = [{ role: "user", content: "Tell me a story." }];
const CHAT = { node_type_id: "llm.chat", version: "1.0.0" };
const STORY = Array.from({ length: 60 }, (_, i) => `Sentence ${i + 1} of the story, with ünïcödé and 🦊.`).join(" ");

let fabric: FabricFixture;
let llm: LlmStandIn;
let dir: string;
const saved = { ...process.env };

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "llm-stream-test-"));
  llm = await startLlmStandIn();
  // A profile whose base_url is a cloud metadata address: the executor's egress policy refuses it.
  writeFileSync(path.join(dir, "llm.json"), JSON.stringify({ profiles: { metadata: { base_url: "http://169.254.169.254/v1", model: "m" } } }));
  Object.assign(process.env, { FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "gpt-test", FABRIC_LLM_API_KEY: "sk-stream", FABRIC_LLM_CONFIG: path.join(dir, "llm.json") });
  resetLlmConfig();
  fabric = await fabricFixture({ definitions: [llmChat] });
});

afterAll(async () => {
  await fabric?.close();
  await llm?.close();
  process.env = saved;
  resetLlmConfig();
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  llm.calls.length = 0;
});

const deltasOf = (events: Json[]) => events.filter((e) => e.type === "node_run_output_delta");
const outputsOf = (run: Json) => run.extensions["nodefabric.outputs"];

/** Reads GET /v1/runs/{id}/events (NDJSON) through the gateway, following until the run ends when `follow`. */
async function readEvents(runId: string, query: Record<string, string>): Promise<Json[]> {
  const res = await fetch(`${fabric.urls["run-gateway"]}/v1/runs/${runId}/events?${new URLSearchParams(query)}`);
  expect(res.status).toBe(200);
  const text = await res.text();
  return text
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

describe("llm.chat streamed", () => {
  it("asks for a stream with the usage at the end, and the answer arrives as ordered, coalesced deltas before the NodeRun ends", async () => {
    llm.script({ content: STORY, usage: { prompt_tokens: 7, completion_tokens: 300 }, stream: { chunk_chars: 12, delay_ms: 2 } });
    const started = await fabric.run(CHAT, { messages: USER }, { waitSeconds: 0 });
    // A reader following the run live, from its start, sees the text being written.
    const live = await readEvents(started.run_id, { follow: "true" });
    const ended: Json = await (await fetch(`${fabric.urls["run-gateway"]}/v1/runs/${started.run_id}`)).json();
    expect(ended.state).toBe("completed");
    const out = outputsOf(ended);
    const run: Json = (await fabric.nodeRuns(started.run_id))[0];
    expect(out).toMatchObject({ content: STORY, finish_reason: "stop", usage: { prompt_tokens: 7, completion_tokens: 300, total_tokens: 307 } });
    expect(llm.calls[0].body).toMatchObject({ stream: true, stream_options: { include_usage: true } });

    const events: Json[] = await fabric.events(started.run_id);
    expect(live.map((e) => e.seq)).toEqual(events.map((e) => e.seq));
    const deltas = deltasOf(events);
    const chunks = completionChunks({ choices: [{ message: { content: STORY }, finish_reason: "stop" }] } as never, 12, true).length;
    expect(deltas.length).toBeGreaterThan(1);
    // Coalesced: far fewer events than the chunks the server sent.
    expect(deltas.length).toBeLessThan(chunks / 2);
    expect(deltas.map((d) => d.data.index)).toEqual(deltas.map((_, i) => i));
    let offset = 0;
    for (const d of deltas) {
      expect(d).toMatchObject({ node_run_id: run.node_run_id, data: { offset, attempt: 1 } });
      expect(d.data.truncated).toBeUndefined();
      offset += d.data.text.length;
    }
    expect(deltas.map((d) => d.data.text).join("")).toBe(STORY);
    // All between the NodeRun's start and its end.
    const seqOf = (type: string) => events.find((e) => e.type === type && e.node_run_id === run.node_run_id)!.seq;
    expect(deltas[0].seq).toBeGreaterThan(seqOf("node_run_started"));
    expect(deltas.at(-1).seq).toBeLessThan(seqOf("node_run_completed"));
    expect(run.extensions["nodefabric.output_stream"]).toEqual({ streams: 1, restarts: 0, attempt: 1 });

    // A reader resuming after any seq gets exactly the rest: no gap, no duplicate.
    for (const from of [deltas[0].seq, deltas[Math.floor(deltas.length / 2)].seq, deltas.at(-1).seq]) {
      const rest = await readEvents(started.run_id, { after_seq: String(from), follow: "false" });
      expect(rest.map((e) => e.seq)).toEqual(events.filter((e) => e.seq > from).map((e) => e.seq));
    }
    const typed = await readEvents(started.run_id, { after_seq: String(deltas[0].seq), follow: "false", types: "node_run_output_delta" });
    expect(typed.map((e) => e.data.text).join("")).toBe(STORY.slice(deltas[0].data.text.length));
  });

  it("stops the deltas at their bound, says so, and still returns the whole answer", async () => {
    const long = "abcdefghij".repeat(Math.ceil((OUTPUT_DELTA_MAX_CHARS + 40_000) / 10));
    llm.script({ content: long, stream: { chunk_chars: 8192 } });
    const run: Json = await fabric.run(CHAT, { messages: USER });
    expect(run.state).toBe("completed");
    expect(outputsOf(run).content).toBe(long);
    const deltas = deltasOf(await fabric.events(run.run_id));
    const text = deltas.map((d) => d.data.text).join("");
    expect(text.length).toBe(OUTPUT_DELTA_MAX_CHARS);
    expect(long.startsWith(text)).toBe(true);
    expect(deltas.at(-1).data.truncated).toBe(true);
    expect(deltas.slice(0, -1).every((d) => d.data.truncated === undefined)).toBe(true);
  });

  it("makes the call again after an error midway: the restart is counted, and the new attempt's deltas say so", async () => {
    llm.script({ fail: "stream_error" }, { content: "The whole answer, at last.", stream: { chunk_chars: 2 } });
    const run: Json = await fabric.run(CHAT, { messages: USER });
    expect(run.state).toBe("completed");
    expect(outputsOf(run).content).toBe("The whole answer, at last.");
    expect(llm.calls).toHaveLength(2);
    const events = await fabric.events(run.run_id);
    expect(events.find((e) => e.type === "node_run_retrying")?.data).toMatchObject({ error: { code: "upstream_unavailable", details: { mid_stream: true, upstream_type: "server_error" } } });
    const deltas = deltasOf(events);
    const first = deltas.filter((d) => d.data.attempt === 1);
    const second = deltas.filter((d) => d.data.attempt === 2);
    expect(first.length).toBeGreaterThan(0);
    expect("This answer breaks off midway through".startsWith(first.map((d) => d.data.text).join(""))).toBe(true);
    expect(second[0].data).toMatchObject({ index: 0, offset: 0, restarted: true });
    expect(second.map((d) => d.data.text).join("")).toBe("The whole answer, at last.");
    const nr: Json = (await fabric.nodeRuns(run.run_id))[0];
    expect(nr.extensions["nodefabric.output_stream"]).toEqual({ streams: 2, restarts: 1, attempt: 2 });
  });

  it("makes the call again when the connection is cut midway", async () => {
    llm.script({ fail: "stream_cut" }, { content: "Answered after the cut." });
    const run: Json = await fabric.run(CHAT, { messages: USER });
    expect(run.state).toBe("completed");
    expect(outputsOf(run).content).toBe("Answered after the cut.");
    expect(llm.calls).toHaveLength(2);
  });

  it("reads a server that ignores `stream` and answers JSON, and reports its content as one delta", async () => {
    const body = { id: "c1", object: "chat.completion", created: 0, model: "gpt-test", choices: [{ index: 0, message: { role: "assistant", content: "Plain JSON." }, finish_reason: "stop" }], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } };
    llm.script({ status: 200, body });
    const run: Json = await fabric.run(CHAT, { messages: USER });
    expect(run.state).toBe("completed");
    expect(outputsOf(run)).toMatchObject({ content: "Plain JSON.", usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } });
    expect(deltasOf(await fabric.events(run.run_id)).map((d) => d.data.text)).toEqual(["Plain JSON."]);
  });

  it("asks again without stream_options when a server refuses them", async () => {
    llm.script(
      { status: 400, body: { error: { message: "Unrecognized request argument supplied: stream_options", type: "invalid_request_error", param: "stream_options", code: null } } },
      { content: "Streamed without usage options." },
    );
    const run: Json = await fabric.run(CHAT, { messages: USER });
    expect(run.state).toBe("completed");
    expect(outputsOf(run).content).toBe("Streamed without usage options.");
    expect(llm.calls).toHaveLength(2);
    expect(llm.calls[0].body.stream_options).toEqual({ include_usage: true });
    expect(llm.calls[1].body).toMatchObject({ stream: true });
    expect(llm.calls[1].body.stream_options).toBeUndefined();
  });

  it("streams tool calls: their arguments come whole in the outputs, and no text delta is made up", async () => {
    llm.script({ tool_calls: [{ name: "get_weather", arguments: { city: "Oslo" } }, { name: "get_rate", arguments: { from: "EUR" } }] });
    const run: Json = await fabric.run(CHAT, { messages: USER, tools: [{ type: "function", function: { name: "get_weather" } }, { type: "function", function: { name: "get_rate" } }] });
    expect(run.state).toBe("completed");
    expect(outputsOf(run)).toMatchObject({
      content: null,
      finish_reason: "tool_calls",
      tool_calls: [
        { id: "call_0", name: "get_weather", arguments: '{"city":"Oslo"}' },
        { id: "call_1", name: "get_rate", arguments: '{"from":"EUR"}' },
      ],
    });
    expect(deltasOf(await fabric.events(run.run_id))).toEqual([]);
  });

  it("calls the model through the executor's egress policy: a metadata address is refused with egress_denied, nothing sent", async () => {
    const run: Json = await fabric.run(CHAT, { messages: USER, profile: "metadata" });
    expect(run.state).toBe("failed");
    const nr: Json = (await fabric.nodeRuns(run.run_id))[0];
    expect(nr.extensions["nodefabric.error"]).toMatchObject({ code: "egress_denied", retryable: false, details: { host: "169.254.169.254", reason: "metadata" } });
    expect(llm.calls).toHaveLength(0);
  });
});
