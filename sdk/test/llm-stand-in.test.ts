/**
 * The scripted OpenAI-compatible stand-in of @nodefabric/sdk/testing, over real loopback HTTP as a handler's tests use
 * it: scripted steps in order, fixtures, answers built to fit the request's schema, the failures it injects in real
 * servers' shapes, the key it checks, aborted requests, and the same answers without a server (scriptedCompletion).
 */
import { describe, it, expect, afterEach } from "vitest";
import { sampleForSchema, scriptedCompletion, startLlmStandIn, type LlmStandIn } from "../src/testing/index.js";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

let llm: LlmStandIn | undefined;
afterEach(async () => {
  await llm?.close();
  llm = undefined;
});

async function chat(url: string, body: Json, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; body: Json }> {
  const res = await fetch(`${url}/chat/completions`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

const SCHEMA = { type: "object", properties: { city: { type: "string", minLength: 2 }, days: { type: "integer", minimum: 1 } }, required: ["city", "days"], additionalProperties: false };
const ASK = { model: "m", messages: [{ role: "user", content: "Plan a trip to Oslo" }] };

describe("startLlmStandIn", () => {
  it("answers scripted steps in order, then fixtures, then answers built to fit the schema, and records every call", async () => {
    llm = await startLlmStandIn({ steps: [{ content: "first" }], fixtures: [{ contains: "Oslo", content: "from a fixture" }] });
    expect((await chat(llm.url, ASK)).body.choices[0].message.content).toBe("first");
    const second = await chat(llm.url, ASK);
    expect(second.body).toMatchObject({ object: "chat.completion", model: "m", choices: [{ message: { role: "assistant", content: "from a fixture" }, finish_reason: "stop" }] });
    expect(second.body.usage.total_tokens).toBe(second.body.usage.prompt_tokens + second.body.usage.completion_tokens);
    const built = await chat(llm.url, { ...ASK, messages: [{ role: "user", content: "x" }], response_format: { type: "json_schema", json_schema: { name: "trip", schema: SCHEMA } } });
    expect(JSON.parse(built.body.choices[0].message.content)).toEqual({ city: "sample", days: 1 });
    expect(llm.calls.map((c) => c.status)).toEqual([200, 200, 200]);
  });

  it("injects 429 with retry-after-ms, 500, 401 in OpenAI's and llama.cpp's shapes, refusals, length and malformed JSON", async () => {
    llm = await startLlmStandIn({
      steps: [{ fail: "rate_limited", retry_after_ms: 250, retry_after: "1" }, { fail: "server_error" }, { fail: "unauthorized" }, { fail: "llamacpp_unauthorized" }, { fail: "refusal" }, { fail: "length" }, { fail: "malformed_json" }],
    });
    const limited = await chat(llm.url, ASK);
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after-ms")).toBe("250");
    expect(limited.headers.get("retry-after")).toBe("1");
    expect(limited.body.error).toMatchObject({ type: "requests", code: "rate_limit_exceeded" });
    expect((await chat(llm.url, ASK)).body.error.type).toBe("server_error");
    expect((await chat(llm.url, ASK)).body).toEqual({ error: expect.objectContaining({ code: "invalid_api_key", param: null }) });
    expect((await chat(llm.url, ASK)).body).toEqual({ error: { code: 401, message: "Invalid API Key", type: "authentication_error" } });
    expect((await chat(llm.url, ASK)).body.choices[0].message.refusal).toMatch(/cannot help/);
    expect((await chat(llm.url, ASK)).body.choices[0].finish_reason).toBe("length");
    expect((await chat(llm.url, ASK)).body.choices[0].message.content).toBe("{ this is not json");
  });

  it("refuses json_schema when told to, answers a forced tool call with that tool, and checks the key", async () => {
    llm = await startLlmStandIn({ noJsonSchema: true, apiKey: "sk-x" });
    const refused = await chat(llm.url, { ...ASK, response_format: { type: "json_schema", json_schema: { name: "t", schema: SCHEMA } } }, { authorization: "Bearer sk-x" });
    expect(refused.status).toBe(400);
    expect(refused.body.error.param).toBe("response_format");
    const tool = await chat(
      llm.url,
      { ...ASK, tools: [{ type: "function", function: { name: "t", parameters: SCHEMA } }], tool_choice: { type: "function", function: { name: "t" } } },
      { authorization: "Bearer sk-x" },
    );
    expect(tool.body.choices[0]).toMatchObject({ finish_reason: "tool_calls", message: { tool_calls: [{ type: "function", function: { name: "t" } }] } });
    expect(JSON.parse(tool.body.choices[0].message.tool_calls[0].function.arguments)).toEqual({ city: "sample", days: 1 });
    expect((await chat(llm.url, ASK, { authorization: "Bearer wrong" })).status).toBe(401);
    expect((await chat(llm.url, ASK)).status).toBe(401);
  });

  it("sees a hanging request aborted by its client", async () => {
    llm = await startLlmStandIn({ steps: [{ fail: "hang" }] });
    const controller = new AbortController();
    const pending = fetch(`${llm.url}/chat/completions`, { method: "POST", body: JSON.stringify(ASK), signal: controller.signal }).catch((e: Error) => e);
    await llm.waitForCalls(1);
    controller.abort();
    expect(await pending).toBeInstanceOf(Error);
    for (let i = 0; i < 50 && !llm.calls[0].aborted; i++) await new Promise((r) => setTimeout(r, 20));
    expect(llm.calls[0].aborted).toBe(true);
  });

  it("answers unknown paths with a 404 in OpenAI's shape", async () => {
    llm = await startLlmStandIn();
    const res = await fetch(`${llm.url}/embeddings`, { method: "POST", body: "{}" });
    expect(res.status).toBe(404);
    expect(((await res.json()) as Json).error.code).toBe("unknown_url");
  });
});

describe("scriptedCompletion and sampleForSchema", () => {
  it("answer with no server, and build values valid under common keywords", () => {
    const a = scriptedCompletion({ ...ASK, response_format: { type: "json_schema", json_schema: { name: "plan", schema: SCHEMA } } } as never, { fixtures: [{ schema_name: "plan", content: { city: "Rome", days: 2 } }] });
    expect(a.status).toBe(200);
    expect(JSON.parse((a.body as Json).choices[0].message.content)).toEqual({ city: "Rome", days: 2 });
    expect(sampleForSchema({ enum: ["b", "a"] })).toBe("b");
    expect(sampleForSchema({ type: ["string", "null"], minLength: 8 })).toBe("samplexx");
    expect(sampleForSchema({ type: "array", items: { type: "integer", minimum: 3 }, minItems: 2 })).toEqual([3, 3]);
    expect(sampleForSchema({ anyOf: [{ type: "null" }, { type: "boolean" }] })).toBe(false);
  });

  it("answers a tool-calling loop from fixtures: tool calls on its first turn, text on the next", () => {
    const fixtures = [
      { contains: "Oslo", turn: 0, tool_calls: [{ name: "get_weather", arguments: { city: "Oslo" } }] },
      { contains: "Oslo", turn: 1, content: "It is mild in Oslo." },
    ];
    const first = scriptedCompletion(ASK as never, { fixtures }).body as Json;
    expect(first.choices[0]).toMatchObject({ finish_reason: "tool_calls", message: { tool_calls: [{ id: "call_0", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] } });
    const messages = [...ASK.messages, { role: "assistant", content: null, tool_calls: first.choices[0].message.tool_calls }, { role: "tool", tool_call_id: "call_0", content: "{}" }];
    const second = scriptedCompletion({ ...ASK, messages } as never, { fixtures }).body as Json;
    expect(second.choices[0]).toMatchObject({ finish_reason: "stop", message: { content: "It is mild in Oslo." } });
  });
});
