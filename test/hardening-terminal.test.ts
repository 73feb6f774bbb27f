import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { eventually } from "./run-client.js";
import {
  APPROVAL_POLICY,
  ECHO,
  FAIL,
  NOTIFY,
  SLEEP,
  closeAll,
  expectError,
  startCompositePeer,
  startHardeningFabric,
  startManualRun,
  startTestAuth,
  type HardeningFabric,
  type Peer,
  type TestAuth,
} from "./hardening-support.js";

// Issue 10, invariant 3: terminal states never change. A decision on an approval whose NodeRun has ended, a second
// `:complete`, or an evaluation of an ended child: none of them changes a state, an output, an error or an event,
// and a Run's state is always its root NodeRun's.

describe("terminal states never change", () => {
  let auth: TestAuth;
  let h: HardeningFabric;
  let composite: Peer;

  beforeAll(async () => {
    auth = await startTestAuth();
    h = await startHardeningFabric({ auth, policy: APPROVAL_POLICY, ready: ["demo.echo", "hardening.notify"] });
    composite = await startCompositePeer(h, "hardening-terminal-composite");
  }, 60_000);
  afterAll(() => closeAll(h, composite, auth));

  const approve = (id: string) => h.approve(id);
  const reject = (id: string) => h.reject(id);
  const approvalOf = (runId: string, nodeRunId?: string) =>
    eventually(async () => (await h.events(runId)).find((e) => e.type === "approval_requested" && (!nodeRunId || e.node_run_id === nodeRunId)), 10_000, "approval_requested");

  const startManual = () => startManualRun(h, composite);
  const endedNodeRun = (id: string) => h.nodeRunIn(id, ["completed", "failed", "canceled"]);

  it.each([
    ["run.start", NOTIFY, {}],
    ["node.run.execute", SLEEP, { ms: 1 }],
  ] as const)("a pending %s approval of a run that was canceled: approve and reject are 409 node_run_terminal and change nothing", async (checkpoint, root, input) => {
    const r = await h.call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: root, input });
    expect(r.status).toBe(200);
    const requested = await approvalOf(r.body.run_id);
    expect(requested.data.action).toBe(checkpoint);
    const canceled = await h.call("POST", `${h.gw}/v1/runs/${r.body.run_id}:cancel`);
    expect(canceled.status).toBe(200);
    expect(canceled.body.state).toBe("canceled");

    const before = await h.snapshot(r.body.run_id);
    expect(before.run.state).toBe("canceled");
    expect(before.nodeRuns.find((n) => n.node_run_id === r.body.root_node_run_id)!.state).toBe("canceled");
    expectError(await approve(requested.data.approval_id), 409, "node_run_terminal");
    expectError(await reject(requested.data.approval_id), 409, "node_run_terminal");
    expect(await h.snapshot(r.body.run_id)).toEqual(before);
    expect(before.events.some((e) => e.type === "approval_resolved")).toBe(false);
    await h.expectRunIsRoot(r.body.run_id);
  });

  it("a pending approval of a child whose parent composite completed (and so canceled it): 409 node_run_terminal, nothing changes", async () => {
    const m = await startManual();
    const [child] = await m.created([{ node_type_ref: ECHO, inputs: { parked: true } }]);
    const requested = await approvalOf(m.runId, child.node_run_id);
    expect(requested.data.action).toBe("node.run.create");
    expect((await m.complete({ state: "completed", outputs: { without: "the child" } })).status).toBe(204);
    expect((await h.nodeRun(child.node_run_id)).state).toBe("canceled");

    const before = await h.snapshot(m.runId);
    expect(before.run.state).toBe("completed");
    expectError(await approve(requested.data.approval_id), 409, "node_run_terminal");
    expectError(await reject(requested.data.approval_id), 409, "node_run_terminal");
    expect(await h.snapshot(m.runId)).toEqual(before);
    await h.expectRunIsRoot(m.runId);
  });

  it("after an approval was approved and its NodeRun completed: reject is 409 and changes nothing, approving again is 204 and changes nothing", async () => {
    const r = await h.call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms: 1 } });
    const requested = await approvalOf(r.body.run_id);
    expect((await approve(requested.data.approval_id)).status).toBe(204);
    expect((await h.ended(r.body.run_id)).state).toBe("completed");

    const before = await h.snapshot(r.body.run_id);
    expectError(await reject(requested.data.approval_id), 409, "node_run_terminal");
    expect(await h.snapshot(r.body.run_id)).toEqual(before);
    const again = await approve(requested.data.approval_id);
    expect(again.status, JSON.stringify(again.body)).toBe(204);
    const after = await h.snapshot(r.body.run_id);
    expect(after).toEqual(before);
    expect(after.run.state).toBe("completed");
    expect(after.run.extensions["nodefabric.outputs"]).toMatchObject({ slept_ms: 1 });
    expect(after.nodeRuns[0].state).toBe("completed");
    expect(after.events.filter((e) => e.type === "approval_resolved")).toHaveLength(1);
    await h.expectRunIsRoot(r.body.run_id);
  });

  it("after an approval was rejected: approve is 409 and changes nothing, rejecting again is 204 and changes nothing", async () => {
    const r = await h.call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms: 1 } });
    const requested = await approvalOf(r.body.run_id);
    expect((await reject(requested.data.approval_id)).status).toBe(204);
    expect((await h.ended(r.body.run_id)).state).toBe("failed");

    const before = await h.snapshot(r.body.run_id);
    expectError(await approve(requested.data.approval_id), 409, "node_run_terminal");
    expect((await reject(requested.data.approval_id)).status).toBe(204);
    const after = await h.snapshot(r.body.run_id);
    expect(after).toEqual(before);
    expect(after.run.extensions["nodefabric.error"].code).toBe("approval_rejected");
    await h.expectRunIsRoot(r.body.run_id);
  });

  it("a second :complete of an ended composite is 409 node_run_terminal and changes nothing", async () => {
    const m = await startManual();
    expect((await m.complete({ state: "completed", outputs: { total: 1 } })).status).toBe(204);
    const before = await h.snapshot(m.runId);
    expect(before.run.state).toBe("completed");
    for (const late of [
      { state: "completed", outputs: { total: 2 } },
      { state: "failed", error: { code: "handler_error", message: "changed my mind" } },
      { state: "canceled" },
    ]) {
      expectError(await h.call("POST", `${h.coord}/v1/node-runs/${m.rootId}:complete`, late), 409, "node_run_terminal");
    }
    expect(await h.snapshot(m.runId)).toEqual(before);
    expect(before.run.extensions["nodefabric.outputs"]).toEqual({ total: 1 });

    // The same for one that failed: it never turns completed.
    const f = await startManual();
    expect((await f.complete({ state: "failed", error: { code: "handler_error", message: "gave up" } })).status).toBe(204);
    const failed = await h.snapshot(f.runId);
    expect(failed.run.state).toBe("failed");
    expectError(await h.call("POST", `${h.coord}/v1/node-runs/${f.rootId}:complete`, { state: "completed", outputs: { total: 3 } }), 409, "node_run_terminal");
    expect(await h.snapshot(f.runId)).toEqual(failed);
    await h.expectRunIsRoot(m.runId);
    await h.expectRunIsRoot(f.runId);
  });

  it("a :complete of an ended child while its run goes on is 409 node_run_terminal and changes nothing", async () => {
    const m = await startManual();
    const [done, broken] = await m.created([
      { node_type_ref: NOTIFY, inputs: { tag: "done" } },
      { node_type_ref: FAIL, inputs: { code: "bad_thing", message: "it broke" } },
    ]);
    expect((await endedNodeRun(done.node_run_id)).state).toBe("completed");
    expect((await endedNodeRun(broken.node_run_id)).state).toBe("failed");

    const before = await h.snapshot(m.runId);
    expectError(await h.call("POST", `${h.coord}/v1/node-runs/${done.node_run_id}:complete`, { state: "failed", error: { code: "handler_error", message: "late" } }), 409, "node_run_terminal");
    expectError(await h.call("POST", `${h.coord}/v1/node-runs/${done.node_run_id}:complete`, { state: "completed", outputs: { notified: false } }), 409, "node_run_terminal");
    expectError(await h.call("POST", `${h.coord}/v1/node-runs/${broken.node_run_id}:complete`, { state: "completed", outputs: { rescued: true } }), 409, "node_run_terminal");
    expectError(await h.call("POST", `${h.coord}/v1/node-runs/${broken.node_run_id}:complete`, { state: "canceled" }), 409, "node_run_terminal");
    expect(await h.snapshot(m.runId)).toEqual(before);
    expect(before.run.state).toBe("running");
    await h.expectRunIsRoot(m.runId);
  });

  it(":evaluation of an ended child records its evaluation_result and never changes its state, outputs or error", async () => {
    const m = await startManual();
    const [done, broken] = await m.created([
      { node_type_ref: NOTIFY, inputs: { tag: "judged" } },
      { node_type_ref: FAIL, inputs: { code: "bad_thing", message: "it broke" } },
    ]);
    const doneBefore = await endedNodeRun(done.node_run_id);
    const brokenBefore = await endedNodeRun(broken.node_run_id);
    expect(doneBefore).toMatchObject({ state: "completed", outputs: { notified: true, tag: "judged" } });
    expect(brokenBefore.state).toBe("failed");

    // The composite judges its children after they ended, with its assignment token.
    const verdict = { status: "fail", reason_code: "judged_wrong", message: "not what was asked", confidence: 0.8 };
    const onDone = await h.call("POST", `${h.coord}/v1/node-runs/${done.node_run_id}:evaluation`, { evaluation_result: verdict, recovery_action: { type: "retry", target_node_run_id: done.node_run_id } }, m.as);
    expect(onDone.status, JSON.stringify(onDone.body)).toBe(204);
    const praise = { status: "success", reason_code: "failed_as_expected" };
    const onBroken = await h.call("POST", `${h.coord}/v1/node-runs/${broken.node_run_id}:evaluation`, { evaluation_result: praise }, m.as);
    expect(onBroken.status, JSON.stringify(onBroken.body)).toBe(204);

    const doneAfter = await h.nodeRun(done.node_run_id);
    expect(doneAfter.evaluation_result).toEqual(verdict);
    expect(doneAfter.state).toBe("completed");
    expect(doneAfter.outputs).toEqual(doneBefore.outputs);
    expect(doneAfter.ended_at).toBe(doneBefore.ended_at);
    expect(doneAfter.extensions?.["nodefabric.error"]).toBeUndefined();

    const brokenAfter = await h.nodeRun(broken.node_run_id);
    expect(brokenAfter.evaluation_result).toEqual(praise);
    expect(brokenAfter.state).toBe("failed");
    expect(brokenAfter.outputs).toBeUndefined();
    expect(brokenAfter.extensions["nodefabric.error"]).toEqual(brokenBefore.extensions["nodefabric.error"]);
    expect(brokenAfter.ended_at).toBe(brokenBefore.ended_at);

    const events = await h.events(m.runId);
    expect(events.find((e) => e.type === "node_evaluated" && e.node_run_id === done.node_run_id)?.data.evaluation_result).toEqual(verdict);
    expect(events.find((e) => e.type === "node_evaluated" && e.node_run_id === broken.node_run_id)?.data.evaluation_result).toEqual(praise);
    // Each child ended exactly once, with its original state.
    expect(events.filter((e) => e.type === "node_run_completed" && e.node_run_id === done.node_run_id).map((e) => e.data.state)).toEqual(["completed"]);
    expect(events.filter((e) => e.type === "node_run_completed" && e.node_run_id === broken.node_run_id).map((e) => e.data.state)).toEqual(["failed"]);
    expect((await h.run(m.runId)).state).toBe("running");
    await h.expectRunIsRoot(m.runId);

    expect((await m.complete({ state: "completed", outputs: {} })).status).toBe(204);
    expect((await h.ended(m.runId)).state).toBe("completed");
    await h.expectRunIsRoot(m.runId);
  });
});
