/**
 * llm.planner through a whole fabric (core's fabricFixture) against the scripted OpenAI-compatible stand-in on real
 * loopback HTTP: the calls a three-subtask plan makes, parallel waves, repairs, bounds, budgets, plan approval through
 * a Cedar policy, recovery, and a model that answers valid nonsense.
 */
import { describe, it, expect, beforeAll, afterAll, beforeEach } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { defineAtomic, HandlerError } from "@nodefabric/sdk";
import { fabricFixture, type FabricFixture } from "@nodefabric/core/testing";
import { startLlmStandIn, type ChatRequestBody, type LlmStandIn, type StandInStep } from "@nodefabric/sdk/testing";
import { llmChat, llmPlanner, planApproval, resetLlmConfig } from "../src/index.js";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const started: Record<string, number[]> = {};
function tool(id: string, side: "read" | "write" | "irreversible", props: Record<string, unknown>, description: string, run: (i: Json) => Json, delayMs = 0) {
  return defineAtomic<Json, Json>({
    nodeType: {
      node_type_id: id,
      version: "1.0.0",
      description,
      input_schema: { type: "object", properties: props, required: Object.keys(props), additionalProperties: false },
      output_schema: { type: "object" },
      constraints: { gates: { side_effect_class: side } },
    },
    async handler(inputs) {
      (started[id] ??= []).push(Date.now());
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      return run(inputs);
    },
  });
}

const weather = tool("test.weather", "read", { city: { type: "string", minLength: 1 } }, "Current weather in a city: temperature in celsius", (i) => ({ temp_c: i.city.length }), 300);
const fx = tool("test.fx", "read", { from: { type: "string" }, to: { type: "string" } }, "Exchange rate between two currencies", () => ({ rate: 1.1 }), 300);
const report = tool("test.report", "write", { text: { type: "string" } }, "Write a report from a text", (i) => ({ chars: i.text.length }));
const broken = defineAtomic<Json, Json>({
  nodeType: {
    node_type_id: "test.broken",
    version: "1.0.0",
    description: "Deliver a text, but always fails",
    input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"], additionalProperties: false },
    output_schema: { type: "object" },
    constraints: { gates: { side_effect_class: "read" } },
  },
  handler() {
    throw new HandlerError("broken", "this tool always fails", { retryable: false });
  },
});
let flakyCalls = 0;
const flaky = defineAtomic<Json, Json>({
  nodeType: {
    node_type_id: "test.flaky",
    version: "1.0.0",
    description: "Deliver a text; fails the first time",
    input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"], additionalProperties: false },
    output_schema: { type: "object" },
    constraints: { gates: { side_effect_class: "read" } },
  },
  handler() {
    if (flakyCalls++ === 0) throw new HandlerError("flaky", "failed the first time", { retryable: false });
    return { delivered: true };
  },
});
const pay = tool("test.pay", "irreversible", { amount: { type: "number" } }, "Send a payment of an amount", () => ({ sent: true }));

const TOOLS = ["test.weather", "test.fx", "test.report"];
const PLAN3 = {
  subtasks: [
    { id: "w", goal: "current weather in Oslo", after: [] },
    { id: "x", goal: "exchange rate EUR to NOK", after: [] },
    { id: "r", goal: "write a report of weather and rate", after: ["w", "x"] },
  ],
};

/** What the scripted model answers, by the planner's purpose (the schema name) and what the prompt holds. */
function brain(overrides: Partial<Record<string, (body: ChatRequestBody, first: Json) => StandInStep | undefined>> = {}) {
  return (body: ChatRequestBody): StandInStep | undefined => {
    const name = body.response_format?.json_schema?.name ?? body.tools?.[0]?.function.name;
    const firstUser = (body.messages ?? []).find((m) => m.role === "user");
    let first: Json = {};
    try {
      first = JSON.parse(String(firstUser?.content ?? "{}"));
    } catch {
      /* not JSON */
    }
    const o = overrides[name ?? ""]?.(body, first);
    if (o) return o;
    switch (name) {
      case "plan":
        return { content: PLAN3 };
      case "choose": {
        const id = first.subtask.id as string;
        return { content: { choice: { w: "test.weather@1.0.0", x: "test.fx@1.0.0", r: "test.report@1.0.0" }[id] ?? first.tools[0].name, reason: "fits" } };
      }
      case "inputs": {
        const sys = String(body.messages?.[0]?.content ?? "");
        if (sys.includes("test.weather")) return { content: { city: "Oslo" } };
        if (sys.includes("test.fx")) return { content: { from: "EUR", to: "NOK" } };
        if (sys.includes("test.report")) return { content: { text: JSON.stringify(first.earlier_results) } };
        return { content: {} };
      }
      case "evaluate":
        return { content: { summary: "Oslo is mild and the rate is 1.1.", success: true, recovery: [] } };
    }
    return undefined;
  };
}

let fabric: FabricFixture;
let llm: LlmStandIn;
let respond: (body: ChatRequestBody) => StandInStep | undefined | Promise<StandInStep | undefined> = brain();
let dir: string;
const saved = { ...process.env };

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "llm-planner-test-"));
  llm = await startLlmStandIn({ respond: (b) => respond(b) });
  writeFileSync(path.join(dir, "llm.json"), JSON.stringify({ prices: { "gpt-test": { input_per_million: 100, output_per_million: 200 } }, profiles: { expensive: { base_url: llm.url, model: "gpt-huge" } } }));
  Object.assign(process.env, { FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "gpt-test", FABRIC_LLM_API_KEY: "sk-planner-test", FABRIC_LLM_CONFIG: path.join(dir, "llm.json") });
  resetLlmConfig();
  fabric = await fabricFixture({ definitions: [llmChat, llmPlanner, planApproval, weather, fx, report, pay, broken, flaky] });
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
  respond = brain();
  for (const k of Object.keys(started)) delete started[k];
});

const purposes = () => llm.calls.map((c) => c.body.response_format?.json_schema?.name ?? c.body.tools?.[0]?.function.name);

async function startRun(input: Json, constraints?: Json): Promise<Json> {
  const res = await fetch(`${fabric.urls["run-gateway"]}/v1/runs`, {
    method: "POST",
    headers: { "content-type": "application/json", prefer: "wait=30" },
    body: JSON.stringify({ root_node_type_ref: { node_type_id: "llm.planner", version: "1.0.0" }, input, ...(constraints ? { constraints } : {}) }),
  });
  const body: Json = await res.json();
  expect(res.status, JSON.stringify(body)).toBeLessThan(300);
  return body.run ?? body;
}

const rootError = (run: Json) => run.extensions?.["nodefabric.error"];

describe("llm.planner", () => {
  it("runs a plan of three subtasks: the stand-in gets exactly the expected calls, each an llm.chat NodeRun with usage and cost", async () => {
    const run = await startRun({ goal: "Report Oslo's weather and the EUR/NOK rate", allowed_node_type_ids: TOOLS });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    expect(purposes()).toEqual(["plan", "choose", "choose", "choose", "inputs", "inputs", "inputs", "evaluate"]);
    const out = run.extensions["nodefabric.outputs"];
    expect(out.planner_summary).toBe("Oslo is mild and the rate is 1.1.");
    expect(out.child_node_runs.map((c: Json) => [c.subtask_id, c.node_type_ref.node_type_id, c.state])).toEqual([
      ["w", "test.weather", "completed"],
      ["x", "test.fx", "completed"],
      ["r", "test.report", "completed"],
    ]);
    // The report got the earlier subtasks' outputs through the model's inputs.
    expect(JSON.parse(llm.calls[6].body.messages!.find((m) => m.role === "user")!.content as string).earlier_results).toEqual({ w: { temp_c: 4 }, x: { rate: 1.1 } });
    const nrs: Json[] = await fabric.nodeRuns(run.run_id);
    const chats = nrs.filter((n) => n.node_type_ref.node_type_id === "llm.chat");
    expect(chats).toHaveLength(8);
    for (const c of chats) {
      expect(c.state).toBe("completed");
      expect(c.outputs.usage.total_tokens).toBeGreaterThan(0);
      expect(c.outputs.cost).toBeGreaterThan(0);
      expect(c.parent_node_run_id).toBe(run.root_node_run_id);
    }
    expect(out.usage.model_calls).toBe(8);
    expect(out.usage.cost).toBeCloseTo(chats.reduce((s, c) => s + c.outputs.cost, 0), 12);
    // w and x are independent: they ran side by side (each takes 300 ms).
    expect(Math.abs(started["test.weather"][0] - started["test.fx"][0])).toBeLessThan(250);
  });

  it("repairs invalid inputs once, with the validation errors in the second prompt; with repair_max 0 it fails planner_invalid_output", async () => {
    let bad = 0;
    respond = brain({ inputs: (body) => (String(body.messages?.[0]?.content).includes("test.weather") && bad++ === 0 ? { content: { city: "" } } : undefined) });
    const run = await startRun({ goal: "Oslo weather report", allowed_node_type_ids: TOOLS });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    const weatherInputs = llm.calls.filter((c) => purposes()[llm.calls.indexOf(c)] === "inputs" && String(c.body.messages?.[0]?.content).includes("test.weather"));
    expect(weatherInputs).toHaveLength(2);
    const repair = weatherInputs[1].body.messages!.at(-1)!.content as string;
    expect(repair).toContain("/city: must NOT have fewer than 1 characters");
    const nrs: Json[] = await fabric.nodeRuns(run.run_id);
    expect(nrs.filter((n) => n.node_type_ref.node_type_id === "llm.chat" && n.state === "failed").map((n) => n.extensions["nodefabric.error"].code)).toEqual(["llm_invalid_output"]);

    llm.calls.length = 0;
    bad = 0;
    const strict = await startRun({ goal: "Oslo weather report", allowed_node_type_ids: TOOLS, repair_max: 0 });
    expect(strict.state).toBe("failed");
    expect(rootError(strict)).toMatchObject({ code: "planner_invalid_output" });
  });

  it("fails a plan over max_steps before anything runs, and never cuts it", async () => {
    const run = await startRun({ goal: "three things", allowed_node_type_ids: TOOLS, max_steps: 2 });
    expect(run.state).toBe("failed");
    expect(rootError(run)).toMatchObject({ code: "planner_bound_exceeded", details: { bound: "max_steps", limit: 2, planned: 3 } });
    expect(purposes()).toEqual(["plan"]);
    const events: Json[] = await fabric.events(run.run_id);
    expect(events.some((e) => e.type === "node_run_completed" && e.data.error?.code === "planner_bound_exceeded")).toBe(true);
  });

  it("refuses a planner child at max_depth, and clamps a child planner's max_depth the model tried to raise", async () => {
    const oneStep = { subtasks: [{ id: "d", goal: "plan the weather part", after: [] }] };
    respond = brain({ plan: (_b, first) => (first.goal === "nested" ? { content: oneStep } : { content: { subtasks: [{ id: "w", goal: "current weather in Oslo", after: [] }] } }) });
    const atZero = await startRun({ goal: "nested", allowed_node_type_ids: ["llm.planner"], max_depth: 0 });
    expect(rootError(atZero)).toMatchObject({ code: "no_candidate", details: { refused: ["llm.planner@1.0.0"] } });

    respond = brain({
      plan: (_b, first) => (first.goal === "nested" ? { content: oneStep } : { content: { subtasks: [{ id: "w", goal: "current weather in Oslo", after: [] }] } }),
      inputs: (body) => (String(body.messages?.[0]?.content).includes("llm.planner") ? { content: { goal: "weather", max_depth: 5, max_steps: 50, allowed_node_type_ids: ["test.weather", "test.pay"] } } : undefined),
      choose: (_b, first) => ({ content: { choice: first.tools.find((t: Json) => t.name.startsWith(first.subtask.id === "d" ? "llm.planner" : "test.weather")).name } }),
    });
    const run = await startRun({ goal: "nested", allowed_node_type_ids: ["llm.planner", "test.weather"], max_depth: 1, max_steps: 3 });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    const nrs: Json[] = await fabric.nodeRuns(run.run_id);
    const child = nrs.find((n) => n.node_type_ref.node_type_id === "llm.planner" && n.node_run_id !== run.root_node_run_id);
    expect(child.inputs).toMatchObject({ goal: "weather", max_depth: 0, max_steps: 3, allowed_node_type_ids: ["test.weather"] });
  });

  it("never sends a call whose reservation passes max_cost, and max_external_calls 1 stops the planner after one call", async () => {
    const byCost = await startRun({ goal: "Oslo weather", allowed_node_type_ids: TOOLS }, { budgets: { max_cost: 0.0001 } });
    expect(byCost.state).toBe("failed");
    expect(JSON.stringify(rootError(byCost))).toContain("budget_exceeded");
    expect(llm.calls).toHaveLength(0);

    const byTokens = await startRun({ goal: "Oslo weather", allowed_node_type_ids: TOOLS }, { extensions: { "nodefabric.llm.max_tokens": 100 } });
    expect(rootError(byTokens)).toMatchObject({ code: "budget_exceeded", details: { budget: "nodefabric.llm.max_tokens" } });
    expect(llm.calls).toHaveLength(0);

    const byCalls = await startRun({ goal: "Oslo weather", allowed_node_type_ids: TOOLS }, { budgets: { max_external_calls: 1 } });
    expect(byCalls.state).toBe("failed");
    expect(rootError(byCalls)).toMatchObject({ code: "budget_exceeded", details: { budget: "max_external_calls" } });
    expect(purposes()).toEqual(["plan"]);
  });

  it("recovers a failed subtask with remap: the next candidate, with new inputs, recorded as an evaluation", async () => {
    let evaluated = 0;
    respond = brain({
      plan: () => ({ content: { subtasks: [{ id: "p", goal: "deliver a summary text", after: [] }] } }),
      choose: (_b, first) => ({ content: { choice: first.tools[0].name } }),
      inputs: () => ({ content: { text: "summary" } }),
      evaluate: () => (evaluated++ === 0 ? { content: { summary: "the first tool failed", success: false, recovery: [{ subtask_id: "p", action: "remap", reason: "try another tool" }] } } : undefined),
    });
    const run = await startRun({ goal: "deliver", allowed_node_type_ids: ["test.broken", "test.report"] });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    expect(purposes()).toEqual(["plan", "choose", "inputs", "evaluate", "inputs", "evaluate"]);
    const out = run.extensions["nodefabric.outputs"];
    expect(out.child_node_runs[0]).toMatchObject({ subtask_id: "p", node_type_ref: { node_type_id: "test.report" }, state: "completed", recovery: "remap" });
    const events: Json[] = await fabric.events(run.run_id);
    expect(events.some((e) => e.type === "node_evaluated" && e.data.evaluation_result.details?.remap_to === "test.report@1.0.0")).toBe(true);
  });

  it("recovers with retry: the same node type and inputs as a new child, recorded as an evaluation", async () => {
    flakyCalls = 0;
    let evaluated = 0;
    respond = brain({
      plan: () => ({ content: { subtasks: [{ id: "f", goal: "deliver a text", after: [] }] } }),
      inputs: () => ({ content: { text: "hello" } }),
      evaluate: () => (evaluated++ === 0 ? { content: { summary: "it failed once", success: false, recovery: [{ subtask_id: "f", action: "retry", reason: "transient" }] } } : undefined),
    });
    const run = await startRun({ goal: "deliver", allowed_node_type_ids: ["test.flaky"] });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    expect(purposes()).toEqual(["plan", "inputs", "evaluate", "evaluate"]);
    const out = run.extensions["nodefabric.outputs"];
    expect(out.child_node_runs[0]).toMatchObject({ subtask_id: "f", state: "completed", outputs: { delivered: true }, recovery: "retry" });
    const nrs: Json[] = await fabric.nodeRuns(run.run_id);
    expect(nrs.filter((n) => n.node_type_ref.node_type_id === "test.flaky").map((n) => n.state).sort()).toEqual(["completed", "failed"]);
  });

  it("recovers with decompose_further: a child planner one level deeper, whose own bounds are clamped", async () => {
    const evaluations: Record<string, number> = {};
    respond = brain({
      plan: (_b, first) => ({ content: { subtasks: [first.goal === "deliver" ? { id: "p", goal: "deliver a summary text", after: [] } : { id: "q", goal: "write the report", after: [] }] } }),
      choose: (_b, first) => ({ content: { choice: first.tools.find((t: Json) => t.name.startsWith(first.subtask.id === "p" ? "test.broken" : "test.report")).name } }),
      inputs: () => ({ content: { text: "summary" } }),
      evaluate: (_b, first) => {
        const n = (evaluations[first.goal] = (evaluations[first.goal] ?? 0) + 1);
        if (first.goal === "deliver" && n === 1) return { content: { summary: "broken", success: false, recovery: [{ subtask_id: "p", action: "decompose_further", reason: "plan it in smaller steps" }] } };
        return undefined;
      },
    });
    const run = await startRun({ goal: "deliver", allowed_node_type_ids: ["test.broken", "test.report"], max_depth: 1 }, { extensions: { "nodefabric.llm.max_tokens": 100000 } });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    const out = run.extensions["nodefabric.outputs"];
    expect(out.child_node_runs[0]).toMatchObject({ subtask_id: "p", node_type_ref: { node_type_id: "llm.planner" }, state: "completed", recovery: "decompose_further" });
    const nrs: Json[] = await fabric.nodeRuns(run.run_id);
    const child = nrs.find((n) => n.node_type_ref.node_type_id === "llm.planner" && n.node_run_id !== run.root_node_run_id);
    expect(child.inputs).toMatchObject({ goal: "deliver a summary text", max_depth: 0 });
    expect(child.outputs.child_node_runs[0]).toMatchObject({ node_type_ref: { node_type_id: "test.report" }, state: "completed" });
    // The child planner got only the tokens its parent had left, and what it spent counts in the parent's usage.
    const childBudget = child.extensions["nodefabric.constraints"].extensions["nodefabric.llm.max_tokens"];
    expect(childBudget).toBeLessThan(100000);
    expect(childBudget).toBeGreaterThan(0);
    expect(out.usage.model_calls).toBe(llm.calls.length);
    expect(out.usage.total_tokens).toBe(nrs.filter((n) => n.node_type_ref.node_type_id === "llm.chat").reduce((sum, n) => sum + n.outputs.usage.total_tokens, 0));

    // At depth 0 the same request is refused and recorded, and the run ends with the failure.
    for (const k of Object.keys(evaluations)) delete evaluations[k];
    const flat = await startRun({ goal: "deliver", allowed_node_type_ids: ["test.broken", "test.report"], max_depth: 0 });
    expect(flat.state).toBe("completed");
    expect(flat.extensions["nodefabric.outputs"]).toMatchObject({ success: false, child_node_runs: [{ subtask_id: "p", state: "failed" }] });
    const events: Json[] = await fabric.events(flat.run_id);
    expect(events.some((e) => e.type === "node_evaluated" && e.data.evaluation_result.reason_code === "max_depth")).toBe(true);
  });

  it("a cancel in the middle of a model call aborts the request, and the run ends canceled", async () => {
    respond = brain({ plan: () => ({ fail: "hang" }) });
    const res = await fetch(`${fabric.urls["run-gateway"]}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ root_node_type_ref: { node_type_id: "llm.planner", version: "1.0.0" }, input: { goal: "hang", allowed_node_type_ids: TOOLS } }),
    });
    const run: Json = await res.json();
    await llm.waitForCalls(1);
    expect((await fetch(`${fabric.urls["run-gateway"]}/v1/runs/${run.run_id}:cancel`, { method: "POST" })).status).toBeLessThan(300);
    for (let i = 0; i < 100 && !llm.calls[0].aborted; i++) await new Promise((r) => setTimeout(r, 50));
    expect(llm.calls[0].aborted).toBe(true);
    const after: Json = await (await fetch(`${fabric.urls["run-gateway"]}/v1/runs/${run.run_id}`)).json();
    expect(after.state).toBe("canceled");
    const nrs: Json[] = await fabric.nodeRuns(run.run_id);
    expect(nrs.every((n) => n.state === "canceled")).toBe(true);
  });

  it("plans as data: a declarative plan checked by the fabric's compiler (a bad one repaired), its independent steps run in parallel", async () => {
    const ref = (id: string) => ({ node_type_id: id, version: "1.0.0" });
    const good = {
      steps: [
        { id: "w", node_type_ref: ref("test.weather"), inputs: { city: "Oslo" } },
        { id: "x", node_type_ref: ref("test.fx"), inputs: { from: "EUR", to: "NOK" } },
        { id: "r", node_type_ref: ref("test.report"), inputs: { text: "{% $string(steps.w.outputs.temp_c) & ' / ' & $string(steps.x.outputs.rate) %}" } },
      ],
      outputs: { report: "{% steps.r.outputs %}" },
    };
    let plans = 0;
    respond = brain({
      // First a plan whose last step reads a step that does not exist, then the good one.
      plan: () => ({ content: plans++ === 0 ? { ...good, steps: [...good.steps.slice(0, 2), { ...good.steps[2], inputs: { text: "{% steps.nope.outputs %}" } }] } : good }),
    });
    const run = await startRun({ goal: "Report Oslo's weather and the EUR/NOK rate", allowed_node_type_ids: TOOLS, mode: "plan" });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    expect(purposes()).toEqual(["plan", "plan", "evaluate"]);
    expect(llm.calls[1].body.messages!.at(-1)!.content).toMatch(/nope/);
    const out = run.extensions["nodefabric.outputs"];
    expect(out.plan_outputs).toEqual({ report: { chars: 7 } });
    expect(out.child_node_runs.map((c: Json) => [c.node_type_ref.node_type_id, c.state])).toEqual([
      ["test.weather", "completed"],
      ["test.fx", "completed"],
      ["test.report", "completed"],
    ]);
    expect(Math.abs(started["test.weather"][0] - started["test.fx"][0])).toBeLessThan(250);

    // A step outside the candidate set is refused, and never run.
    llm.calls.length = 0;
    respond = brain({ plan: () => ({ content: { steps: [{ id: "p", node_type_ref: ref("test.pay"), inputs: { amount: 1 } }], outputs: {} } }) });
    const outside = await startRun({ goal: "pay", allowed_node_type_ids: TOOLS, mode: "plan", repair_max: 0 });
    expect(rootError(outside)).toMatchObject({ code: "planner_invalid_output" });
    expect(started["test.pay"]).toBeUndefined();
  });

  it("a model that answers arbitrary schema-valid values (json-schema-faker, seeded) never hangs or crashes the planner", async () => {
    const { generate } = await import("json-schema-faker");
    const DOCUMENTED = new Set(["planner_invalid_output", "planner_bound_exceeded", "no_candidate", "planner_aborted", "approval_rejected"]);
    for (let seed = 1; seed <= 10; seed++) {
      let n = 0;
      // Odd seeds: every answer arbitrary. Even seeds: arbitrary too, but with the plan's ids and references (and the
      // evaluation's subtask ids) made consistent, so the run gets past planning into choosing, mapping and recovery.
      respond = async (body) => {
        const schema = body.response_format?.json_schema?.schema;
        if (!schema) return undefined;
        const value = (await generate(schema as never, { seed: seed * 1000 + n++ })) as Json;
        const name = body.response_format?.json_schema?.name;
        if (seed % 2 === 0 && name === "plan" && Array.isArray(value.subtasks)) {
          value.subtasks = value.subtasks.map((st: Json, i: number) => ({ ...st, id: `s${i}`, after: (st.after ?? []).slice(0, i).map((_: unknown, k: number) => `s${k}`) }));
        }
        if (seed % 2 === 0 && name === "evaluate" && Array.isArray(value.recovery)) {
          const ids: string[] = (JSON.parse(String(body.messages?.find((m) => m.role === "user")?.content ?? "{}")).subtasks ?? []).map((x: Json) => x.id);
          value.recovery = ids.length ? value.recovery.map((r: Json, i: number) => ({ ...r, subtask_id: ids[i % ids.length] })) : [];
        }
        return { content: value };
      };
      llm.calls.length = 0;
      const t0 = Date.now();
      const run = await startRun({ goal: `anything ${seed}`, allowed_node_type_ids: TOOLS, max_steps: 3, repair_max: 1, max_replans: 1 });
      expect(["completed", "failed"]).toContain(run.state);
      if (run.state === "failed") expect(DOCUMENTED, JSON.stringify(rootError(run))).toContain(rootError(run).code);
      expect(llm.calls.length).toBeLessThanOrEqual(30);
      expect(Date.now() - t0).toBeLessThan(15_000);
    }
  }, 60_000);

  it("a model that answers schema-valid nonsense ends the run with a documented code, within bounds", async () => {
    respond = () => undefined; // the stand-in builds schema-valid answers
    const run = await startRun({ goal: "anything", allowed_node_type_ids: TOOLS, repair_max: 2 });
    expect(run.state).toBe("failed");
    expect(["planner_invalid_output", "no_candidate", "planner_bound_exceeded"]).toContain(rootError(run).code);
    expect(llm.calls.length).toBeLessThanOrEqual(3);
  });
});

describe("llm.planner under a policy", () => {
  let gov: FabricFixture;
  let policyDir: string;
  beforeAll(async () => {
    policyDir = mkdtempSync(path.join(os.tmpdir(), "llm-planner-policy-"));
    const policy = path.join(policyDir, "policy.cedar");
    writeFileSync(
      policy,
      [
        '@id("approve-gated")',
        '@require_approval("true")',
        'permit(principal, action == NodeFabric::Action::"node.run.execute", resource) when { context.require_approval };',
        '@id("no-expensive-model")',
        'forbid(principal, action, resource) when { context has labels && context.labels has "nodefabric.llm.profile" && context.labels["nodefabric.llm.profile"] == "expensive" };',
        '@id("no-irreversible")',
        'forbid(principal, action, resource) when { context has side_effect_class && context.side_effect_class == "irreversible" };',
        '@id("allow-rest")',
        "permit(principal, action, resource) unless { context.require_approval && action == NodeFabric::Action::\"node.run.execute\" };",
        "",
      ].join("\n"),
    );
    gov = await fabricFixture({ definitions: [llmChat, llmPlanner, planApproval, weather, fx, report, pay, broken], policy });
  });
  afterAll(async () => {
    await gov?.close();
    rmSync(policyDir, { recursive: true, force: true });
  });

  async function start(input: Json): Promise<Json> {
    const res = await fetch(`${gov.urls["run-gateway"]}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ root_node_type_ref: { node_type_id: "llm.planner", version: "1.0.0" }, input }),
    });
    const body: Json = await res.json();
    expect(res.status, JSON.stringify(body)).toBeLessThan(300);
    return body.run ?? body;
  }
  async function pendingApproval(runId: string): Promise<Json> {
    for (let i = 0; i < 200; i++) {
      const list: Json[] = await (await fetch(`${gov.urls["run-gateway"]}/v1/approvals?run_id=${runId}&state=pending`)).json();
      if (list.length > 0) return list[0];
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no approval was requested: ${JSON.stringify((await gov.events(runId)).map((e: Json) => [e.type, e.data]))}`);
  }
  async function ended(runId: string): Promise<Json> {
    for (let i = 0; i < 300; i++) {
      const run: Json = await (await fetch(`${gov.urls["run-gateway"]}/v1/runs/${runId}`)).json();
      if (["completed", "failed", "canceled"].includes(run.state)) return run;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error("the run did not end");
  }

  it("waits for one approval of the plan: nothing runs before it; approve continues", async () => {
    const run = await start({ goal: "Report Oslo's weather and the EUR/NOK rate", allowed_node_type_ids: TOOLS, require_approval: true });
    const approval = await pendingApproval(run.run_id);
    expect(approval.node_type_ref.node_type_id).toBe("llm.plan-approval");
    const nrs: Json[] = await gov.nodeRuns(run.run_id);
    const waiting = nrs.find((n) => n.node_run_id === approval.node_run_id);
    expect(waiting.inputs.steps.map((s: Json) => [s.node_type, s.side_effect_class])).toEqual([
      ["test.weather@1.0.0", "read"],
      ["test.fx@1.0.0", "read"],
      ["test.report@1.0.0", "write"],
    ]);
    expect(waiting.inputs.side_effects).toEqual(["read", "write"]);
    await new Promise((r) => setTimeout(r, 300));
    const before = llm.calls.length;
    expect(purposes()).toEqual(["plan", "choose", "choose", "choose"]);
    expect(started["test.weather"]).toBeUndefined();
    const res = await fetch(`${gov.urls["run-gateway"]}/v1/approvals/${approval.approval_id}:approve`, { method: "POST" });
    expect(res.status).toBe(204);
    const done = await ended(run.run_id);
    expect(done.state).toBe("completed");
    expect(llm.calls.length).toBe(before + 4);
  });

  it("reject ends the run with the reason", async () => {
    const run = await start({ goal: "Report Oslo's weather and the EUR/NOK rate", allowed_node_type_ids: TOOLS, require_approval: true });
    const approval = await pendingApproval(run.run_id);
    const res = await fetch(`${gov.urls["run-gateway"]}/v1/approvals/${approval.approval_id}:reject`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ reason: "not today" }),
    });
    expect(res.status).toBe(204);
    const done = await ended(run.run_id);
    expect(done.state).toBe("failed");
    expect(rootError(done).code).toBe("approval_rejected");
    expect(JSON.stringify(rootError(done))).toContain("not today");
    expect(started["test.weather"]).toBeUndefined();
  });

  it("a node type with irreversible side effects is refused by Cedar, with the decision recorded", async () => {
    respond = brain({
      plan: () => ({ content: { subtasks: [{ id: "p", goal: "send a payment", after: [] }] } }),
      inputs: () => ({ content: { amount: 10 } }),
      evaluate: () => ({ content: { summary: "the payment was refused", success: false, recovery: [] } }),
    });
    const run = await start({ goal: "pay", allowed_node_type_ids: ["test.pay"] });
    const done = await ended(run.run_id);
    const out = done.extensions["nodefabric.outputs"];
    expect(done.state, JSON.stringify(rootError(done))).toBe("completed");
    expect(out.success).toBe(false);
    expect(out.child_node_runs[0]).toMatchObject({ subtask_id: "p", state: "failed", error: { code: "policy_denied" } });
    const events: Json[] = await gov.events(run.run_id);
    expect(events.some((e) => e.type === "policy_decided" && e.data.decision === "deny" && e.node_run_id === out.child_node_runs[0].node_run_id)).toBe(true);
    expect(started["test.pay"]).toBeUndefined();
  });

  it("Cedar denies a model profile: the model call is refused before it is sent, with the decision recorded", async () => {
    const run = await start({ goal: "Oslo weather", allowed_node_type_ids: TOOLS, profile: "expensive" });
    const done = await ended(run.run_id);
    expect(done.state).toBe("failed");
    expect(rootError(done)).toMatchObject({ code: "policy_denied" });
    expect(llm.calls).toHaveLength(0);
    const events: Json[] = await gov.events(run.run_id);
    const nrs: Json[] = await gov.nodeRuns(run.run_id);
    const chat = nrs.find((n) => n.node_type_ref.node_type_id === "llm.chat");
    const decided = events.find((e) => e.type === "policy_decided" && e.node_run_id === chat.node_run_id);
    expect(decided.data).toMatchObject({ action: "node.run.create", decision: "deny", reason_code: "denied_by:no-expensive-model" });
    expect(chat.extensions["nodefabric.metadata"].labels).toMatchObject({
      "nodefabric.llm.purpose": "plan",
      "nodefabric.llm.profile": "expensive",
      "nodefabric.llm.endpoint": new URL(llm.url).host,
      "nodefabric.llm.reserved_tokens": expect.stringMatching(/^\d+$/),
    });
  });

  it("ask_user waits for a person; approving accepts the failure and the run completes", async () => {
    let evaluated = 0;
    respond = brain({
      plan: () => ({ content: { subtasks: [{ id: "b", goal: "deliver a text", after: [] }] } }),
      inputs: () => ({ content: { text: "x" } }),
      evaluate: () => (evaluated++ === 0 ? { content: { summary: "it broke", success: false, recovery: [{ subtask_id: "b", action: "ask_user", reason: "should we go on without it?" }] } } : { content: { summary: "went on without it", success: false, recovery: [] } }),
    });
    const run = await start({ goal: "deliver", allowed_node_type_ids: ["test.broken"] });
    const approval = await pendingApproval(run.run_id);
    const nrs: Json[] = await gov.nodeRuns(run.run_id);
    expect(nrs.find((n) => n.node_run_id === approval.node_run_id).inputs.question).toBe("should we go on without it?");
    expect((await fetch(`${gov.urls["run-gateway"]}/v1/approvals/${approval.approval_id}:approve`, { method: "POST" })).status).toBe(204);
    const done = await ended(run.run_id);
    expect(done.state, JSON.stringify(rootError(done))).toBe("completed");
    expect(done.extensions["nodefabric.outputs"]).toMatchObject({ success: false, planner_summary: "went on without it", child_node_runs: [{ subtask_id: "b", state: "failed", recovery: "ask_user: accepted" }] });
  });
});
