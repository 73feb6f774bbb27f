/**
 * llm.agent through a whole fabric (core's fabricFixture) against the scripted OpenAI-compatible stand-in on loopback:
 * a model that calls tools then answers, parallel tool calls, a model that always calls its first tool (the loop ends
 * on its bounds), unknown tools and bad arguments (errors back to the model, nothing run), a structured final answer,
 * tools named by pattern and by a Selection query,
 * and the budget (agent-policy.test.ts: the PDP, approvals and handoffs).
 */
import { describe, it, expect, beforeAll, afterAll, beforeEach } from "vitest";
import { functionNameOf } from "../src/index.js";
import { outputs, rootError, started, startAgentKit, toolResults, turnOf, type AgentKit, type Json } from "./support/agent-kit.js";

let k: AgentKit;
beforeAll(async () => {
  k = await startAgentKit();
});
afterAll(async () => {
  await k?.close();
});
beforeEach(() => k.reset());

describe("llm.agent", () => {
  it("names tools safely: ids to function names, unique, within ^[a-zA-Z0-9_-]{1,64}$", () => {
    const taken = new Set<string>();
    const names = ["demo.echo", "demo_echo", "demo-echo", `x.${"y".repeat(100)}`, "ü.tool"].map((id) => functionNameOf(id, taken));
    expect(names.slice(0, 3)).toEqual(["demo_echo", "demo_echo_2", "demo-echo"]);
    for (const n of names) expect(n).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
    expect(new Set(names).size).toBe(names.length);
  });

  it("resolves patterns and Selection queries into tools, and says which ids it could not offer", async () => {
    k.respond = () => ({ content: "nothing to do" });
    const run = await k.start({ goal: "list the tools", tools: ["test.w*", { query: "exchange rate between currencies", max_candidates: 1 }, "test.nope", "test.ship@9.9.9"] });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    const out = outputs(run);
    // test.weather by the pattern, test.fx as the query's best candidate.
    expect(out.tools.map((t: Json) => t.node_type_ref.node_type_id)).toEqual(["test.fx", "test.weather"]);
    expect(out.tools_refused.map((r: Json) => [r.node_type_ref.node_type_id, r.reason_code])).toEqual([
      ["test.nope", "not_found"],
      ["test.ship", "version_not_found"],
    ]);
    expect(k.llm.calls[0].body.tools!.map((t) => t.function.name)).toEqual(["test_fx", "test_weather"]);
  });

  it("calls tools in parallel, gives their results back, and ends with the model's answer; each call a child NodeRun", async () => {
    k.respond = (body) =>
      turnOf(body) === 0
        ? { tool_calls: [{ name: "test_weather", arguments: { city: "Oslo" } }, { name: "test_fx", arguments: { from: "EUR", to: "NOK" } }] }
        : { content: "Oslo is 4 degrees; 1 EUR is 1.1 NOK." };
    const run = await k.start({ instructions: "Answer travel questions.", goal: "Weather in Oslo and the EUR/NOK rate?", tools: ["test.weather", "test.fx"] });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    const out = outputs(run);
    expect(out).toMatchObject({ answer: "Oslo is 4 degrees; 1 EUR is 1.1 NOK.", ended_by: "final", usage: { model_calls: 2, tool_calls: 2 } });
    expect(out.tools.map((t: Json) => [t.name, t.node_type_ref.node_type_id])).toEqual([
      ["test_fx", "test.fx"],
      ["test_weather", "test.weather"],
    ]);
    // The model saw the tools as functions with the node types' input schemas, and then their results.
    expect(k.llm.calls).toHaveLength(2);
    const fns = k.llm.calls[0].body.tools!.map((t) => t.function);
    expect(fns.map((f) => f.name)).toEqual(["test_fx", "test_weather"]);
    expect(fns[1].parameters).toMatchObject({ properties: { city: { type: "string" } }, required: ["city"] });
    expect(k.llm.calls[0].body.messages![0]).toEqual({ role: "system", content: "Answer travel questions." });
    expect(toolResults(k.llm.calls[1].body)).toEqual([
      { id: "call_0", temp_c: 4 },
      { id: "call_1", rate: 1.1 },
    ]);
    const nrs: Json[] = await k.fabric.nodeRuns(run.run_id);
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
    k.respond = (body) => (turnOf(body) === 0 ? { tool_calls: [{ name: "test_meet", arguments: { who: "a" } }, { name: "test_meet", arguments: { who: "b" } }] } : { content: "met" });
    const together = await k.start({ goal: "meet", tools: ["test.meet"], max_parallel_tool_calls: 2 });
    expect(together.state, JSON.stringify(rootError(together))).toBe("completed");
    expect(toolResults(k.llm.calls[1].body)).toEqual([
      { id: "call_0", met: true },
      { id: "call_1", met: true },
    ]);

    // One at a time: fx starts only after weather (300 ms) ended.
    k.respond = (body) =>
      turnOf(body) === 0
        ? { tool_calls: [{ name: "test_weather", arguments: { city: "Oslo" } }, { name: "test_fx", arguments: { from: "EUR", to: "NOK" } }] }
        : { content: "done" };
    const run = await k.start({ goal: "both, one at a time", tools: ["test.weather", "test.fx"], max_parallel_tool_calls: 1 });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    expect(started["test.fx"][0] - started["test.weather"][0]).toBeGreaterThanOrEqual(290);
  });

  it("a model that always calls its first tool ends on max_turns, then on max_tool_calls, and never spins", async () => {
    k.respond = (body) => ({ tool_calls: [{ name: body.tools![0].function.name, arguments: { from: "EUR", to: "NOK" } }] });
    const byTurns = await k.start({ goal: "loop", tools: ["test.fx"], max_turns: 3 });
    expect(byTurns.state, JSON.stringify(rootError(byTurns))).toBe("completed");
    expect(outputs(byTurns)).toMatchObject({ answer: null, ended_by: "max_turns", usage: { model_calls: 3, tool_calls: 3 } });
    expect(k.llm.calls).toHaveLength(3);
    expect(started["test.fx"]).toHaveLength(3);

    k.llm.calls.length = 0;
    started["test.fx"] = [];
    k.respond = (body) => ({ tool_calls: [{ name: body.tools![0].function.name, arguments: { from: "EUR", to: "NOK" } }, { name: body.tools![0].function.name, arguments: { from: "USD", to: "NOK" } }] });
    const byCalls = await k.start({ goal: "loop", tools: ["test.fx"], max_tool_calls: 3 });
    expect(byCalls.state, JSON.stringify(rootError(byCalls))).toBe("completed");
    const out = outputs(byCalls);
    expect(out).toMatchObject({ answer: null, ended_by: "max_tool_calls", usage: { model_calls: 2, tool_calls: 3 } });
    expect(started["test.fx"]).toHaveLength(3);
    expect(out.steps[1].tool_calls.map((c: Json) => c.state)).toEqual(["completed", "refused"]);
    expect(out.steps[1].tool_calls[1].error.code).toBe("max_tool_calls");
  });

  it("unknown tools and bad arguments go back to the model as the tool's error, and nothing runs", async () => {
    k.respond = (body) =>
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
    const run = await k.start({ goal: "weather?", tools: ["test.weather"] });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    expect(started["test.weather"]).toBeUndefined();
    const results = toolResults(k.llm.calls[1].body);
    expect(results.map((r) => r.error.code)).toEqual(["unknown_tool", "unknown_tool", "invalid_arguments", "invalid_arguments"]);
    expect(results[0].error.message).toContain('there is no tool named "llm.chat"; the tools are: test_weather');
    expect(results[2].error.message).toContain("/city: must NOT have fewer than 1 characters");
    expect(results[3].error.message).toContain("not a JSON object");
    const nrs: Json[] = await k.fabric.nodeRuns(run.run_id);
    expect(nrs.filter((n) => n.node_type_ref.node_type_id !== "llm.chat" && n.node_type_ref.node_type_id !== "llm.agent")).toEqual([]);
    expect(outputs(run).steps[0].tool_calls.every((c: Json) => c.state === "refused")).toBe(true);
  });

  it("answers under output_schema: the model's JSON as is, or one more call under the schema", async () => {
    const output_schema = { type: "object", properties: { city: { type: "string" }, temp_c: { type: "number" } }, required: ["city", "temp_c"], additionalProperties: false };
    k.respond = (body) => (turnOf(body) === 0 ? { tool_calls: [{ name: "test_weather", arguments: { city: "Oslo" } }] } : { content: { city: "Oslo", temp_c: 4 } });
    const direct = await k.start({ goal: "Oslo weather as JSON", tools: ["test.weather"], output_schema });
    expect(direct.state, JSON.stringify(rootError(direct))).toBe("completed");
    expect(outputs(direct)).toMatchObject({ ended_by: "final", parsed: { city: "Oslo", temp_c: 4 } });
    expect(k.llm.calls).toHaveLength(2);

    k.llm.calls.length = 0;
    k.respond = (body) => (body.response_format?.json_schema?.name === "final_answer" ? { content: { city: "Oslo", temp_c: 4 } } : turnOf(body) === 0 ? { tool_calls: [{ name: "test_weather", arguments: { city: "Oslo" } }] } : { content: "It is 4 degrees in Oslo." });
    const asked = await k.start({ goal: "Oslo weather as JSON", tools: ["test.weather"], output_schema });
    expect(asked.state, JSON.stringify(rootError(asked))).toBe("completed");
    expect(outputs(asked)).toMatchObject({ ended_by: "final", parsed: { city: "Oslo", temp_c: 4 }, usage: { model_calls: 3 } });
    expect(k.llm.calls[2].body.tools).toBeUndefined();
    expect(k.llm.calls[2].body.response_format?.json_schema?.schema).toMatchObject({ required: ["city", "temp_c"] });
  });

  it("ends on the budget: a call whose reservation does not fit is not sent", async () => {
    k.respond = (body) => ({ tool_calls: [{ name: body.tools![0].function.name, arguments: { city: "Oslo" } }] });
    const run = await k.start({ goal: "loop", tools: ["test.weather"], max_output_tokens: 400 }, { constraints: { extensions: { "nodefabric.llm.max_tokens": 1500 } } });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    const out = outputs(run);
    expect(out).toMatchObject({ ended_by: "budget", answer: null, budget: { budget: "nodefabric.llm.max_tokens", limit: 1500 } });
    expect(out.usage.total_tokens).toBeLessThanOrEqual(1500);
    expect(k.llm.calls.length).toBe(out.usage.model_calls);
    expect(k.llm.calls.length).toBeGreaterThanOrEqual(1);

    // The run's own budgets are the coordinator's: past max_external_calls the whole run fails, as any run does.
    k.llm.calls.length = 0;
    const byCalls = await k.start({ goal: "loop", tools: ["test.weather"] }, { constraints: { budgets: { max_external_calls: 1 } } });
    expect(byCalls.state).toBe("failed");
    expect(rootError(byCalls)).toMatchObject({ code: "budget_exceeded", details: { budget: "max_external_calls", limit: 1 } });
    expect(k.llm.calls).toHaveLength(1);
  });
});
