import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { eventually } from "./run-client.js";
import { freePortBase } from "./e2e/fabric-cli.js";
import {
  COSTLY,
  ECHO,
  FANOUT,
  HARDENING_HANDLERS,
  MANUAL,
  RUN_HANDLERS,
  SEQUENCE,
  closeAll,
  expectError,
  manualType,
  ref,
  registerExecutor,
  sleep,
  startCompositePeer,
  startHardeningFabric,
  startManualRun,
  startPeer,
  startTestAuth,
  type HardeningFabric,
  type Json,
  type Peer,
  type TestAuth,
} from "./hardening-support.js";

// Issue 10, invariant 4: every budget of a run is enforced, and what the run used is shown on it as
// extensions["nodefabric.usage"] = { steps, external_calls, cost }, durable across restarts.
const MANUAL_TIGHT = ref("hardening.manual-tight");
const PRICED = ref("hardening.priced");
const FLAKY = ref("fixture.flaky");
const HANDLERS = ["@nodefabric/handler-demo", "@nodefabric/handler-examples", RUN_HANDLERS, HARDENING_HANDLERS];

const budgets = (b: Json) => ({ constraints: { budgets: b } });
const usageOf = (run: Json) => run.extensions?.["nodefabric.usage"];

function expectBudgetExceeded(run: Json, budget: string) {
  expect(run.state, JSON.stringify(run.extensions)).toBe("failed");
  expect(run.extensions["nodefabric.error"]).toMatchObject({ code: "budget_exceeded", details: { budget } });
  expect(run.extensions["nodefabric.outputs"]).toBeUndefined();
}

describe("budgets of a run", () => {
  let auth: TestAuth;
  let h: HardeningFabric;
  let composite: Peer;
  let priced: Peer;

  beforeAll(async () => {
    auth = await startTestAuth();
    h = await startHardeningFabric({ auth, handlers: HANDLERS, ready: ["demo.echo", "examples.fanout", "fixture.flaky", "hardening.costly"] });
    composite = await startCompositePeer(h, "hardening-budgets-composite", [
      manualType(),
      manualType({ ...MANUAL_TIGHT, description: "A hand-driven composite with a budget of its own", constraints: { budgets: { max_steps: 2 } } }),
    ]);
    // A peer executor that reports what each execution cost in the result extension, as the SDK's executor does.
    priced = await startPeer((body) => ({
      body: { node_run_id: body.node_run_id, state: "completed", outputs: { price: body.inputs.cost }, extensions: { "nodefabric.cost": body.inputs.cost } },
    }));
    await registerExecutor(h, "hardening-budgets-priced", priced.url, "atomic", [
      {
        ...PRICED,
        kind: "atomic",
        description: "Served by a peer that reports cost",
        input_schema: { type: "object", required: ["cost"], properties: { cost: { type: "number" } } },
        constraints: { gates: { side_effect_class: "read" } },
      },
    ]);
  }, 60_000);
  afterAll(() => closeAll(h, composite, priced, auth));

  async function runToEnd(root: Json, input: Json, extra: Json = {}) {
    const r = await h.call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: root, input, ...extra }, { prefer: "wait=20" });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const run = await h.ended(r.body.run_id);
    await h.expectRunIsRoot(run.run_id);
    return run;
  }

  // ------------------------------------------------------------------ max_steps

  it("max_steps counts NodeRuns created, the root included: a fan-out of 3 fails under 3 and completes under 4", async () => {
    const over = await runToEnd(FANOUT, { items: ["a", "b", "c"] }, budgets({ max_steps: 3 }));
    expectBudgetExceeded(over, "max_steps");
    const nodeRuns = await h.nodeRuns(over.run_id);
    expect(nodeRuns.length).toBeLessThanOrEqual(3);
    expect(usageOf(over).steps).toBe(nodeRuns.length);
    const root = await h.nodeRun(over.root_node_run_id);
    expect(root.state).toBe("failed");
    expect(root.extensions["nodefabric.error"].code).toBe("budget_exceeded");

    const within = await runToEnd(FANOUT, { items: ["a", "b", "c"] }, budgets({ max_steps: 4 }));
    expect(within.state, JSON.stringify(within.extensions)).toBe("completed");
    expect(within.extensions["nodefabric.outputs"]).toEqual({ results: ["a", "b", "c"] });
    expect(usageOf(within)).toEqual({ steps: 4, external_calls: 3, cost: 0 });
  });

  const startManual = (type: Json, extra: Json = {}) => startManualRun(h, composite, type, extra);

  function expectStepsRefused(res: { status: number; body: Json }) {
    expectError(res as never, 409, "constraint_violation");
    expect(res.body.error.details.violations.map((v: Json) => v.constraint)).toContain("budgets.max_steps");
  }

  it("max_steps: the POST /v1/node-runs that would pass it is 409 constraint_violation, creates nothing, and fails the run", async () => {
    const m = await startManual(MANUAL, budgets({ max_steps: 3 }));
    expect(usageOf(await h.run(m.runId))).toEqual({ steps: 1, external_calls: 0, cost: 0 });
    const first = await m.create([{ node_type_ref: ECHO, inputs: { n: 1 } }]);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(usageOf(await h.run(m.runId)).steps).toBe(2);

    expectStepsRefused(await m.create([{ node_type_ref: ECHO, inputs: { n: 2 } }, { node_type_ref: ECHO, inputs: { n: 3 } }]));
    const run = await h.ended(m.runId);
    expectBudgetExceeded(run, "max_steps");
    expect(await h.nodeRuns(m.runId)).toHaveLength(2);
    expect(usageOf(run).steps).toBe(2);
    await h.expectRunIsRoot(m.runId);
  });

  it("max_steps of the root node type binds the run too (the lowest number wins)", async () => {
    const m = await startManual(MANUAL_TIGHT, budgets({ max_steps: 10 }));
    expectStepsRefused(await m.create([{ node_type_ref: ECHO, inputs: { n: 1 } }, { node_type_ref: ECHO, inputs: { n: 2 } }]));
    const run = await h.ended(m.runId);
    expectBudgetExceeded(run, "max_steps");
    expect(await h.nodeRuns(m.runId)).toHaveLength(1);
  });

  // ------------------------------------------------------------------ max_external_calls

  it("max_external_calls counts atomic executions: a fan-out of 3 fails under 2 and completes under 3", async () => {
    const over = await runToEnd(FANOUT, { items: ["a", "b", "c"] }, budgets({ max_external_calls: 2 }));
    expectBudgetExceeded(over, "max_external_calls");
    const events = await h.events(over.run_id);
    expect(events.filter((e) => e.type === "atomic_executed").length).toBeLessThanOrEqual(2);
    expect(usageOf(over).external_calls).toBeLessThanOrEqual(2);

    const within = await runToEnd(FANOUT, { items: ["a", "b", "c"] }, budgets({ max_external_calls: 3 }));
    expect(within.state, JSON.stringify(within.extensions)).toBe("completed");
    expect(usageOf(within)).toMatchObject({ external_calls: 3 });
  });

  it("max_external_calls counts every attempt: a NodeRun that succeeds on its third attempt fails under 2 and completes under 3", async () => {
    const over = await runToEnd(FLAKY, {}, budgets({ max_external_calls: 2 }));
    expectBudgetExceeded(over, "max_external_calls");
    const events = await h.events(over.run_id);
    expect(events.filter((e) => e.type === "atomic_executed")).toHaveLength(2);
    expect(usageOf(over).external_calls).toBe(2);
    const root = await h.nodeRun(over.root_node_run_id);
    expect(root.state).toBe("failed");
    expect(root.extensions["nodefabric.error"].code).toBe("budget_exceeded");

    const within = await runToEnd(FLAKY, {}, budgets({ max_external_calls: 3 }));
    expect(within.state).toBe("completed");
    expect(within.extensions["nodefabric.outputs"]).toEqual({ attempt: 3 });
    expect(usageOf(within).external_calls).toBe(3);
  });

  it("max_external_calls: a dispatch that would pass it is never sent to the executor", async () => {
    const run = await runToEnd(PRICED, { cost: 0 }, budgets({ max_external_calls: 0 }));
    expectBudgetExceeded(run, "max_external_calls");
    await sleep(300);
    expect(priced.executes.filter((x) => x.body.run_id === run.run_id)).toHaveLength(0);
    const events = await h.events(run.run_id);
    expect(events.some((e) => e.type === "node_run_assigned" || e.type === "atomic_executed")).toBe(false);
    expect(usageOf(run).external_calls).toBe(0);
  });

  // ------------------------------------------------------------------ max_cost

  it("max_cost: ctx.reportCost amounts add up per execution and show as the run's usage", async () => {
    const run = await runToEnd(COSTLY, { costs: [1.5, 2] }, budgets({ max_cost: 5 }));
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    expect(run.extensions["nodefabric.outputs"]).toEqual({ spent: 3.5 });
    expect(usageOf(run)).toEqual({ steps: 1, external_calls: 1, cost: 3.5 });
  });

  it("max_cost: the answer that passes it fails its NodeRun and the run with budget_exceeded", async () => {
    const run = await runToEnd(COSTLY, { costs: [4, 3] }, budgets({ max_cost: 5 }));
    expectBudgetExceeded(run, "max_cost");
    expect(usageOf(run).cost).toBe(7);
    const root = await h.nodeRun(run.root_node_run_id);
    expect(root.state).toBe("failed");
    expect(root.extensions["nodefabric.error"]).toMatchObject({ code: "budget_exceeded", details: { budget: "max_cost" } });
    expect(root.outputs).toBeUndefined();
  });

  it("max_cost adds up over a run's children: the child whose cost passes it fails, and the run with it", async () => {
    const steps = [0, 1, 2].map(() => ({ node_type_id: COSTLY.node_type_id, inputs: { costs: [2] } }));
    const run = await runToEnd(SEQUENCE, { steps }, budgets({ max_cost: 5 }));
    expectBudgetExceeded(run, "max_cost");
    expect(usageOf(run).cost).toBe(6);
    const children = (await h.nodeRuns(run.run_id)).filter((n) => n.parent_node_run_id === run.root_node_run_id);
    expect(children).toHaveLength(3);
    const byCreation = [...children].sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.node_run_id < b.node_run_id ? -1 : 1));
    expect(byCreation.map((c) => c.state)).toEqual(["completed", "completed", "failed"]);
    expect(byCreation[2].extensions["nodefabric.error"]).toMatchObject({ code: "budget_exceeded", details: { budget: "max_cost" } });
    expect(byCreation[2].outputs).toBeUndefined();
  });

  it("max_cost counts what a failed execution cost too", async () => {
    const under = await runToEnd(COSTLY, { costs: [2], fail: true }, budgets({ max_cost: 5 }));
    expect(under.state).toBe("failed");
    expect(under.extensions["nodefabric.error"].code).toBe("upstream_error");
    expect(usageOf(under).cost).toBe(2);

    const over = await runToEnd(COSTLY, { costs: [9], fail: true }, budgets({ max_cost: 5 }));
    expectBudgetExceeded(over, "max_cost");
    expect(usageOf(over).cost).toBe(9);
  });

  it("max_cost: a peer executor reports cost as the result's extensions[\"nodefabric.cost\"]", async () => {
    const within = await runToEnd(PRICED, { cost: 7 }, budgets({ max_cost: 10 }));
    expect(within.state).toBe("completed");
    expect(within.extensions["nodefabric.outputs"]).toEqual({ price: 7 });
    expect(usageOf(within).cost).toBe(7);

    const over = await runToEnd(PRICED, { cost: 7 }, budgets({ max_cost: 5 }));
    expectBudgetExceeded(over, "max_cost");
    expect(usageOf(over).cost).toBe(7);
    const root = await h.nodeRun(over.root_node_run_id);
    expect(root.state).toBe("failed");
    expect(root.outputs).toBeUndefined();
  });
});

describe("budgets across a restart of the fabric", () => {
  let auth: TestAuth;
  let h: HardeningFabric | undefined;

  beforeAll(async () => {
    auth = await startTestAuth();
  });
  afterAll(() => closeAll(h, auth));

  it("keeps counting what runs used before the restart: max_cost, max_external_calls and max_steps are not reset", async () => {
    const portBase = await freePortBase();
    h = await startHardeningFabric({ auth, portBase, handlers: HANDLERS, ready: ["demo.sleep", "hardening.sequence"] });
    const dataDir = h.dataDir;
    const step = (node_type_id: string, inputs: Json) => ({ node_type_id, inputs });
    const LONG = 3_000;
    const start = async (steps: Json[], b: Json) => {
      const r = await h!.call("POST", `${h!.gw}/v1/runs`, { root_node_type_ref: SEQUENCE, input: { steps }, ...budgets(b) });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body.run_id as string;
    };
    // Each run is stopped in its long sleep, having used part of its budget; the rest passes it after the restart.
    const cost = await start([step("hardening.costly", { costs: [3] }), step("demo.sleep", { ms: LONG }), step("hardening.costly", { costs: [3] })], { max_cost: 5 });
    const calls = await start([step("demo.sleep", { ms: LONG }), step("demo.echo", { after: "sleep" })], { max_external_calls: 2 });
    const steps = await start([step("demo.sleep", { ms: LONG }), step("demo.echo", { n: 1 }), step("demo.echo", { n: 2 })], { max_steps: 3 });

    const sleeping = (runId: string) =>
      eventually(async () => ((await h!.nodeRuns(runId)).some((n) => n.node_type_ref.node_type_id === "demo.sleep" && n.state === "running") ? true : undefined), 10_000, `sleep of ${runId}`);
    await Promise.all([sleeping(cost), sleeping(calls), sleeping(steps)]);
    expect(usageOf(await h.run(cost)).cost).toBe(3);
    expect(usageOf(await h.run(calls)).external_calls).toBe(1);
    expect(usageOf(await h.run(steps)).steps).toBe(2);

    await h.close();
    h = undefined;
    h = await startHardeningFabric({ auth, portBase, dataDir, handlers: HANDLERS, ready: ["demo.sleep", "hardening.sequence"] });

    const costRun = await h.ended(cost, 30_000);
    expectBudgetExceeded(costRun, "max_cost");
    expect(usageOf(costRun).cost).toBe(6);

    const callsRun = await h.ended(calls, 30_000);
    expectBudgetExceeded(callsRun, "max_external_calls");
    expect(usageOf(callsRun).external_calls).toBeLessThanOrEqual(2);

    const stepsRun = await h.ended(steps, 30_000);
    expectBudgetExceeded(stepsRun, "max_steps");
    expect(usageOf(stepsRun).steps).toBeLessThanOrEqual(3);
    for (const id of [cost, calls, steps]) await h.expectRunIsRoot(id);
  }, 90_000);
});
