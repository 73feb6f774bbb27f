/**
 * llm.planner under a Cedar policy, through a whole fabric (core's fabricFixture) against the scripted OpenAI-compatible
 * stand-in on loopback: one approval of the whole plan (approve, reject with a reason), ask_user, and Cedar refusing a
 * model profile or a node type with irreversible side effects, each decision recorded.
 */
import { describe, it, expect, beforeAll, afterAll, beforeEach } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fabricFixture, type FabricFixture } from "@nodefabric/core/testing";
import { startLlmStandIn, type ChatRequestBody, type LlmStandIn, type StandInStep } from "@nodefabric/sdk/testing";
import { llmChat, llmPlanner, planApproval, resetLlmConfig } from "../src/index.js";
import { brain, broken, fx, pay, report, started, TOOLS, weather, type Json } from "./support/planner-kit.js";

let llm: LlmStandIn;
let respond: (body: ChatRequestBody) => StandInStep | undefined | Promise<StandInStep | undefined> = brain();
let dir: string;
const saved = { ...process.env };

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "llm-planner-policy-test-"));
  llm = await startLlmStandIn({ respond: (b) => respond(b) });
  writeFileSync(path.join(dir, "llm.json"), JSON.stringify({ prices: { "gpt-test": { input_per_million: 100, output_per_million: 200 } }, profiles: { expensive: { base_url: llm.url, model: "gpt-huge" } } }));
  Object.assign(process.env, { FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "gpt-test", FABRIC_LLM_API_KEY: "sk-planner-test", FABRIC_LLM_CONFIG: path.join(dir, "llm.json") });
  resetLlmConfig();
});

afterAll(async () => {
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
const rootError = (run: Json) => run.extensions?.["nodefabric.error"];

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

  it("a node type with irreversible side effects is refused by Cedar before the model sees it, with the decision recorded", async () => {
    respond = brain({
      plan: () => ({ content: { subtasks: [{ id: "p", goal: "send a payment", after: [] }] } }),
      inputs: () => ({ content: { amount: 10 } }),
      evaluate: () => ({ content: { summary: "the payment was refused", success: false, recovery: [] } }),
    });
    const run = await start({ goal: "pay", allowed_node_type_ids: ["test.pay"] });
    const done = await ended(run.run_id);
    expect(done.state).toBe("failed");
    expect(rootError(done)).toMatchObject({
      code: "no_candidate",
      details: { subtask_id: "p", policy_refused: [{ node_type_ref: { node_type_id: "test.pay" }, reason_code: expect.any(String) }] },
    });
    // The plan was the only model call: no prompt ever offered test.pay, and it never ran.
    expect(purposes()).toEqual(["plan"]);
    expect(llm.calls.some((c) => JSON.stringify(c.body).includes("test.pay"))).toBe(false);
    expect(started["test.pay"]).toBeUndefined();
  });

  it("the model chooses only among the candidates the PDP allows: a denied one is left out of its choice", async () => {
    respond = brain({
      plan: () => ({ content: { subtasks: [{ id: "w", goal: "weather in Oslo, or send a payment", after: [] }] } }),
      evaluate: () => ({ content: { summary: "done", success: true, recovery: [] } }),
    });
    const run = await start({ goal: "Oslo weather", allowed_node_type_ids: [...TOOLS, "test.pay"] });
    const done = await ended(run.run_id);
    expect(done.state, JSON.stringify(rootError(done))).toBe("completed");
    // Selection on its own proposes test.pay for this subtask: the PDP is what left it out.
    const proposed = await fetch(`${gov.urls.selection}/v1/candidate-sets`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ subtask_spec: { subtask_id: "w", goal: "weather in Oslo, or send a payment" }, constraints: { candidates: { max_candidates_per_subtask: 5, allowed_node_type_ids: [...TOOLS, "test.pay"] } } }),
    }).then((r) => r.json() as Promise<Json>);
    expect(proposed.candidates.map((c: Json) => c.node_type_ref.node_type_id)).toContain("test.pay");
    // Every model call after the plan saw the allowed tools only, and the model did choose among them.
    expect(purposes()).toContain("choose");
    for (const c of llm.calls.slice(1)) expect(JSON.stringify(c.body)).not.toContain("test.pay");
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
