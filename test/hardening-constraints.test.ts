import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { eventually } from "./run-client.js";
import {
  ECHO,
  MANUAL,
  SLEEP,
  closeAll,
  expectError,
  manualType,
  normalized,
  ref,
  registerExecutor,
  sleep,
  startCompositePeer,
  startFakePdp,
  startHardeningFabric,
  startManualRun,
  startPeer,
  startTestAuth,
  type FakePdp,
  type HardeningFabric,
  type Json,
  type Peer,
  type TestAuth,
} from "./hardening-support.js";

// Issue 10, invariants 5 and 6. The envelope of constraints in force for a NodeRun flows down the tree: the root's is
// the run's merged with the root type's; a child's is its parent's merged with the create spec's and the child type's
// (lowest number wins, allow lists intersect, deny lists unite, strictest gate wins). It is shown on the NodeRun, sent
// to executors and to the PDP (here a peer executor, a hand-driven composite executor and a fake PDP, all real HTTP
// servers, record what they are sent), and checked for every child. Idempotency keys stand for the whole spec.
const PEER_ECHO = ref("hardening.peer-echo");
const KEY = "nodefabric.constraints";

const MANUAL_CONSTRAINTS = {
  structural: { max_depth: 6 },
  candidates: { denied_node_type_ids: ["x.type-denied"] },
  budgets: { max_steps: 60 },
  gates: { side_effect_class: "write" },
};
const PEER_CONSTRAINTS = {
  structural: { max_children_per_composite: 4 },
  candidates: { denied_node_type_ids: ["x.peer-denied"] },
  gates: { side_effect_class: "read" },
};

describe("constraints flow down the tree", () => {
  let auth: TestAuth;
  let pdp: FakePdp;
  let h: HardeningFabric;
  let composite: Peer;
  let atomic: Peer;

  beforeAll(async () => {
    auth = await startTestAuth();
    pdp = await startFakePdp();
    h = await startHardeningFabric({ auth, pdpUrl: pdp.url, ready: ["demo.echo"] });
    composite = await startCompositePeer(h, "hardening-constraints-composite", [manualType({ constraints: MANUAL_CONSTRAINTS })]);
    atomic = await startPeer((body) => ({ body: { node_run_id: body.node_run_id, state: "completed", outputs: { echo: body.inputs } } }));
    await registerExecutor(h, "hardening-constraints-atomic", atomic.url, "atomic", [
      { ...PEER_ECHO, kind: "atomic", description: "An echo served by a peer executor", constraints: PEER_CONSTRAINTS },
    ]);
  }, 60_000);
  afterAll(() => closeAll(h, composite, atomic, pdp, auth));

  /** A run of the hand-driven composite; `under(id)` creates children of any composite of it with that one's token. */
  const startManual = (constraints?: Json) => startManualRun(h, composite, MANUAL, constraints ? { constraints } : {});

  const pdpAsked = (action: string, runId: string, nodeRunId?: string) =>
    eventually(async () => pdp.requests.find((q) => q.action === action && q.run_id === runId && (nodeRunId === undefined || q.node_run_id === nodeRunId)), 10_000, `${action} asked`);

  function expectViolation(res: { status: number; body: Json }, field: "constraint" | "code", value: string) {
    expectError(res as never, 409, "constraint_violation");
    expect(res.body.error.details.violations.map((v: Json) => v[field]), JSON.stringify(res.body)).toContain(value);
  }

  const RUN_CONSTRAINTS = {
    structural: { max_depth: 4, max_children_per_composite: 8 },
    candidates: { allowed_node_type_ids: ["hardening.manual", "hardening.peer-echo", "demo.echo", "demo.sleep"], denied_node_type_ids: ["x.run-denied"] },
    budgets: { max_steps: 100, max_external_calls: 50 },
  };
  const ROOT_ENVELOPE = {
    structural: { max_depth: 4, max_children_per_composite: 8 },
    candidates: { allowed_node_type_ids: ["hardening.manual", "hardening.peer-echo", "demo.echo", "demo.sleep"], denied_node_type_ids: ["x.run-denied", "x.type-denied"] },
    budgets: { max_steps: 60, max_external_calls: 50 },
    gates: { side_effect_class: "write" },
  };

  it("the root's envelope is the run's constraints merged with the root type's: on the NodeRun, in :begin, and sent to the PDP", async () => {
    const m = await startManual(RUN_CONSTRAINTS);
    const root = await h.nodeRun(m.rootId);
    expect(normalized(root.extensions[KEY])).toEqual(normalized(ROOT_ENVELOPE));
    const begin = await composite.beginOf(m.rootId);
    expect(normalized(begin.constraints)).toEqual(normalized(ROOT_ENVELOPE));
    expect(normalized((await pdpAsked("run.start", m.runId)).constraints)).toEqual(normalized(ROOT_ENVELOPE));
    expect(normalized((await pdpAsked("node.run.execute", m.runId, m.rootId)).constraints)).toEqual(normalized(ROOT_ENVELOPE));
  });

  it("a child's envelope is its parent's merged with the spec's and the child type's: on the NodeRun, in the AtomicExecuteRequest, and sent to the PDP", async () => {
    const m = await startManual(RUN_CONSTRAINTS);
    const spec = {
      structural: { max_depth: 3 },
      candidates: { allowed_node_type_ids: ["hardening.peer-echo", "demo.echo", "x.not-in-the-run"], denied_node_type_ids: ["x.spec-denied"] },
      gates: { side_effect_class: "irreversible" },
    };
    const expected = {
      structural: { max_depth: 3, max_children_per_composite: 4 },
      candidates: { allowed_node_type_ids: ["hardening.peer-echo", "demo.echo"], denied_node_type_ids: ["x.run-denied", "x.type-denied", "x.spec-denied", "x.peer-denied"] },
      budgets: { max_steps: 60, max_external_calls: 50 },
      gates: { side_effect_class: "read" },
    };
    const [child] = await m.created([{ node_type_ref: PEER_ECHO, inputs: { hello: "peer" }, constraints: spec }]);
    expect(normalized(child.extensions[KEY])).toEqual(normalized(expected));
    const executed = await eventually(async () => atomic.executes.find((x) => x.body.node_run_id === child.node_run_id));
    expect(normalized(executed.body.constraints)).toEqual(normalized(expected));
    expect(normalized((await pdpAsked("node.run.create", m.runId, child.node_run_id)).constraints)).toEqual(normalized(expected));
    expect(normalized((await pdpAsked("node.run.execute", m.runId, child.node_run_id)).constraints)).toEqual(normalized(expected));
    const done = await h.nodeRunIn(child.node_run_id, ["completed"]);
    expect(done.outputs).toEqual({ echo: { hello: "peer" } });
    expect(normalized(done.extensions[KEY])).toEqual(normalized(expected));

    // A composite child gets its envelope in :begin.
    const [sub] = await m.created([{ node_type_ref: MANUAL, inputs: {}, constraints: { candidates: { denied_node_type_ids: ["demo.sleep"] }, structural: { max_depth: 9 } } }]);
    const subExpected = { ...ROOT_ENVELOPE, candidates: { ...ROOT_ENVELOPE.candidates, denied_node_type_ids: ["x.run-denied", "x.type-denied", "demo.sleep"] } };
    expect(normalized(sub.extensions[KEY])).toEqual(normalized(subExpected));
    expect(normalized((await composite.beginOf(sub.node_run_id)).constraints)).toEqual(normalized(subExpected));
    expect(normalized((await pdpAsked("node.run.create", m.runId, sub.node_run_id)).constraints)).toEqual(normalized(subExpected));
  });

  it("a child's deny list binds its descendants: under it, a demo.echo grandchild is refused with node_type_denied", async () => {
    const m = await startManual();
    const [child] = await m.created([{ node_type_ref: MANUAL, inputs: {}, constraints: { candidates: { denied_node_type_ids: ["demo.echo"] } } }]);
    const before = (await h.nodeRuns(m.runId)).length;
    const refused = await m.under(child.node_run_id, [{ node_type_ref: ECHO, inputs: { deep: true } }]);
    expectViolation(refused, "code", "node_type_denied");
    expect(refused.body.error.details.violations.find((v: Json) => v.code === "node_type_denied").constraint).toBe("candidates.denied_node_type_ids");
    expect((await h.nodeRuns(m.runId)).length).toBe(before);
    // Other types under the child, and demo.echo elsewhere in the tree, are fine.
    await m.createdUnder(child.node_run_id, [{ node_type_ref: PEER_ECHO, inputs: {} }]);
    await m.created([{ node_type_ref: ECHO, inputs: { beside: true } }]);
  });

  it("a child's allow list only narrows: it intersects with its parent's and binds its descendants", async () => {
    const m = await startManual({ candidates: { allowed_node_type_ids: ["hardening.manual", "demo.echo", "hardening.peer-echo"] } });
    const [child] = await m.created([
      { node_type_ref: MANUAL, inputs: {}, constraints: { candidates: { allowed_node_type_ids: ["hardening.manual", "demo.echo", "demo.sleep"] } } },
    ]);
    expect(normalized(child.extensions[KEY].candidates.allowed_node_type_ids)).toEqual(["demo.echo", "hardening.manual"]);
    expectViolation(await m.under(child.node_run_id, [{ node_type_ref: SLEEP, inputs: { ms: 1 } }]), "code", "node_type_not_allowed");
    expectViolation(await m.under(child.node_run_id, [{ node_type_ref: PEER_ECHO, inputs: {} }]), "code", "node_type_not_allowed");
    await m.createdUnder(child.node_run_id, [{ node_type_ref: ECHO, inputs: {} }]);
    // The root's own list still lets the peer's type run beside the child.
    await m.created([{ node_type_ref: PEER_ECHO, inputs: {} }]);
  });

  it("a child's structural.max_depth binds its descendants", async () => {
    const m = await startManual();
    const [bounded, free] = await m.created([
      { node_type_ref: MANUAL, inputs: { branch: "bounded" }, constraints: { structural: { max_depth: 2 } } },
      { node_type_ref: MANUAL, inputs: { branch: "free" } },
    ]);
    const [boundedGrandchild] = await m.createdUnder(bounded.node_run_id, [{ node_type_ref: MANUAL, inputs: {} }]);
    expectViolation(await m.under(boundedGrandchild.node_run_id, [{ node_type_ref: ECHO, inputs: {} }]), "constraint", "structural.max_depth");
    // The same depth under a branch without the limit is allowed (the node type's own max_depth is 6).
    const [freeGrandchild] = await m.createdUnder(free.node_run_id, [{ node_type_ref: MANUAL, inputs: {} }]);
    await m.createdUnder(freeGrandchild.node_run_id, [{ node_type_ref: ECHO, inputs: {} }]);
  });

  it("the run's deny list applies to the root: the Run answers already failed with node_type_denied, and nothing is dispatched", async () => {
    for (const root of [ECHO, PEER_ECHO]) {
      const r = await h.call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: root, input: { x: 1 }, constraints: { candidates: { denied_node_type_ids: [root.node_type_id] } } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.state).toBe("failed");
      expect(r.body.extensions["nodefabric.error"].code).toBe("node_type_denied");
      expect(r.body.extensions["nodefabric.outputs"]).toBeUndefined();
      const nr = await h.nodeRun(r.body.root_node_run_id);
      expect(nr.state).toBe("failed");
      expect(nr.extensions["nodefabric.error"].code).toBe("node_type_denied");
      await sleep(200);
      const events = await h.events(r.body.run_id);
      expect(events.some((e) => ["node_run_assigned", "node_run_started", "atomic_executed"].includes(e.type))).toBe(false);
      expect(events.at(-1)).toMatchObject({ type: "run_completed", data: { state: "failed" } });
      expect(atomic.executes.some((x) => x.body.run_id === r.body.run_id)).toBe(false);
      await h.expectRunIsRoot(r.body.run_id);
    }
  });

  it("the run's allow list applies to the root: a root type it leaves out fails with node_type_not_allowed", async () => {
    for (const root of [ECHO, PEER_ECHO]) {
      const r = await h.call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: root, input: {}, constraints: { candidates: { allowed_node_type_ids: ["demo.sleep"] } } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.state).toBe("failed");
      expect(r.body.extensions["nodefabric.error"].code).toBe("node_type_not_allowed");
      await sleep(200);
      const events = await h.events(r.body.run_id);
      expect(events.some((e) => ["node_run_assigned", "atomic_executed"].includes(e.type))).toBe(false);
      expect(atomic.executes.some((x) => x.body.run_id === r.body.run_id)).toBe(false);
      await h.expectRunIsRoot(r.body.run_id);
    }
  });
});

describe("idempotency keys cover the whole spec", () => {
  let auth: TestAuth;
  let h: HardeningFabric;
  let composite: Peer;

  beforeAll(async () => {
    auth = await startTestAuth();
    h = await startHardeningFabric({ auth, ready: ["demo.echo"] });
    composite = await startCompositePeer(h, "hardening-idempotency-composite", [manualType({ description: "A hand-driven composite" })]);
  }, 60_000);
  afterAll(() => closeAll(h, composite, auth));

  it("a repeated key under the same parent returns the same child for the same spec, and is 409 idempotency_conflict for any other", async () => {
    const m = await startManualRun(h, composite);
    const runId = m.runId;
    const create = (spec: Json) => m.create([spec]);

    const spec = {
      node_type_ref: ECHO,
      inputs: { i: 1 },
      idempotency_key: "the-one-key",
      constraints: { structural: { max_depth: 5 } },
      metadata: { labels: { team: "a" } },
      extensions: { "x.note": "first" },
    };
    const first = await create(spec);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const childId = first.body.node_runs[0].node_run_id;
    const same = await create(structuredClone(spec));
    expect(same.status, JSON.stringify(same.body)).toBe(200);
    expect(same.body.node_runs.map((n: Json) => n.node_run_id)).toEqual([childId]);

    const set = await h.call("POST", `${h.fabric.urls.selection}/v1/candidate-sets`, {
      subtask_spec: { subtask_id: "s1", goal: "echo the inputs back" },
      constraints: { candidates: { allowed_node_type_ids: ["demo.echo"] } },
    });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body.candidates.map((c: Json) => c.node_type_ref.node_type_id)).toContain("demo.echo");

    const variants: Array<[string, Json]> = [
      ["other constraints", { ...spec, constraints: { structural: { max_depth: 4 } } }],
      ["no constraints", (({ constraints: _c, ...rest }) => rest)(spec)],
      ["other metadata", { ...spec, metadata: { labels: { team: "b" } } }],
      ["no metadata", (({ metadata: _m, ...rest }) => rest)(spec)],
      ["other extensions", { ...spec, extensions: { "x.note": "second" } }],
      ["a candidate_set_id", { ...spec, candidate_set_id: set.body.candidate_set_id }],
    ];
    for (const [what, variant] of variants) {
      const clash = await create(variant);
      expect(clash.status, `${what}: ${JSON.stringify(clash.body)}`).toBe(409);
      expectError(clash, 409, "idempotency_conflict");
    }
    // The same key under the same parent with the same spec still answers the one child.
    const again = await create(spec);
    expect(again.body.node_runs.map((n: Json) => n.node_run_id)).toEqual([childId]);
    expect(await h.nodeRuns(runId)).toHaveLength(2);

    // A fresh key with the candidate set is a valid binding (so the clash above was the key's, not the binding's).
    const bound = await create({ ...spec, idempotency_key: "another-key", candidate_set_id: set.body.candidate_set_id });
    expect(bound.status, JSON.stringify(bound.body)).toBe(200);
    expect(await h.nodeRuns(runId)).toHaveLength(3);
  });
});
