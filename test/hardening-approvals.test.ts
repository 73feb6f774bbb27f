import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { eventually } from "./run-client.js";
import {
  APPROVAL_POLICY,
  ECHO,
  FANOUT,
  NOTIFY,
  SLEEP,
  HARDENING_HANDLERS,
  closeAll,
  expectError,
  isNodeRun,
  isRun,
  sleep,
  startCompositePeer,
  startHardeningFabric,
  startManualRun,
  startObserver,
  startTestAuth,
  type HardeningFabric,
  type Json,
  type Observer,
  type Peer,
  type TestAuth,
} from "./hardening-support.js";

// Issue 10, invariant 1: `require_approval` parks the work at each of the three policy checkpoints. A person then
// approves (the work goes on) or rejects (it fails with approval_rejected).

describe("approvals at every policy checkpoint", () => {
  let auth: TestAuth;
  let h: HardeningFabric;
  let composite: Peer;
  let observer: Observer;

  beforeAll(async () => {
    auth = await startTestAuth();
    h = await startHardeningFabric({
      auth,
      policy: APPROVAL_POLICY,
      handlers: ["@nodefabric/handler-demo", "@nodefabric/handler-examples", HARDENING_HANDLERS],
      ready: ["demo.echo", "hardening.notify", "examples.fanout"],
    });
    composite = await startCompositePeer(h, "hardening-approvals-composite");
    observer = await startObserver();
  }, 60_000);
  afterAll(() => closeAll(h, composite, observer, auth));

  const approve = (id: string) => h.approve(id);
  const reject = (id: string) => h.reject(id);
  const hitsOf = (runId: string) => observer.hits.filter((x) => x.run_id === runId);

  /** Starts a run of hardening.notify, parked at run.start; checks what the client sees while it waits. */
  async function parkedAtRunStart(tag: string) {
    const r = await h.call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: NOTIFY, input: { notify_url: observer.url, tag } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(isRun(r.body), JSON.stringify(r.body)).toBe(true);
    expect(r.body.state).toBe("queued");
    const runId = r.body.run_id as string;
    const rootId = r.body.root_node_run_id as string;
    const events = await h.events(runId);
    expect(events.map((e) => e.type)).toEqual(["run_started", "node_run_created", "policy_decided", "approval_requested"]);
    expect(events[2].data).toMatchObject({ action: "run.start", decision: "require_approval" });
    const requested = events[3];
    expect(requested.node_run_id).toBe(rootId);
    expect(requested.data).toMatchObject({ action: "run.start", approval_id: expect.any(String) });

    // Nothing is dispatched while it waits.
    await sleep(500);
    const later = await h.events(runId);
    expect(later).toEqual(events);
    expect(hitsOf(runId)).toHaveLength(0);
    expect((await h.run(runId)).state).toBe("queued");
    expect((await h.nodeRun(rootId)).state).toBe("queued");
    return { runId, rootId, approvalId: requested.data.approval_id as string };
  }

  it("run.start: the run waits queued with nothing dispatched, and runs to completion once approved", async () => {
    const { runId, rootId, approvalId } = await parkedAtRunStart("approved");
    const a = await approve(approvalId);
    expect(a.status, JSON.stringify(a.body)).toBe(204);

    const run = await h.ended(runId);
    expect(run.state).toBe("completed");
    expect(run.extensions["nodefabric.outputs"]).toEqual({ notified: true, tag: "approved" });
    expect((await h.nodeRun(rootId)).state).toBe("completed");
    expect(hitsOf(runId)).toHaveLength(1);

    const events = await h.events(runId);
    const resolved = events.findIndex((e) => e.type === "approval_resolved");
    expect(resolved).toBeGreaterThan(0);
    expect(events[resolved].node_run_id).toBe(rootId);
    expect(events[resolved].data).toMatchObject({ approval_id: approvalId, decision: "approved", state: "approved" });
    // Approving run.start does not skip the next checkpoint: node.run.execute is still asked, after the approval.
    const execute = events.findIndex((e) => e.type === "policy_decided" && e.data.action === "node.run.execute");
    expect(execute).toBeGreaterThan(resolved);
    expect(events[execute].node_run_id).toBe(rootId);
    expect(events.filter((e) => e.type === "atomic_executed")).toHaveLength(1);
    expect(events.findIndex((e) => e.type === "node_run_assigned")).toBeGreaterThan(resolved);
    expect(events.at(-1)).toMatchObject({ type: "run_completed", data: { state: "completed" } });
    await h.expectRunIsRoot(runId);
  });

  it("run.start: a rejected approval fails the root and the run with approval_rejected, and nothing ever runs", async () => {
    const { runId, rootId, approvalId } = await parkedAtRunStart("rejected");
    const r = await reject(approvalId);
    expect(r.status, JSON.stringify(r.body)).toBe(204);

    const run = await h.ended(runId);
    expect(run.state).toBe("failed");
    expect(run.extensions["nodefabric.error"].code).toBe("approval_rejected");
    expect(run.extensions["nodefabric.outputs"]).toBeUndefined();
    const root = await h.nodeRun(rootId);
    expect(root.state).toBe("failed");
    expect(root.extensions["nodefabric.error"].code).toBe("approval_rejected");
    expect(root.outputs).toBeUndefined();

    await sleep(300);
    const events = await h.events(runId);
    expect(events.find((e) => e.type === "approval_resolved").data).toMatchObject({ approval_id: approvalId, decision: "rejected", state: "rejected" });
    expect(events.some((e) => e.type === "node_run_assigned" || e.type === "atomic_executed" || e.type === "node_run_started")).toBe(false);
    expect(events.find((e) => e.type === "node_run_completed" && e.node_run_id === rootId).data).toMatchObject({ state: "failed" });
    expect(events.at(-1)).toMatchObject({ type: "run_completed", data: { state: "failed" } });
    expect(hitsOf(runId)).toHaveLength(0);
    await h.expectRunIsRoot(runId);
  });

  /** Starts a run of the hand-driven composite, driven with its assignment token. */
  const startManual = () => startManualRun(h, composite);

  /** Creates one demo.echo child (parked at node.run.create) and checks it waits. */
  async function parkedChild(m: Awaited<ReturnType<typeof startManual>>, inputs: Json) {
    const created = await m.create([{ node_type_ref: ECHO, inputs }]);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const child = created.body.node_runs[0];
    expect(isNodeRun(child), JSON.stringify(child)).toBe(true);
    expect(child.state).toBe("queued");
    const childId = child.node_run_id as string;
    const requested = await eventually(async () => (await h.events(m.runId)).find((e) => e.type === "approval_requested" && e.node_run_id === childId));
    expect(requested.data).toMatchObject({ action: "node.run.create", approval_id: expect.any(String) });
    const events = await h.events(m.runId);
    expect(events.find((e) => e.type === "policy_decided" && e.node_run_id === childId)?.data).toMatchObject({ action: "node.run.create", decision: "require_approval" });

    await sleep(500);
    expect((await h.nodeRun(childId)).state).toBe("queued");
    const later = await h.events(m.runId);
    expect(later.some((e) => e.node_run_id === childId && ["node_run_assigned", "node_run_started", "atomic_executed", "node_run_completed"].includes(e.type))).toBe(false);
    expect(later.some((e) => e.node_run_id === childId && e.type === "policy_decided" && e.data.action === "node.run.execute")).toBe(false);
    return { childId, approvalId: requested.data.approval_id as string };
  }

  it("node.run.create: a child created under a composite waits queued until approved, then runs and completes", async () => {
    const m = await startManual();
    const { childId, approvalId } = await parkedChild(m, { i: 1 });
    expect((await approve(approvalId)).status).toBe(204);

    const child = await h.nodeRunIn(childId, ["completed"]);
    expect(child.outputs).toEqual({ echo: { i: 1 } });
    const events = await h.events(m.runId);
    const resolved = events.findIndex((e) => e.type === "approval_resolved" && e.node_run_id === childId);
    expect(events[resolved].data).toMatchObject({ approval_id: approvalId, decision: "approved", state: "approved" });
    const execute = events.findIndex((e) => e.type === "policy_decided" && e.node_run_id === childId && e.data.action === "node.run.execute");
    expect(execute).toBeGreaterThan(resolved);
    expect(events.filter((e) => e.type === "atomic_executed" && e.node_run_id === childId).map((e) => e.data.state)).toEqual(["completed"]);

    expect((await m.complete({ state: "completed", outputs: { child: child.outputs } })).status).toBe(204);
    const run = await h.ended(m.runId);
    expect(run.state).toBe("completed");
    await h.expectRunIsRoot(m.runId);
  });

  it("node.run.create: a rejected child fails with approval_rejected and never runs; its composite goes on", async () => {
    const m = await startManual();
    const { childId, approvalId } = await parkedChild(m, { i: 2 });
    expect((await reject(approvalId)).status).toBe(204);

    const child = await h.nodeRunIn(childId, ["failed"]);
    expect(child.extensions["nodefabric.error"].code).toBe("approval_rejected");
    expect(child.outputs).toBeUndefined();
    const events = await h.events(m.runId);
    expect(events.find((e) => e.type === "approval_resolved" && e.node_run_id === childId).data).toMatchObject({ approval_id: approvalId, decision: "rejected", state: "rejected" });
    expect(events.some((e) => e.node_run_id === childId && ["node_run_assigned", "atomic_executed"].includes(e.type))).toBe(false);
    expect(events.find((e) => e.type === "node_run_completed" && e.node_run_id === childId).data).toMatchObject({ state: "failed" });
    // Only the child failed: the composite is still running and may carry on.
    expect((await h.run(m.runId)).state).toBe("running");
    expect((await h.nodeRun(m.rootId)).state).toBe("running");
    expect((await m.complete({ state: "completed", outputs: {} })).status).toBe(204);
    expect((await h.ended(m.runId)).state).toBe("completed");
    await h.expectRunIsRoot(m.runId);
  });

  /** A run of examples.fanout over one item; its SDK-created demo.echo child parks at node.run.create. */
  async function fanoutParked(item: string) {
    const r = await h.call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: FANOUT, input: { items: [item] } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const runId = r.body.run_id as string;
    const requested = await eventually(async () => (await h.events(runId)).find((e) => e.type === "approval_requested"), 15_000, "approval_requested");
    expect(requested.data.action).toBe("node.run.create");
    const childId = requested.node_run_id as string;
    const child = await h.nodeRun(childId);
    expect(child).toMatchObject({ parent_node_run_id: r.body.root_node_run_id, node_type_ref: ECHO, state: "queued" });
    await sleep(400);
    expect((await h.nodeRun(childId)).state).toBe("queued");
    expect((await h.events(runId)).some((e) => e.node_run_id === childId && e.type === "atomic_executed")).toBe(false);
    expect((await h.run(runId)).state).toBe("running");
    return { runId, childId, approvalId: requested.data.approval_id as string };
  }

  it("node.run.create through the SDK: a composite's child waits for approval, and the run completes once it is approved", async () => {
    const { runId, childId, approvalId } = await fanoutParked("x");
    expect((await approve(approvalId)).status).toBe(204);
    const run = await h.ended(runId);
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    expect(run.extensions["nodefabric.outputs"]).toEqual({ results: ["x"] });
    expect((await h.nodeRun(childId)).state).toBe("completed");
    await h.expectRunIsRoot(runId);
  });

  it("node.run.create through the SDK: a rejected child fails with approval_rejected, and so does the run that needed it", async () => {
    const { runId, childId, approvalId } = await fanoutParked("y");
    expect((await reject(approvalId)).status).toBe(204);
    const run = await h.ended(runId);
    expect(run.state).toBe("failed");
    expect(run.extensions["nodefabric.outputs"]).toBeUndefined();
    const child = await h.nodeRun(childId);
    expect(child.state).toBe("failed");
    expect(child.extensions["nodefabric.error"].code).toBe("approval_rejected");
    const events = await h.events(runId);
    expect(events.some((e) => e.node_run_id === childId && e.type === "atomic_executed")).toBe(false);
    await h.expectRunIsRoot(runId);
  });

  async function parkedAtExecute(ms: number) {
    const r = await h.call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms } });
    expect(r.status).toBe(200);
    const requested = await eventually(async () => (await h.events(r.body.run_id)).find((e) => e.type === "approval_requested"));
    expect(requested).toMatchObject({ node_run_id: r.body.root_node_run_id, data: { action: "node.run.execute" } });
    expect((await h.nodeRun(r.body.root_node_run_id)).state).toBe("queued");
    return { runId: r.body.run_id as string, rootId: r.body.root_node_run_id as string, approvalId: requested.data.approval_id as string };
  }

  it("node.run.execute: approval_resolved carries data.state, for an approval and for a rejection", async () => {
    const yes = await parkedAtExecute(1);
    expect((await approve(yes.approvalId)).status).toBe(204);
    expect((await h.ended(yes.runId)).state).toBe("completed");
    const yesEvents = await h.events(yes.runId);
    expect(yesEvents.find((e) => e.type === "approval_resolved").data).toMatchObject({ approval_id: yes.approvalId, decision: "approved", state: "approved" });
    for (const type of ["atomic_executed", "node_run_completed", "run_completed"]) {
      expect(yesEvents.find((e) => e.type === type)?.data?.state, type).toBe("completed");
    }

    const no = await parkedAtExecute(1);
    expect((await reject(no.approvalId)).status).toBe(204);
    const run = await h.ended(no.runId);
    expect(run.state).toBe("failed");
    expect(run.extensions["nodefabric.error"].code).toBe("approval_rejected");
    const noEvents = await h.events(no.runId);
    expect(noEvents.find((e) => e.type === "approval_resolved").data).toMatchObject({ approval_id: no.approvalId, decision: "rejected", state: "rejected" });
    expect(noEvents.some((e) => e.type === "atomic_executed")).toBe(false);
    await h.expectRunIsRoot(no.runId);
  });

  it("answers an unknown approval with 404 approval_not_found in an ErrorEnvelope", async () => {
    expectError(await approve("apr_does_not_exist"), 404, "approval_not_found");
    expectError(await reject("apr_does_not_exist"), 404, "approval_not_found");
  });
});
