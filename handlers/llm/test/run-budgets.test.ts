/**
 * Budgets the run keeps (docs/llm.md): each llm.chat call reserves its prompt and max_output_tokens (and their cost at
 * the coordinator's prices) from the run before it is sent. Two calls in parallel under one run budget that fits only
 * one of them: one is sent, the other fails budget_exhausted naming what was left and what it asked, and is never
 * sent; GET /v1/runs/{id} shows the reservation while the call is in flight and what was used after; the unused part
 * is released, so a later call fits again. Through a whole fabric against the scripted stand-in on loopback.
 */
import { describe, it, expect, beforeAll, afterAll, beforeEach } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fabricFixture, type FabricFixture } from "@nodefabric/core/testing";
import { ChildFailedError, defineComposite, type ChildRun, type JsonObject } from "@nodefabric/sdk";
import { startLlmStandIn, type ChatRequestBody, type LlmStandIn, type StandInStep } from "@nodefabric/sdk/testing";
import { llmChat, resetLlmConfig } from "../src/index.js";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const CHAT = { node_type_id: "llm.chat", version: "1.0.0" };
const PAIR = { node_type_id: "test.budget-pair", version: "1.0.0" };
const PRICES = { "gpt-test": { input_per_million: 1000, output_per_million: 2000 } };
const MAX_OUT = 300;
/** The prompt of `[{"role":"user","content":"first"}]` at 4 characters a token, plus max_output_tokens. */
const RESERVED = Math.ceil(JSON.stringify([{ role: "user", content: "first" }]).length / 4) + MAX_OUT;
/** Its cost at PRICES: what the coordinator reserves (the model is gpt-test, named in the inputs). */
const RESERVED_COST = (Math.ceil(JSON.stringify([{ role: "user", content: "first" }]).length / 4) * 1000 + MAX_OUT * 2000) / 1_000_000;
const USED = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };

/** Two llm.chat calls side by side, then (when asked) a third once both have ended; each outcome as it came. */
const pair = defineComposite<{ third?: boolean }, JsonObject>({
  nodeType: {
    node_type_id: PAIR.node_type_id,
    version: PAIR.version,
    description: "Two model calls in parallel, then maybe a third",
    input_schema: { type: "object", properties: { third: { type: "boolean" } }, additionalProperties: false },
    output_schema: { type: "object" },
  },
  async run(inputs, ctx) {
    const call = (text: string) => ctx.spawn(CHAT, { messages: [{ role: "user", content: text }], max_output_tokens: MAX_OUT, model: "gpt-test" });
    const outcome = async (c: ChildRun): Promise<JsonObject> => {
      try {
        const out = await c.result;
        return { state: "completed", usage: out.usage ?? null, node_run_id: await c.node_run_id };
      } catch (err) {
        if (!ChildFailedError.is(err)) throw err;
        return { state: "failed", error: err.error as unknown as JsonObject, node_run_id: err.node_run_id };
      }
    };
    // Texts of one length, so both reserve the same.
    const both = await Promise.all([outcome(call("first")), outcome(call("fir5t"))]);
    const after = inputs.third ? await outcome(call("third")) : null;
    return { both, after };
  },
});

let fabric: FabricFixture;
let llm: LlmStandIn;
let dir: string;
const saved = { ...process.env };
/** Answers held until the test lets them go. */
let held: Array<() => void> = [];
let hold = false;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "llm-run-budgets-"));
  llm = await startLlmStandIn({
    respond: async (_b: ChatRequestBody): Promise<StandInStep> => {
      if (hold) await new Promise<void>((resolve) => held.push(resolve));
      return { content: "ok", usage: USED };
    },
  });
  writeFileSync(path.join(dir, "llm.json"), JSON.stringify({ prices: PRICES }));
  Object.assign(process.env, { FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "gpt-test", FABRIC_LLM_API_KEY: "sk-budgets", FABRIC_LLM_CONFIG: path.join(dir, "llm.json") });
  resetLlmConfig();
  fabric = await fabricFixture({ definitions: [llmChat, pair], modelPrices: PRICES });
});

afterAll(async () => {
  for (const release of held) release();
  await fabric?.close();
  await llm?.close();
  process.env = saved;
  resetLlmConfig();
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  llm.calls.length = 0;
  held = [];
  hold = false;
});

async function getRun(runId: string): Promise<Json> {
  const res = await fetch(`${fabric.urls["run-gateway"]}/v1/runs/${runId}`);
  expect(res.status).toBe(200);
  return res.json();
}

async function startPair(input: Json, constraints: Json, wait = 30): Promise<Json> {
  const res = await fetch(`${fabric.urls["run-gateway"]}/v1/runs`, {
    method: "POST",
    headers: { "content-type": "application/json", prefer: `wait=${wait}` },
    body: JSON.stringify({ root_node_type_ref: PAIR, input, constraints }),
  });
  const body: Json = await res.json();
  expect(res.status, JSON.stringify(body)).toBeLessThan(300);
  return body.run ?? body;
}

async function until<T>(what: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await what();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 25));
  }
}

const usageOf = (run: Json) => run.extensions?.["nodefabric.usage"];

describe("budgets the run keeps", () => {
  it("two parallel calls under a token budget that fits one: one is sent, the other fails budget_exhausted unsent; GET shows reserved, then used; the rest is released", async () => {
    const budget = RESERVED + Math.floor(RESERVED / 2);
    hold = true;
    const started = await startPair({ third: true }, { extensions: { "nodefabric.llm.max_tokens": budget } }, 0);
    // While the one call that fit is in flight, the run shows its reservation, and nothing used yet.
    await until(async () => (llm.calls.length === 1 ? true : undefined));
    const during = await until(async () => {
      const r = await getRun(started.run_id);
      return usageOf(r)?.reserved_tokens === RESERVED ? r : undefined;
    });
    expect(usageOf(during)).toMatchObject({ tokens: 0, reserved_tokens: RESERVED });
    expect(during.extensions["nodefabric.budgets"]).toMatchObject({ max_tokens: budget });
    // The other was refused before it was sent.
    const refused: Json = await until(async () => (await fabric.nodeRuns(started.run_id)).find((n: Json) => n.node_type_ref.node_type_id === "llm.chat" && n.state === "failed"));
    expect(refused.extensions["nodefabric.error"]).toMatchObject({
      code: "budget_exhausted",
      retryable: false,
      details: { budget: "nodefabric.llm.max_tokens", limit: budget, used: 0, reserved: RESERVED, remaining: budget - RESERVED, asked: RESERVED },
    });
    expect(llm.calls).toHaveLength(1);

    hold = false;
    for (const release of held) release();
    const run = await until(async () => {
      const r = await getRun(started.run_id);
      return ["completed", "failed"].includes(r.state) ? r : undefined;
    });
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    const out = run.extensions["nodefabric.outputs"];
    expect(out.both.map((o: Json) => o.state).sort()).toEqual(["completed", "failed"]);
    // Settled to what the call used: the unused part went back, so a third call of the same size fit.
    expect(out.after).toMatchObject({ state: "completed", usage: USED });
    expect(llm.calls).toHaveLength(2);
    const refusedText = out.both[0].state === "failed" ? "first" : "fir5t";
    expect(llm.calls.map((c) => (c.body.messages![0] as Json).content)).not.toContain(refusedText);
    expect(usageOf(run)).toMatchObject({ tokens: 2 * USED.total_tokens, reserved_tokens: 0, reserved_cost: 0 });
    expect(usageOf(run).tokens).toBeLessThanOrEqual(budget);
    // No reservation is left on any NodeRun.
    for (const n of await fabric.nodeRuns(run.run_id)) expect(n.extensions?.["nodefabric.reservation"]).toBeUndefined();
  });

  it("two parallel calls under a max_cost that fits one: the one that does not fit fails budget_exhausted on max_cost; cost reserved is priced by the coordinator", async () => {
    const maxCost = RESERVED_COST * 1.5;
    hold = true;
    const started = await startPair({}, { budgets: { max_cost: maxCost } }, 0);
    await until(async () => (llm.calls.length === 1 ? true : undefined));
    const during = await until(async () => {
      const r = await getRun(started.run_id);
      return usageOf(r)?.reserved_tokens === RESERVED ? r : undefined;
    });
    expect(usageOf(during).reserved_cost).toBeCloseTo(RESERVED_COST, 9);
    expect(usageOf(during).cost).toBe(0);
    hold = false;
    for (const release of held) release();
    const run = await until(async () => {
      const r = await getRun(started.run_id);
      return ["completed", "failed"].includes(r.state) ? r : undefined;
    });
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    const failed = run.extensions["nodefabric.outputs"].both.find((o: Json) => o.state === "failed");
    expect(failed.error).toMatchObject({ code: "budget_exhausted", details: { budget: "max_cost", limit: maxCost, used: 0 } });
    expect(failed.error.details.remaining).toBeCloseTo(maxCost - RESERVED_COST, 9);
    expect(failed.error.details.asked).toBeCloseTo(RESERVED_COST, 9);
    expect(llm.calls).toHaveLength(1);
    // Settled: the cost the call reported (10 prompt and 5 output tokens at PRICES) and nothing reserved.
    expect(usageOf(run).cost).toBeCloseTo((10 * 1000 + 5 * 2000) / 1_000_000, 9);
    expect(usageOf(run)).toMatchObject({ tokens: USED.total_tokens, reserved_tokens: 0, reserved_cost: 0 });
  });

  it("a run of one llm.chat whose reservation passes the token budget fails budget_exhausted, and nothing is sent", async () => {
    const res = await fetch(`${fabric.urls["run-gateway"]}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json", prefer: "wait=30" },
      body: JSON.stringify({ root_node_type_ref: CHAT, input: { messages: [{ role: "user", content: "hi" }], max_output_tokens: 1000 }, constraints: { extensions: { "nodefabric.llm.max_tokens": 999 } } }),
    });
    const run: Json = await res.json();
    expect(run.state).toBe("failed");
    expect(run.extensions["nodefabric.error"]).toMatchObject({ code: "budget_exhausted", details: { budget: "nodefabric.llm.max_tokens", limit: 999, remaining: 999 } });
    expect(run.extensions["nodefabric.error"].details.asked).toBeGreaterThan(1000);
    expect(llm.calls).toHaveLength(0);
    expect(usageOf(run)).toMatchObject({ external_calls: 0 });
  });
});
