/**
 * llm.agent through a whole fabric (core's fabricFixture) under a Cedar policy, against the scripted OpenAI-compatible
 * stand-in on loopback: a model that calls tools then answers, parallel tool calls, a model that always calls its
 * first tool (the loop ends on its bounds), unknown tools and bad arguments (errors back to the model, nothing run),
 * a structured final answer, tools the PDP denies (before the model sees them, and on the call), a tool that waits
 * for a person's approval, and a handoff to another agent whose bounds only shrink.
 */
import { describe, it, expect, beforeAll, afterAll, beforeEach } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { defineAtomic } from "@nodefabric/sdk";
import { fabricFixture, type FabricFixture } from "@nodefabric/core/testing";
import { startLlmStandIn, type ChatRequestBody, type LlmStandIn, type StandInStep } from "@nodefabric/sdk/testing";
import { functionNameOf, llmAgent, llmChat, resetLlmConfig } from "../src/index.js";
import { fx, pay, started, weather, type Json } from "./support/planner-kit.js";

function tool(id: string, side: "read" | "write", extra: Record<string, unknown> = {}) {
  return defineAtomic<Json, Json>({
    nodeType: {
      node_type_id: id,
      version: "1.0.0",
      description: `Test tool ${id}: takes a text`,
      input_schema: { type: "object", properties: { text: { type: "string", minLength: 1 } }, required: ["text"], additionalProperties: false },
      output_schema: { type: "object" },
      constraints: { gates: { side_effect_class: side, ...extra } },
    },
    handler(inputs) {
      (started[id] ??= []).push(Date.now());
      return { done: inputs.text };
    },
  });
}
const notify = tool("test.notify", "write");
/** Answers once another call of it is running at the same time (met), or after 15 s alone (not met). */
let meeting = 0;
const meet = defineAtomic<Json, Json>({
  nodeType: {
    node_type_id: "test.meet",
    version: "1.0.0",
    description: "Waits for another caller to meet",
    input_schema: { type: "object", properties: { who: { type: "string" } }, required: ["who"], additionalProperties: false },
    output_schema: { type: "object" },
    constraints: { gates: { side_effect_class: "read" } },
  },
  async handler() {
    meeting++;
    const until = Date.now() + 15_000;
    while (meeting < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    return { met: meeting >= 2 };
  },
});
const ship = tool("test.ship", "write", { require_approval: true });

let fabric: FabricFixture;
let llm: LlmStandIn;
let respond: (body: ChatRequestBody) => StandInStep | undefined = () => undefined;
let dir: string;
const saved = { ...process.env };

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "llm-agent-test-"));
  llm = await startLlmStandIn({ respond: (b) => respond(b) });
  writeFileSync(path.join(dir, "llm.json"), JSON.stringify({ prices: { "gpt-test": { input_per_million: 100, output_per_million: 200 } } }));
  Object.assign(process.env, { FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "gpt-test", FABRIC_LLM_API_KEY: "sk-agent-test", FABRIC_LLM_CONFIG: path.join(dir, "llm.json") });
  resetLlmConfig();
  const policy = path.join(dir, "policy.cedar");
  writeFileSync(
    policy,
    [
      '@id("approve-gated")',
      '@require_approval("true")',
      'permit(principal, action == NodeFabric::Action::"node.run.execute", resource) when { context.require_approval };',
      '@id("no-irreversible")',
      'forbid(principal, action, resource) when { context has side_effect_class && context.side_effect_class == "irreversible" };',
      '@id("no-notify-from-agents")',
      'forbid(principal, action == NodeFabric::Action::"node.run.create", resource == NodeFabric::NodeType::"test.notify") when { context has labels && context.labels has "nodefabric.llm.agent.tool_call" };',
      '@id("allow-rest")',
      'permit(principal, action, resource) unless { context.require_approval && action == NodeFabric::Action::"node.run.execute" };',
      "",
    ].join("\n"),
  );
  fabric = await fabricFixture({ definitions: [llmChat, llmAgent, weather, fx, pay, notify, ship, meet], policy });
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
  respond = () => undefined;
  for (const k of Object.keys(started)) delete started[k];
});

const AGENT = { node_type_id: "llm.agent", version: "1.0.0" };
const rootError = (run: Json) => run.extensions?.["nodefabric.error"];
const outputs = (run: Json) => run.extensions?.["nodefabric.outputs"];
/** The tool messages of a request, parsed. */
const toolResults = (body: ChatRequestBody) => (body.messages ?? []).filter((m) => m.role === "tool").map((m) => ({ id: m.tool_call_id, ...JSON.parse(String(m.content)) }));
const turnOf = (body: ChatRequestBody) => (body.messages ?? []).filter((m) => m.role === "assistant").length;

async function start(input: Json, o: { wait?: boolean; constraints?: Json } = {}): Promise<Json> {
  const res = await fetch(`${fabric.urls["run-gateway"]}/v1/runs`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(o.wait === false ? {} : { prefer: "wait=30" }) },
    body: JSON.stringify({ root_node_type_ref: AGENT, input, ...(o.constraints ? { constraints: o.constraints } : {}) }),
  });
  const body: Json = await res.json();
  expect(res.status, JSON.stringify(body)).toBeLessThan(300);
  return body.run ?? body;
}

async function ended(runId: string): Promise<Json> {
  for (let i = 0; i < 400; i++) {
    const run: Json = await (await fetch(`${fabric.urls["run-gateway"]}/v1/runs/${runId}`)).json();
    if (["completed", "failed", "canceled"].includes(run.state)) return run;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("the run did not end");
}

async function pendingApproval(runId: string): Promise<Json> {
  for (let i = 0; i < 300; i++) {
    const list: Json[] = await (await fetch(`${fabric.urls["run-gateway"]}/v1/approvals?run_id=${runId}&state=pending`)).json();
    if (list.length > 0) return list[0];
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no approval was requested: ${JSON.stringify((await fabric.events(runId)).map((e: Json) => [e.type, e.data]))}`);
}

describe("llm.agent", () => {
  it("names tools safely: ids to function names, unique, within ^[a-zA-Z0-9_-]{1,64}$", () => {
    const taken = new Set<string>();
    const names = ["demo.echo", "demo_echo", "demo-echo", `x.${"y".repeat(100)}`, "ü.tool"].map((id) => functionNameOf(id, taken));
    expect(names.slice(0, 3)).toEqual(["demo_echo", "demo_echo_2", "demo-echo"]);
    for (const n of names) expect(n).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
    expect(new Set(names).size).toBe(names.length);
  });

  it("calls tools in parallel, gives their results back, and ends with the model's answer; each call a child NodeRun", async () => {
    respond = (body) =>
      turnOf(body) === 0
        ? { tool_calls: [{ name: "test_weather", arguments: { city: "Oslo" } }, { name: "test_fx", arguments: { from: "EUR", to: "NOK" } }] }
        : { content: "Oslo is 4 degrees; 1 EUR is 1.1 NOK." };
    const run = await start({ instructions: "Answer travel questions.", goal: "Weather in Oslo and the EUR/NOK rate?", tools: ["test.weather", "test.fx"] });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    const out = outputs(run);
    expect(out).toMatchObject({ answer: "Oslo is 4 degrees; 1 EUR is 1.1 NOK.", ended_by: "final", usage: { model_calls: 2, tool_calls: 2 } });
    expect(out.tools.map((t: Json) => [t.name, t.node_type_ref.node_type_id])).toEqual([
      ["test_fx", "test.fx"],
      ["test_weather", "test.weather"],
    ]);
    // The model saw the tools as functions with the node types' input schemas, and then their results.
    expect(llm.calls).toHaveLength(2);
    const fns = llm.calls[0].body.tools!.map((t) => t.function);
    expect(fns.map((f) => f.name)).toEqual(["test_fx", "test_weather"]);
    expect(fns[1].parameters).toMatchObject({ properties: { city: { type: "string" } }, required: ["city"] });
    expect(llm.calls[0].body.messages![0]).toEqual({ role: "system", content: "Answer travel questions." });
    expect(toolResults(llm.calls[1].body)).toEqual([
      { id: "call_0", temp_c: 4 },
      { id: "call_1", rate: 1.1 },
    ]);
    const nrs: Json[] = await fabric.nodeRuns(run.run_id);
    const kids = nrs.filter((n) => n.parent_node_run_id === run.root_node_run_id);
    expect(kids.map((n) => n.node_type_ref.node_type_id).sort()).toEqual(["llm.chat", "llm.chat", "test.fx", "test.weather"]);
    const w = kids.find((n) => n.node_type_ref.node_type_id === "test.weather");
    expect(w.inputs).toEqual({ city: "Oslo" });
    expect(out.steps[0].tool_calls.map((c: Json) => [c.name, c.state, c.node_run_id])).toEqual([
      ["test_weather", "completed", w.node_run_id],
      ["test_fx", "completed", kids.find((n) => n.node_type_ref.node_type_id === "test.fx").node_run_id],
    ]);
    expect(out.usage.total_tokens).toBe(kids.filter((n) => n.node_type_ref.node_type_id === "llm.chat").reduce((s, n) => s + n.outputs.usage.total_tokens, 0));
  });

  it("runs tool calls side by side, at most max_parallel_tool_calls at once, in the model's order", async () => {
    // Two calls of a tool that answers only once another call of it runs at the same time.
    meeting = 0;
    respond = (body) => (turnOf(body) === 0 ? { tool_calls: [{ name: "test_meet", arguments: { who: "a" } }, { name: "test_meet", arguments: { who: "b" } }] } : { content: "met" });
    const together = await start({ goal: "meet", tools: ["test.meet"], max_parallel_tool_calls: 2 });
    expect(together.state, JSON.stringify(rootError(together))).toBe("completed");
    expect(toolResults(llm.calls[1].body)).toEqual([
      { id: "call_0", met: true },
      { id: "call_1", met: true },
    ]);

    // One at a time: fx starts only after weather (300 ms) ended.
    respond = (body) =>
      turnOf(body) === 0
        ? { tool_calls: [{ name: "test_weather", arguments: { city: "Oslo" } }, { name: "test_fx", arguments: { from: "EUR", to: "NOK" } }] }
        : { content: "done" };
    const run = await start({ goal: "both, one at a time", tools: ["test.weather", "test.fx"], max_parallel_tool_calls: 1 });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    expect(started["test.fx"][0] - started["test.weather"][0]).toBeGreaterThanOrEqual(290);
  });

  it("a model that always calls its first tool ends on max_turns, then on max_tool_calls, and never spins", async () => {
    respond = (body) => ({ tool_calls: [{ name: body.tools![0].function.name, arguments: { from: "EUR", to: "NOK" } }] });
    const byTurns = await start({ goal: "loop", tools: ["test.fx"], max_turns: 3 });
    expect(byTurns.state, JSON.stringify(rootError(byTurns))).toBe("completed");
    expect(outputs(byTurns)).toMatchObject({ answer: null, ended_by: "max_turns", usage: { model_calls: 3, tool_calls: 3 } });
    expect(llm.calls).toHaveLength(3);
    expect(started["test.fx"]).toHaveLength(3);

    llm.calls.length = 0;
    started["test.fx"] = [];
    respond = (body) => ({ tool_calls: [{ name: body.tools![0].function.name, arguments: { from: "EUR", to: "NOK" } }, { name: body.tools![0].function.name, arguments: { from: "USD", to: "NOK" } }] });
    const byCalls = await start({ goal: "loop", tools: ["test.fx"], max_tool_calls: 3 });
    expect(byCalls.state, JSON.stringify(rootError(byCalls))).toBe("completed");
    const out = outputs(byCalls);
    expect(out).toMatchObject({ answer: null, ended_by: "max_tool_calls", usage: { model_calls: 2, tool_calls: 3 } });
    expect(started["test.fx"]).toHaveLength(3);
    expect(out.steps[1].tool_calls.map((c: Json) => c.state)).toEqual(["completed", "refused"]);
    expect(out.steps[1].tool_calls[1].error.code).toBe("max_tool_calls");
  });

  it("unknown tools and bad arguments go back to the model as the tool's error, and nothing runs", async () => {
    respond = (body) =>
      turnOf(body) === 0
        ? {
            tool_calls: [
              { name: "llm.chat", arguments: {} },
              { name: "test_pay", arguments: { amount: 5 } },
              { name: "test_weather", arguments: { city: "" } },
              { name: "test_weather", arguments: "{not json" },
            ],
          }
        : { content: "I could not get it." };
    const run = await start({ goal: "weather?", tools: ["test.weather"] });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    expect(started["test.weather"]).toBeUndefined();
    const results = toolResults(llm.calls[1].body);
    expect(results.map((r) => r.error.code)).toEqual(["unknown_tool", "unknown_tool", "invalid_arguments", "invalid_arguments"]);
    expect(results[0].error.message).toContain('there is no tool named "llm.chat"; the tools are: test_weather');
    expect(results[2].error.message).toContain("/city: must NOT have fewer than 1 characters");
    expect(results[3].error.message).toContain("not a JSON object");
    const nrs: Json[] = await fabric.nodeRuns(run.run_id);
    expect(nrs.filter((n) => n.node_type_ref.node_type_id !== "llm.chat" && n.node_type_ref.node_type_id !== "llm.agent")).toEqual([]);
    expect(outputs(run).steps[0].tool_calls.every((c: Json) => c.state === "refused")).toBe(true);
  });

  it("answers under output_schema: the model's JSON as is, or one more call under the schema", async () => {
    const output_schema = { type: "object", properties: { city: { type: "string" }, temp_c: { type: "number" } }, required: ["city", "temp_c"], additionalProperties: false };
    respond = (body) => (turnOf(body) === 0 ? { tool_calls: [{ name: "test_weather", arguments: { city: "Oslo" } }] } : { content: { city: "Oslo", temp_c: 4 } });
    const direct = await start({ goal: "Oslo weather as JSON", tools: ["test.weather"], output_schema });
    expect(direct.state, JSON.stringify(rootError(direct))).toBe("completed");
    expect(outputs(direct)).toMatchObject({ ended_by: "final", parsed: { city: "Oslo", temp_c: 4 } });
    expect(llm.calls).toHaveLength(2);

    llm.calls.length = 0;
    respond = (body) => (body.response_format?.json_schema?.name === "final_answer" ? { content: { city: "Oslo", temp_c: 4 } } : turnOf(body) === 0 ? { tool_calls: [{ name: "test_weather", arguments: { city: "Oslo" } }] } : { content: "It is 4 degrees in Oslo." });
    const asked = await start({ goal: "Oslo weather as JSON", tools: ["test.weather"], output_schema });
    expect(asked.state, JSON.stringify(rootError(asked))).toBe("completed");
    expect(outputs(asked)).toMatchObject({ ended_by: "final", parsed: { city: "Oslo", temp_c: 4 }, usage: { model_calls: 3 } });
    expect(llm.calls[2].body.tools).toBeUndefined();
    expect(llm.calls[2].body.response_format?.json_schema?.schema).toMatchObject({ required: ["city", "temp_c"] });
  });

  it("the PDP decides each tool before the model sees it, and again on each call: a denial goes back to the model naming why", async () => {
    respond = (body) => (turnOf(body) === 0 ? { tool_calls: [{ name: "test_notify", arguments: { text: "hi" } }] } : { content: "notify was denied" });
    const run = await start({ goal: "pay 5 and notify", tools: ["test.pay", "test.notify"] });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    const out = outputs(run);
    // test.pay (irreversible) was refused before any model call: no prompt ever named it.
    expect(out.tools.map((t: Json) => t.name)).toEqual(["test_notify"]);
    expect(out.tools_refused).toEqual([expect.objectContaining({ node_type_ref: expect.objectContaining({ node_type_id: "test.pay" }), reason_code: expect.any(String) })]);
    expect(llm.calls.some((c) => JSON.stringify(c.body).includes("test.pay") || JSON.stringify(c.body).includes("test_pay"))).toBe(false);
    // test.notify was offered, and its call denied at node.run.create: the model read why.
    const [result] = toolResults(llm.calls[1].body);
    expect(result.error.code).toBe("policy_denied");
    expect(result.error.message).toContain("the tool failed");
    expect(out.steps[0].tool_calls[0]).toMatchObject({ state: "failed", error: { code: "policy_denied" } });
    const events: Json[] = await fabric.events(run.run_id);
    expect(events.some((e) => e.type === "policy_decided" && e.data.decision === "deny" && e.data.reason_code === "denied_by:no-notify-from-agents")).toBe(true);
    expect(started["test.notify"]).toBeUndefined();
    expect(started["test.pay"]).toBeUndefined();
  });

  it("a tool gated for approval pauses the run with the model's arguments shown; approve goes on, reject goes back to the model", async () => {
    respond = (body) => {
      if (turnOf(body) === 0) return { tool_calls: [{ name: "test_ship", arguments: { text: "ship order 42" } }] };
      const [r] = toolResults(body);
      return { content: r.error ? `not shipped: ${r.error.message}` : `shipped: ${r.done}` };
    };
    const run = await start({ goal: "ship order 42", tools: ["test.ship"] }, { wait: false });
    const approval = await pendingApproval(run.run_id);
    expect(approval.node_type_ref.node_type_id).toBe("test.ship");
    const waiting = (await fabric.nodeRuns(run.run_id)).find((n: Json) => n.node_run_id === approval.node_run_id) as Json;
    expect(waiting.inputs).toEqual({ text: "ship order 42" });
    expect(llm.calls).toHaveLength(1);
    expect(started["test.ship"]).toBeUndefined();
    expect((await fetch(`${fabric.urls["run-gateway"]}/v1/approvals/${approval.approval_id}:approve`, { method: "POST" })).status).toBe(204);
    const done = await ended(run.run_id);
    expect(done.state, JSON.stringify(rootError(done))).toBe("completed");
    expect(outputs(done)).toMatchObject({ answer: "shipped: ship order 42", ended_by: "final" });

    llm.calls.length = 0;
    const second = await start({ goal: "ship order 43", tools: ["test.ship"] }, { wait: false });
    const a2 = await pendingApproval(second.run_id);
    const res = await fetch(`${fabric.urls["run-gateway"]}/v1/approvals/${a2.approval_id}:reject`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ reason: "not on a Sunday" }) });
    expect(res.status).toBe(204);
    const rejected = await ended(second.run_id);
    expect(rejected.state, JSON.stringify(rootError(rejected))).toBe("completed");
    expect(outputs(rejected).answer).toMatch(/^not shipped: the tool failed: .*not on a Sunday/);
    expect(outputs(rejected).steps[0].tool_calls[0]).toMatchObject({ state: "failed", error: { code: "approval_rejected" } });
  });

  it("hands off to another agent as a tool: its bounds and tools only shrink, and its usage counts in the parent's", async () => {
    respond = (body) => {
      const goal = String(body.messages?.find((m) => m.role === "user")?.content);
      if (goal === "parent") {
        return turnOf(body) === 0
          ? { tool_calls: [{ name: "llm_agent", arguments: { goal: "child", max_turns: 50, max_tool_calls: 200, tools: ["test.weather", "test.pay", "demo.*"] } }] }
          : { content: `the child said: ${toolResults(body)[0].answer}` };
      }
      return turnOf(body) === 0 ? { tool_calls: [{ name: "test_weather", arguments: { city: "Oslo" } }] } : { content: "4 degrees" };
    };
    const run = await start({ goal: "parent", tools: ["llm.agent", "test.weather"], max_turns: 4, max_tool_calls: 5 }, { constraints: { extensions: { "nodefabric.llm.max_tokens": 100_000 } } });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    expect(outputs(run).answer).toBe("the child said: 4 degrees");
    const nrs: Json[] = await fabric.nodeRuns(run.run_id);
    const child = nrs.find((n) => n.node_type_ref.node_type_id === "llm.agent" && n.node_run_id !== run.root_node_run_id);
    expect(child.inputs).toMatchObject({ goal: "child", max_turns: 3, max_tool_calls: 4, max_parallel_tool_calls: 4, tools: ["test.weather@1.0.0"] });
    expect(child.extensions["nodefabric.constraints"].candidates.allowed_node_type_ids).toEqual(["llm.agent", "llm.chat", "test.weather"]);
    expect(child.extensions["nodefabric.constraints"].extensions["nodefabric.llm.max_tokens"]).toBeLessThan(100_000);
    expect(outputs(run).usage.model_calls).toBe(llm.calls.length);
    expect(outputs(run).usage.total_tokens).toBe(nrs.filter((n) => n.node_type_ref.node_type_id === "llm.chat").reduce((s, n) => s + n.outputs.usage.total_tokens, 0));
  });

  it("ends on the budget: a call whose reservation does not fit is not sent", async () => {
    respond = (body) => ({ tool_calls: [{ name: body.tools![0].function.name, arguments: { city: "Oslo" } }] });
    const run = await start({ goal: "loop", tools: ["test.weather"], max_output_tokens: 400 }, { constraints: { extensions: { "nodefabric.llm.max_tokens": 1500 } } });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    const out = outputs(run);
    expect(out).toMatchObject({ ended_by: "budget", answer: null, budget: { budget: "nodefabric.llm.max_tokens", limit: 1500 } });
    expect(out.usage.total_tokens).toBeLessThanOrEqual(1500);
    expect(llm.calls.length).toBe(out.usage.model_calls);
    expect(llm.calls.length).toBeGreaterThanOrEqual(1);

    // The run's own budgets are the coordinator's: past max_external_calls the whole run fails, as any run does.
    llm.calls.length = 0;
    const byCalls = await start({ goal: "loop", tools: ["test.weather"] }, { constraints: { budgets: { max_external_calls: 1 } } });
    expect(byCalls.state).toBe("failed");
    expect(rootError(byCalls)).toMatchObject({ code: "budget_exceeded", details: { budget: "max_external_calls", limit: 1 } });
    expect(llm.calls).toHaveLength(1);
  });
});
