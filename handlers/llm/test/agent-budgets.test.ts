/**
 * Agents side by side spend from one run budget (docs/llm.md, "Budgets the run keeps"): a composite starts two
 * `llm.agent` children in parallel under a run token budget that fits one model call; the call that fits is sent, the
 * other agent's is refused before it is sent and that agent ends by its budget, and what the run spent in all stays
 * within its budget. Through a whole fabric against the scripted stand-in on loopback.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { fabricFixture, type FabricFixture } from "@nodefabric/core/testing";
import { ChildFailedError, defineComposite, type ChildRun, type JsonObject } from "@nodefabric/sdk";
import { startLlmStandIn, type LlmStandIn, type StandInStep } from "@nodefabric/sdk/testing";
import { llmAgent, llmChat, resetLlmConfig } from "../src/index.js";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const AGENT = { node_type_id: "llm.agent", version: "1.0.0" };
const TWO = { node_type_id: "test.two-agents", version: "1.0.0" };
const USED = { prompt_tokens: 40, completion_tokens: 10, total_tokens: 50 };
const MAX_OUT = 400;

/** Two agents at once, each asked one question; each outcome as it came. */
const two = defineComposite<JsonObject, JsonObject>({
  nodeType: { node_type_id: TWO.node_type_id, version: TWO.version, description: "Two agents in parallel", input_schema: { type: "object" }, output_schema: { type: "object" } },
  async run(_inputs, ctx) {
    const outcome = async (c: ChildRun): Promise<JsonObject> => {
      try {
        return { state: "completed", outputs: (await c.result) as JsonObject };
      } catch (err) {
        if (!ChildFailedError.is(err)) throw err;
        return { state: "failed", error: err.error as unknown as JsonObject };
      }
    };
    const ask = (goal: string) => ctx.spawn(AGENT, { goal, tools: [], max_output_tokens: MAX_OUT });
    return { agents: await Promise.all([outcome(ask("Say one")), outcome(ask("Say two"))]) };
  },
});

let fabric: FabricFixture;
let llm: LlmStandIn;
const saved = { ...process.env };
let held: Array<() => void> = [];

beforeAll(async () => {
  llm = await startLlmStandIn({
    respond: async (): Promise<StandInStep> => {
      await new Promise<void>((resolve) => held.push(resolve));
      return { content: "done", usage: USED };
    },
  });
  Object.assign(process.env, { FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "gpt-test", FABRIC_LLM_API_KEY: "sk-agent-budgets" });
  resetLlmConfig();
  fabric = await fabricFixture({ definitions: [llmChat, llmAgent, two] });
});

afterAll(async () => {
  for (const release of held) release();
  await fabric?.close();
  await llm?.close();
  process.env = saved;
  resetLlmConfig();
});

async function until<T>(what: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await what();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe("two agents under one run budget", () => {
  it("the budget fits one model call: one agent's call is sent, the other's is refused unsent and it ends by its budget; the run spends within its budget", async () => {
    // One call reserves its prompt estimate plus MAX_OUT: a budget of 1.5 x MAX_OUT fits one call, not two.
    const budget = Math.floor(MAX_OUT * 1.5);
    const res = await fetch(`${fabric.urls["run-gateway"]}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ root_node_type_ref: TWO, input: {}, constraints: { extensions: { "nodefabric.llm.max_tokens": budget } } }),
    });
    expect(res.status).toBeLessThan(300);
    const runId = ((await res.json()) as Json).run_id;
    // The call that fit is in flight; the other was refused before it was sent.
    await until(async () => (llm.calls.length === 1 ? true : undefined));
    const refused: Json = await until(async () => (await fabric.nodeRuns(runId)).find((n: Json) => n.node_type_ref.node_type_id === "llm.chat" && n.state === "failed"));
    expect(refused.extensions["nodefabric.error"]).toMatchObject({ code: "budget_exhausted", details: { budget: "nodefabric.llm.max_tokens", limit: budget } });
    for (const release of held) release();
    held = [];
    const run: Json = await until(async () => {
      const r: Json = await (await fetch(`${fabric.urls["run-gateway"]}/v1/runs/${runId}`)).json();
      return ["completed", "failed"].includes(r.state) ? r : undefined;
    });
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    const agents: Json[] = run.extensions["nodefabric.outputs"].agents;
    expect(agents.map((a) => a.state)).toEqual(["completed", "completed"]);
    expect(agents.map((a) => a.outputs.ended_by).sort()).toEqual(["budget", "final"]);
    expect(agents.find((a) => a.outputs.ended_by === "final").outputs).toMatchObject({ answer: "done", usage: { total_tokens: USED.total_tokens, model_calls: 1 } });
    expect(llm.calls).toHaveLength(1);
    const usage = run.extensions["nodefabric.usage"];
    expect(usage).toMatchObject({ tokens: USED.total_tokens, reserved_tokens: 0 });
    const spent = agents.reduce((sum, a) => sum + (a.outputs.usage?.total_tokens ?? 0), 0);
    expect(spent).toBe(usage.tokens);
    expect(spent).toBeLessThanOrEqual(budget);
  });
});
