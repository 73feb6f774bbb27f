/**
 * llm.agent under a Cedar policy, through a whole fabric (core's fabricFixture) against the scripted OpenAI-compatible
 * stand-in on loopback: tools the PDP denies (before the model sees them, and on the call), a tool that waits for a
 * person's approval (approved, rejected), and a handoff to another agent whose bounds only shrink.
 */
import { describe, it, expect, beforeAll, afterAll, beforeEach } from "vitest";
import { outputs, rootError, started, startAgentKit, toolResults, turnOf, type AgentKit, type Json } from "./support/agent-kit.js";

const POLICY = [
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
].join("\n");

let k: AgentKit;
beforeAll(async () => {
  k = await startAgentKit(POLICY);
});
afterAll(async () => {
  await k?.close();
});
beforeEach(() => k.reset());

describe("llm.agent under a policy", () => {
  it("the PDP decides each tool before the model sees it, and again on each call: a denial goes back to the model naming why", async () => {
    k.respond = (body) => (turnOf(body) === 0 ? { tool_calls: [{ name: "test_notify", arguments: { text: "hi" } }] } : { content: "notify was denied" });
    const run = await k.start({ goal: "pay 5 and notify", tools: ["test.pay", "test.notify"] });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    const out = outputs(run);
    // test.pay (irreversible) was refused before any model call: no prompt ever named it.
    expect(out.tools.map((t: Json) => t.name)).toEqual(["test_notify"]);
    expect(out.tools_refused).toEqual([expect.objectContaining({ node_type_ref: expect.objectContaining({ node_type_id: "test.pay" }), reason_code: expect.any(String) })]);
    expect(k.llm.calls.some((c) => JSON.stringify(c.body).includes("test.pay") || JSON.stringify(c.body).includes("test_pay"))).toBe(false);
    // test.notify was offered, and its call denied at node.run.create: the model read why.
    const [result] = toolResults(k.llm.calls[1].body);
    expect(result.error.code).toBe("policy_denied");
    expect(result.error.message).toContain("the tool failed");
    expect(out.steps[0].tool_calls[0]).toMatchObject({ state: "failed", error: { code: "policy_denied" } });
    const events: Json[] = await k.fabric.events(run.run_id);
    expect(events.some((e) => e.type === "policy_decided" && e.data.decision === "deny" && e.data.reason_code === "denied_by:no-notify-from-agents")).toBe(true);
    expect(started["test.notify"]).toBeUndefined();
    expect(started["test.pay"]).toBeUndefined();
  });

  it("a tool gated for approval pauses the run with the model's arguments shown; approve goes on, reject goes back to the model", async () => {
    k.respond = (body) => {
      if (turnOf(body) === 0) return { tool_calls: [{ name: "test_ship", arguments: { text: "ship order 42" } }] };
      const [r] = toolResults(body);
      return { content: r.error ? `not shipped: ${r.error.message}` : `shipped: ${r.done}` };
    };
    const run = await k.start({ goal: "ship order 42", tools: ["test.ship"] }, { wait: false });
    const approval = await k.pendingApproval(run.run_id);
    expect(approval.node_type_ref.node_type_id).toBe("test.ship");
    const waiting = (await k.fabric.nodeRuns(run.run_id)).find((n: Json) => n.node_run_id === approval.node_run_id) as Json;
    expect(waiting.inputs).toEqual({ text: "ship order 42" });
    expect(k.llm.calls).toHaveLength(1);
    expect(started["test.ship"]).toBeUndefined();
    expect((await fetch(`${k.fabric.urls["run-gateway"]}/v1/approvals/${approval.approval_id}:approve`, { method: "POST" })).status).toBe(204);
    const done = await k.ended(run.run_id);
    expect(done.state, JSON.stringify(rootError(done))).toBe("completed");
    expect(outputs(done)).toMatchObject({ answer: "shipped: ship order 42", ended_by: "final" });

    k.llm.calls.length = 0;
    const second = await k.start({ goal: "ship order 43", tools: ["test.ship"] }, { wait: false });
    const a2 = await k.pendingApproval(second.run_id);
    const res = await fetch(`${k.fabric.urls["run-gateway"]}/v1/approvals/${a2.approval_id}:reject`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ reason: "not on a Sunday" }) });
    expect(res.status).toBe(204);
    const rejected = await k.ended(second.run_id);
    expect(rejected.state, JSON.stringify(rootError(rejected))).toBe("completed");
    expect(outputs(rejected).answer).toMatch(/^not shipped: the tool failed: .*not on a Sunday/);
    expect(outputs(rejected).steps[0].tool_calls[0]).toMatchObject({ state: "failed", error: { code: "approval_rejected" } });
  });

  it("hands off to another agent as a tool: its bounds and tools only shrink, and its usage counts in the parent's", async () => {
    k.respond = (body) => {
      const goal = String(body.messages?.find((m) => m.role === "user")?.content);
      if (goal === "parent") {
        return turnOf(body) === 0
          ? { tool_calls: [{ name: "llm_agent", arguments: { goal: "child", max_turns: 50, max_tool_calls: 200, tools: ["test.weather", "test.pay", "demo.*"] } }] }
          : { content: `the child said: ${toolResults(body)[0].answer}` };
      }
      return turnOf(body) === 0 ? { tool_calls: [{ name: "test_weather", arguments: { city: "Oslo" } }] } : { content: "4 degrees" };
    };
    const run = await k.start({ goal: "parent", tools: ["llm.agent", "test.weather"], max_turns: 4, max_tool_calls: 5 }, { constraints: { extensions: { "nodefabric.llm.max_tokens": 100_000 } } });
    expect(run.state, JSON.stringify(rootError(run))).toBe("completed");
    expect(outputs(run).answer).toBe("the child said: 4 degrees");
    const nrs: Json[] = await k.fabric.nodeRuns(run.run_id);
    const child = nrs.find((n) => n.node_type_ref.node_type_id === "llm.agent" && n.node_run_id !== run.root_node_run_id);
    expect(child.inputs).toMatchObject({ goal: "child", max_turns: 3, max_tool_calls: 4, max_parallel_tool_calls: 4, tools: ["test.weather@1.0.0"] });
    expect(child.extensions["nodefabric.constraints"].candidates.allowed_node_type_ids).toEqual(["llm.agent", "llm.chat", "test.weather"]);
    // The child agent spends from the run's budget, not from a copy of what its parent had left (docs/llm.md, "Budgets
    // the run keeps"): the run counted every model call of both agents, and holds nothing reserved.
    expect(child.extensions["nodefabric.constraints"].extensions["nodefabric.llm.max_tokens"]).toBe(100_000);
    const chatTokens = nrs.filter((n) => n.node_type_ref.node_type_id === "llm.chat").reduce((s, n) => s + n.outputs.usage.total_tokens, 0);
    expect(run.extensions["nodefabric.usage"]).toMatchObject({ tokens: chatTokens, reserved_tokens: 0 });
    expect(outputs(run).usage.model_calls).toBe(k.llm.calls.length);
    expect(outputs(run).usage.total_tokens).toBe(nrs.filter((n) => n.node_type_ref.node_type_id === "llm.chat").reduce((s, n) => s + n.outputs.usage.total_tokens, 0));
  });

});
