import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { eventually } from "./run-client.js";
import {
  ECHO,
  closeAll,
  isNodeRun,
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
  type PeerAnswer,
  type TestAuth,
} from "./hardening-support.js";

// Issue 10, invariant 2: nothing an executor answers is taken on trust. A peer executor (a real HTTP server, the only
// one serving `hardening.strict`) answers `:execute` with 200 and a body chosen by the test; an answer that is not a
// valid AtomicExecuteResult, or whose outputs break the node type's output_schema, never completes the NodeRun.
const STRICT = ref("hardening.strict");
const MANUAL_OUT = ref("hardening.manual-out");
const BAD_BEGIN = ref("hardening.manual-bad-begin");

const STRICT_TYPE = {
  ...STRICT,
  kind: "atomic",
  description: "Served only by the test's peer executor; its answer is picked by inputs.mode",
  input_schema: { type: "object", required: ["mode"], properties: { mode: { type: "string" } } },
  output_schema: { type: "object", required: ["answer"], properties: { answer: { type: "string" } }, additionalProperties: false },
  constraints: { gates: { side_effect_class: "read" } },
  // Retries are on, so "one attempt" below shows the coordinator treats these failures as not retryable.
  extensions: { "nodefabric.retry": { max_attempts: 3, initial_interval_ms: 20, backoff_coefficient: 1, max_interval_ms: 50 } },
};

/** What the peer answers, by mode. */
const ANSWERS: Record<string, (id: string) => PeerAnswer> = {
  valid: (id) => ({ body: { node_run_id: id, state: "completed", outputs: { answer: "fine" } } }),
  succeeded: (id) => ({ body: { node_run_id: id, state: "succeeded", outputs: { answer: "legacy" } } }),
  retryable: (id) => ({ body: { node_run_id: id, state: "failed", error: { code: "upstream_error", message: "try again", retryable: true } } }),
  "empty-object": () => ({ body: {} }),
  array: () => ({ body: [] }),
  "numeric-state": (id) => ({ body: { node_run_id: id, state: 42 } }),
  "completed-without-outputs": (id) => ({ body: { node_run_id: id, state: "completed" } }),
  "unknown-state": (id) => ({ body: { node_run_id: id, state: "weird", outputs: { answer: "x" } } }),
  "running-state": (id) => ({ body: { node_run_id: id, state: "running" } }),
  "queued-state": (id) => ({ body: { node_run_id: id, state: "queued", outputs: { answer: "x" } } }),
  "other-node-run": () => ({ body: { node_run_id: "nr_somebody_else", state: "completed", outputs: { answer: "stolen" } } }),
  "failed-without-error": (id) => ({ body: { node_run_id: id, state: "failed" } }),
  "negative-cost": (id) => ({ body: { node_run_id: id, state: "completed", outputs: { answer: "x" }, extensions: { "nodefabric.cost": -1 } } }),
  "not-json": () => ({ raw: "all good, trust me" }),
  "outputs-wrong-type": (id) => ({ body: { node_run_id: id, state: "completed", outputs: { answer: 42 } } }),
  "outputs-extra-key": (id) => ({ body: { node_run_id: id, state: "completed", outputs: { answer: "x", extra: true } } }),
  "outputs-missing-key": (id) => ({ body: { node_run_id: id, state: "completed", outputs: {} } }),
};

describe("executor answers are checked before they count", () => {
  let auth: TestAuth;
  let h: HardeningFabric;
  let peer: Peer;
  let composite: Peer;

  beforeAll(async () => {
    auth = await startTestAuth();
    h = await startHardeningFabric({ auth, ready: ["demo.echo"] });
    peer = await startPeer((body) => (ANSWERS[body.inputs.mode] ?? ANSWERS.valid)(body.node_run_id));
    await registerExecutor(h, "hardening-answers-peer", peer.url, "atomic", [STRICT_TYPE]);
    composite = await startCompositePeer(h, "hardening-answers-composite", [
      manualType({
        ...MANUAL_OUT,
        description: "A composite the test completes by hand",
        output_schema: { type: "object", required: ["total"], properties: { total: { type: "integer" } } },
      }),
    ]);
  }, 60_000);
  let badBegin: Peer;
  beforeAll(async () => {
    badBegin = await startCompositePeer(h, "hardening-answers-bad-begin", [manualType({ ...BAD_BEGIN, description: "A composite whose executor answers :begin wrongly" })]);
  }, 60_000);
  afterAll(() => closeAll(h, peer, composite, badBegin, auth));

  async function runStrict(mode: string) {
    const r = await h.call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: STRICT, input: { mode } }, { prefer: "wait=15" });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const run = await h.ended(r.body.run_id);
    const root = await h.nodeRun(run.root_node_run_id);
    const events = await h.events(run.run_id);
    return { run, root, events, calls: () => peer.executes.filter((x) => x.body.node_run_id === run.root_node_run_id) };
  }

  it("completes with a valid answer, and every event that ends something carries data.state", async () => {
    const { run, root, events, calls } = await runStrict("valid");
    expect(run.state).toBe("completed");
    expect(run.extensions["nodefabric.outputs"]).toEqual({ answer: "fine" });
    expect(root).toMatchObject({ state: "completed", outputs: { answer: "fine" } });
    expect(calls()).toHaveLength(1);
    expect(calls()[0].body).toMatchObject({ run_id: run.run_id, node_run_id: root.node_run_id, node_type_ref: STRICT, inputs: { mode: "valid" } });
    for (const type of ["atomic_executed", "node_run_completed", "run_completed"]) {
      const ends = events.filter((e) => e.type === type);
      expect(ends, type).toHaveLength(1);
      expect(ends[0].data?.state, type).toBe("completed");
    }
  });

  it("reads a peer's `succeeded` as completed (D1)", async () => {
    const { run, root } = await runStrict("succeeded");
    expect(run.state).toBe("completed");
    expect(root.state).toBe("completed");
    expect(run.extensions["nodefabric.outputs"]).toEqual({ answer: "legacy" });
  });

  it("retries a retryable failure the executor reports (so one attempt below means: not retried)", async () => {
    const { run, events, calls } = await runStrict("retryable");
    expect(run.state).toBe("failed");
    expect(run.extensions["nodefabric.error"].code).toBe("upstream_error");
    expect(calls()).toHaveLength(3);
    expect(events.filter((e) => e.type === "atomic_executed").map((e) => e.data.state)).toEqual(["failed", "failed", "failed"]);
  });

  const protocolErrors = [
    ["empty-object", "a body that is {}"],
    ["array", "a body that is an array"],
    ["numeric-state", 'a "state" of 42'],
    ["completed-without-outputs", "completed without outputs (D2)"],
    ["unknown-state", 'an unknown state "weird"'],
    ["running-state", 'a state that does not end anything ("running")'],
    ["queued-state", 'a state that does not end anything ("queued")'],
    ["other-node-run", "the node_run_id of another NodeRun"],
    ["failed-without-error", "failed without an error"],
    ["negative-cost", "a reported cost below 0"],
    ["not-json", "a 200 whose body is not JSON"],
  ] as const;
  const invalidOutputs = [
    ["outputs-wrong-type", "outputs of the wrong type"],
    ["outputs-extra-key", "outputs with a key the schema forbids"],
    ["outputs-missing-key", "outputs without a required key"],
  ] as const;
  const cases = [...protocolErrors.map(([m, w]) => [m, w, "executor_protocol_error"] as const), ...invalidOutputs.map(([m, w]) => [m, w, "invalid_outputs"] as const)];

  it.each(cases)("an answer with %s (%s) fails the NodeRun and the run with %s, after one attempt", async (mode, _what, code) => {
    const { run, root, events, calls } = await runStrict(mode);

    expect(run.state).toBe("failed");
    expect(run.extensions["nodefabric.error"]).toMatchObject({ code, retryable: false });
    expect(run.extensions["nodefabric.outputs"]).toBeUndefined();
    expect(root.state).toBe("failed");
    expect(root.extensions["nodefabric.error"]).toMatchObject({ code, retryable: false });
    expect(root.outputs).toBeUndefined();
    expect(run.state).toBe(root.state);

    // Not retryable: one attempt, although the node type allows three.
    await sleep(200);
    expect(calls()).toHaveLength(1);
    expect(events.some((e) => e.type === "node_run_retrying")).toBe(false);
    const executed = events.filter((e) => e.type === "atomic_executed");
    expect(executed).toHaveLength(1);
    expect(executed[0].data).toMatchObject({ state: "failed", error: { code } });
    const ended = events.filter((e) => e.type === "node_run_completed");
    expect(ended).toHaveLength(1);
    expect(ended[0].data).toMatchObject({ state: "failed", error: { code } });
    expect(ended[0].data.outputs).toBeUndefined();
    expect(events.at(-1)).toMatchObject({ type: "run_completed", data: { state: "failed", error: { code } } });
    expect(JSON.stringify(events)).not.toContain("stolen");
  });

  /** Starts a run of the hand-driven composite; returns its ids and calls made with its assignment token. */
  const startManual = () => startManualRun(h, composite, MANUAL_OUT);

  it("never passes a child's outputs that break its output_schema to the parent", async () => {
    const m = await startManual();
    const created = await m.create([{ node_type_ref: STRICT, inputs: { mode: "outputs-wrong-type" } }, { node_type_ref: ECHO, inputs: { fine: true } }]);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const [badId, goodId] = created.body.node_runs.map((n: Json) => n.node_run_id as string);
    const bad = await h.nodeRunIn(badId, ["failed"]);
    expect(bad.extensions["nodefabric.error"]).toMatchObject({ code: "invalid_outputs", retryable: false });
    expect(bad.outputs).toBeUndefined();
    await eventually(async () => ((await h.nodeRun(goodId)).state === "completed" ? true : undefined));
    const events = await h.events(m.runId);
    const badEnd = events.find((e) => e.type === "node_run_completed" && e.node_run_id === badId);
    expect(badEnd.data).toMatchObject({ state: "failed", error: { code: "invalid_outputs" } });
    expect(badEnd.data.outputs).toBeUndefined();
    // The composite itself is untouched by its child's failure until it decides.
    expect((await h.run(m.runId)).state).toBe("running");
    expect((await m.complete({ state: "completed", outputs: { total: 1 } })).status).toBe(204);
    expect((await h.ended(m.runId)).state).toBe("completed");
  });

  it("fails a composite whose executor answers :begin with something that is not a CompositeBeginResponse, without retrying", async () => {
    badBegin.onBegin = () => ({ body: { accepted: "yes" } });
    const r = await h.call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: BAD_BEGIN, input: {} });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const run = await h.ended(r.body.run_id);
    expect(run.state).toBe("failed");
    expect(run.extensions["nodefabric.error"]).toMatchObject({ code: "executor_protocol_error", retryable: false });
    const root = await h.nodeRun(run.root_node_run_id);
    expect(root.state).toBe("failed");
    expect(badBegin.begins.filter((b) => b.node_run_id === root.node_run_id)).toHaveLength(1);
  });

  it("fails a composite whose :complete carries outputs that break its output_schema with invalid_outputs", async () => {
    const m = await startManual();
    const done = await m.complete({ state: "completed", outputs: { total: "many" } });
    expect(done.status, JSON.stringify(done.body)).toBe(204);
    const run = await h.ended(m.runId);
    expect(run.state).toBe("failed");
    expect(run.extensions["nodefabric.error"]).toMatchObject({ code: "invalid_outputs" });
    expect(run.extensions["nodefabric.outputs"]).toBeUndefined();
    const root = await h.nodeRun(m.rootId);
    expect(isNodeRun(root)).toBe(true);
    expect(root.state).toBe("failed");
    expect(root.outputs).toBeUndefined();
    expect(root.extensions["nodefabric.error"].code).toBe("invalid_outputs");
    const events = await h.events(m.runId);
    expect(events.find((e) => e.type === "node_run_completed" && e.node_run_id === m.rootId).data).toMatchObject({ state: "failed", error: { code: "invalid_outputs" } });
    expect(events.at(-1)).toMatchObject({ type: "run_completed", data: { state: "failed" } });
    expect(JSON.stringify(events)).not.toContain("many");
  });
});
