/**
 * llm.chat through a whole fabric (core's fabricFixture) against the scripted OpenAI-compatible stand-in of
 * @nodefabric/sdk/testing on real loopback HTTP: answers, structured output and its fallbacks, OpenAI's and llama.cpp's
 * error shapes, the fabric's retries honouring retry-after-ms, budgets reserved before a call, cost from the price
 * table, cancel aborting the request, and the API key in no run document, NodeRun or event.
 */
import { describe, it, expect, beforeAll, afterAll, beforeEach } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fabricFixture, type FabricFixture } from "@nodefabric/core/testing";
import { startLlmStandIn, type LlmStandIn } from "@nodefabric/sdk/testing";
import { llmChat, resetLlmConfig } from "../src/index.js";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const KEY = "sk-test-CANARY-9f83b2e1c4d5";
const USER = [{ role: "user", content: "Say hello." }];
const SCHEMA = {
  type: "object",
  properties: { city: { type: "string", minLength: 1 }, days: { type: "integer", minimum: 1 }, note: { type: "string" } },
  required: ["city", "days"],
  additionalProperties: false,
};

let fabric: FabricFixture;
let llm: LlmStandIn;
let dir: string;
const saved = { ...process.env };

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "llm-chat-test-"));
  llm = await startLlmStandIn({ apiKey: KEY });
  writeFileSync(
    path.join(dir, "llm.json"),
    JSON.stringify({ prices: { "gpt-test": { input_per_million: 1000, output_per_million: 2000 } }, profiles: { other: { base_url: llm.url, model: "other-model", api_key_env: "OTHER_KEY" } } }),
  );
  process.env.FABRIC_LLM_BASE_URL = llm.url;
  process.env.FABRIC_LLM_API_KEY = KEY;
  process.env.FABRIC_LLM_MODEL = "gpt-test";
  process.env.FABRIC_LLM_CONFIG = path.join(dir, "llm.json");
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

const CHAT = { node_type_id: "llm.chat", version: "1.0.0" };

/** The error of a run's root NodeRun. */
async function errorOf(runId: string): Promise<Json> {
  const nrs: Json[] = await fabric.nodeRuns(runId);
  return nrs[0].extensions?.["nodefabric.error"];
}

describe("llm.chat", () => {
  it("sends the messages with the configured model and key, and reports content, usage, model and cost", async () => {
    llm.script({ content: "Hello!", usage: { prompt_tokens: 10, completion_tokens: 5 } });
    const run: Json = await fabric.run(CHAT, { messages: USER, temperature: 0, seed: 7, max_output_tokens: 50 });
    expect(run.state).toBe("completed");
    const out = run.extensions["nodefabric.outputs"];
    expect(out).toMatchObject({ content: "Hello!", finish_reason: "stop", model: "gpt-test", tool_calls: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }, profile: "default" });
    // 10 × 1000 / 1e6 + 5 × 2000 / 1e6
    expect(out.cost).toBeCloseTo(0.02, 10);
    expect(llm.calls).toHaveLength(1);
    expect(llm.calls[0].headers.authorization).toBe(`Bearer ${KEY}`);
    expect(llm.calls[0].body).toMatchObject({ model: "gpt-test", messages: USER, temperature: 0, seed: 7, max_tokens: 50 });
    const events: Json[] = await fabric.events(run.run_id);
    const done = events.find((e) => e.type === "atomic_executed");
    expect(done.data.cost).toBeCloseTo(0.02, 10);
  });

  it("derives a strict schema for json_schema mode and validates the answer against the original schema", async () => {
    llm.script({ content: { city: "Oslo", days: 3, note: null } });
    const run: Json = await fabric.run(CHAT, { messages: USER, response_schema: SCHEMA, schema_name: "trip" });
    expect(run.state).toBe("completed");
    const sent = llm.calls[0].body.response_format as Json;
    expect(sent.type).toBe("json_schema");
    expect(sent.json_schema.name).toBe("trip");
    expect(sent.json_schema.strict).toBe(true);
    expect(sent.json_schema.schema.required).toEqual(["city", "days", "note"]);
    expect(sent.json_schema.schema.properties.note.type).toEqual(["string", "null"]);
    expect(sent.json_schema.schema.additionalProperties).toBe(false);
    // The null of the optional property is dropped, so the answer is valid under the schema as given.
    expect(run.extensions["nodefabric.outputs"].parsed).toEqual({ city: "Oslo", days: 3 });
    expect(run.extensions["nodefabric.outputs"].structured_mode).toBe("json_schema");
  });

  it("falls back to json_object, then to one forced tool call, when the server refuses json_schema", async () => {
    llm.script(
      { fail: "no_json_schema" },
      { status: 400, body: { error: { code: 400, message: "response_format type json_object is not supported", type: "invalid_request_error" } } },
      { content: { city: "Rome", days: 2 } },
    );
    const run: Json = await fabric.run(CHAT, { messages: USER, response_schema: SCHEMA });
    expect(run.state).toBe("completed");
    expect(llm.calls.map((c) => (c.body.response_format as Json)?.type ?? (c.body.tool_choice ? "tool" : "none"))).toEqual(["json_schema", "json_object", "tool"]);
    expect(llm.calls[1].body.messages[0].content).toContain('"city"');
    expect(run.extensions["nodefabric.outputs"]).toMatchObject({ parsed: { city: "Rome", days: 2 }, structured_mode: "tool", finish_reason: "tool_calls" });
  });

  it("passes tools through and returns the model's tool calls; an invalid response_schema is refused before any call", async () => {
    const tools = [{ type: "function", function: { name: "get_weather", description: "Weather for a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
    llm.script({ tool_calls: [{ name: "get_weather", arguments: { city: "Oslo" } }] });
    const run: Json = await fabric.run(CHAT, { messages: USER, tools });
    expect(llm.calls[0].body.tools).toEqual(tools);
    expect(run.extensions["nodefabric.outputs"]).toMatchObject({ content: null, finish_reason: "tool_calls", tool_calls: [{ id: "call_0", name: "get_weather", arguments: '{"city":"Oslo"}' }] });

    const bad: Json = await fabric.run(CHAT, { messages: USER, response_schema: { type: "object", properties: { a: { type: "no-such-type" } } } });
    expect(await errorOf(bad.run_id)).toMatchObject({ code: "invalid_inputs", details: { field: "response_schema" } });
    expect(llm.calls).toHaveLength(1);
  });

  it("sends max_completion_tokens instead when the model refuses max_tokens, as OpenAI's newer models do", async () => {
    llm.script(
      {
        status: 400,
        body: { error: { message: "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", type: "invalid_request_error", param: "max_tokens", code: "unsupported_parameter" } },
      },
      { content: "ok" },
    );
    const run: Json = await fabric.run(CHAT, { messages: USER, max_output_tokens: 50 });
    expect(run.state).toBe("completed");
    expect(llm.calls[0].body.max_tokens).toBe(50);
    expect(llm.calls[1].body.max_completion_tokens).toBe(50);
    expect(llm.calls[1].body.max_tokens).toBeUndefined();
  });

  it("fails an answer that does not match the schema with llm_invalid_output and the validation errors", async () => {
    llm.script({ content: { city: "", days: 0 } });
    const run: Json = await fabric.run(CHAT, { messages: USER, response_schema: SCHEMA });
    expect(run.state).toBe("failed");
    const error = await errorOf(run.run_id);
    expect(error.code).toBe("llm_invalid_output");
    expect(error.details.errors).toEqual(expect.arrayContaining(["/city: must NOT have fewer than 1 characters", "/days: must be >= 1"]));
  });

  it("fails malformed JSON, a refusal and finish_reason length with their own codes, once each", async () => {
    const codes: string[] = [];
    for (const fail of ["malformed_json", "refusal", "length"] as const) {
      llm.script({ fail });
      const run: Json = await fabric.run(CHAT, { messages: USER, response_schema: SCHEMA });
      expect(run.state).toBe("failed");
      codes.push((await errorOf(run.run_id)).code);
    }
    expect(codes).toEqual(["llm_invalid_output", "llm_refusal", "llm_output_truncated"]);
    expect(llm.calls).toHaveLength(3);
  });

  it("lets the fabric retry a 429, waiting what retry-after-ms asks", async () => {
    llm.script({ fail: "rate_limited", retry_after_ms: 300 }, { content: "after the wait" });
    const run: Json = await fabric.run(CHAT, { messages: USER });
    expect(run.state).toBe("completed");
    expect(run.extensions["nodefabric.outputs"].content).toBe("after the wait");
    expect(llm.calls).toHaveLength(2);
    const events: Json[] = await fabric.events(run.run_id);
    const retrying = events.find((e) => e.type === "node_run_retrying");
    expect(retrying.data.error.code).toBe("upstream_unavailable");
    expect(retrying.data.error.details).toMatchObject({ status: 429, retry_after_ms: 300, upstream_code: "rate_limit_exceeded" });
    expect(retrying.data.delay_ms).toBeGreaterThanOrEqual(300);
  });

  it("retries a 500 and reads OpenAI's error shape", async () => {
    llm.script({ fail: "server_error" }, { content: "ok" });
    const run: Json = await fabric.run(CHAT, { messages: USER });
    expect(run.state).toBe("completed");
    const events: Json[] = await fabric.events(run.run_id);
    expect(events.find((e) => e.type === "node_run_retrying").data.error.details).toMatchObject({ status: 500, upstream_type: "server_error" });
  });

  it("fails a 401 at once with llm_auth_error, in OpenAI's and llama.cpp's shapes", async () => {
    for (const fail of ["unauthorized", "llamacpp_unauthorized"] as const) {
      llm.calls.length = 0;
      llm.script({ fail });
      const run: Json = await fabric.run(CHAT, { messages: USER });
      expect(run.state).toBe("failed");
      const nr = { error: await errorOf(run.run_id) };
      expect(nr.error.code).toBe("llm_auth_error");
      expect(nr.error.retryable).toBe(false);
      expect(nr.error.details.upstream_message).toMatch(fail === "unauthorized" ? /Incorrect API key/ : /Invalid API Key/);
      expect(llm.calls).toHaveLength(1);
    }
  });

  it("reads the plain-string error of Ollama and older llama.cpp, and a 400 on the schema is not retried", async () => {
    llm.script({ status: 400, body: { error: "json: cannot unmarshal schema" } }, { status: 400, body: { error: "tool calls are not supported" } });
    const run: Json = await fabric.run(CHAT, { messages: USER, response_schema: SCHEMA, max_output_tokens: 10 });
    expect(run.state).toBe("failed");
    const nr = { error: await errorOf(run.run_id) };
    // json_schema refused (its message names the schema), json_object refused with a message that does not: not retried.
    expect(nr.error.code).toBe("llm_schema_rejected");
    expect(nr.error.retryable).toBe(false);
    expect(nr.error.details.upstream_message).toBe("tool calls are not supported");
    expect(llm.calls).toHaveLength(2);
  });

  it("never sends a call whose reservation passes max_cost or the token budget", async () => {
    // 1000 output tokens at 2000 per million: 2, over a max_cost of 1.
    const byCost: Json = await fabric.run(CHAT, { messages: USER, max_output_tokens: 1000, budget: { max_cost: 1 } });
    expect(byCost.state).toBe("failed");
    expect(await errorOf(byCost.run_id)).toMatchObject({ code: "budget_exceeded", details: { budget: "max_cost", limit: 1 } });
    const byTokens: Json = await fabric.run(CHAT, { messages: USER, max_output_tokens: 1000, budget: { max_tokens: 500 } });
    expect(await errorOf(byTokens.run_id)).toMatchObject({ code: "budget_exceeded", details: { budget: "nodefabric.llm.max_tokens", limit: 500 } });
    expect(llm.calls).toHaveLength(0);
  });

  it("uses a named profile from the configuration file, and refuses an unknown one", async () => {
    process.env.OTHER_KEY = "sk-other";
    resetLlmConfig();
    const run: Json = await fabric.run(CHAT, { messages: USER, profile: "other" });
    // The stand-in takes only KEY: the other profile's key is sent, and refused.
    expect((await errorOf(run.run_id)).code).toBe("llm_auth_error");
    expect(llm.calls[0].body.model).toBe("other-model");
    expect(llm.calls[0].headers.authorization).toBe("Bearer sk-other");
    const unknown: Json = await fabric.run(CHAT, { messages: USER, profile: "nope" });
    expect(await errorOf(unknown.run_id)).toMatchObject({ code: "invalid_configuration" });
    delete process.env.OTHER_KEY;
    resetLlmConfig();
  });

  it("aborts the request when the run is canceled mid-call, and the run ends canceled", async () => {
    llm.script({ fail: "hang" });
    const run: Json = await fabric.run(CHAT, { messages: USER }, { waitSeconds: 0 });
    await llm.waitForCalls(1);
    const res = await fetch(`${fabric.urls["run-gateway"]}/v1/runs/${run.run_id}:cancel`, { method: "POST" });
    expect(res.status).toBeLessThan(300);
    for (let i = 0; i < 100 && !llm.calls[0].aborted; i++) await new Promise((r) => setTimeout(r, 50));
    expect(llm.calls[0].aborted).toBe(true);
    const after: Json = await (await fetch(`${fabric.urls["run-gateway"]}/v1/runs/${run.run_id}`)).json();
    expect(after.state).toBe("canceled");
  });

  it("keeps the API key out of every run document, NodeRun and event", async () => {
    llm.script({ content: "fine" }, { fail: "unauthorized" });
    const ok: Json = await fabric.run(CHAT, { messages: USER });
    const bad: Json = await fabric.run(CHAT, { messages: USER });
    for (const run of [ok, bad]) {
      const doc = await (await fetch(`${fabric.urls["run-gateway"]}/v1/runs/${run.run_id}`)).text();
      const all = doc + JSON.stringify(await fabric.nodeRuns(run.run_id)) + JSON.stringify(await fabric.events(run.run_id));
      expect(all).not.toContain(KEY);
      expect(all).not.toContain("CANARY");
    }
    expect(llm.calls[0].headers.authorization).toBe(`Bearer ${KEY}`);
  });
});
