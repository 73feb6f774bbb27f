import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import Fastify, { type FastifyInstance } from "fastify";
import { validatorFor } from "@nodefabric/schemas";
import { loadConfig, startFabric, type RunningFabric } from "@nodefabric/core";
import { call, eventually, readNdjson } from "./run-client.js";

// The coordinator's side of composites, driven by the test itself through the contract: a stub composite executor
// accepts `:begin` and records it, and the test then acts as that executor over HTTP.
const repo = fileURLToPath(new URL("..", import.meta.url));
const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };
const SLEEP = { node_type_id: "demo.sleep", version: "1.0.0" };
const MANUAL = { node_type_id: "test.manual", version: "1.0.0" };

describe("children of a composite, at the coordinator", () => {
  let fabric: RunningFabric;
  let stub: FastifyInstance;
  let coordinator: string;
  const begins: Array<Record<string, any>> = [];
  const cancels: string[] = [];

  beforeAll(async () => {
    stub = Fastify();
    stub.post("/v1/composite-node-runs:begin", async (req) => {
      begins.push(req.body as Record<string, any>);
      return { accepted: true };
    });
    stub.post("/v1/composite-node-runs/:id(.+)::cancel", async (req, reply) => {
      cancels.push((req.params as { id: string }).id);
      return reply.code(204).send();
    });
    await stub.listen({ host: "127.0.0.1", port: 0 });
    const stubUrl = `http://127.0.0.1:${(stub.server.address() as { port: number }).port}`;
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-children-"));
    fabric = await startFabric(loadConfig({ cwd: repo, env: {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"] } as never }));
    coordinator = fabric.urls["run-coordinator"]!;
    const registry = fabric.urls["node-registry"]!;
    const published = await call("POST", `${registry}/v1/node-types`, {
      node_type: {
        ...MANUAL,
        kind: "composite",
        description: "A composite the test drives by hand",
        output_schema: { type: "object", required: ["total"], properties: { total: { type: "integer" } } },
      },
    });
    expect(published.status).toBe(200);
    expect((await call("PUT", `${registry}/v1/executors/test-stub`, { endpoint: stubUrl, kind: "composite", node_types: [MANUAL] })).status).toBe(200);
    await eventually(async () => ((await call("GET", `${registry}/v1/executors?node_type_id=demo.echo`)).body.length > 0 ? true : undefined));
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
    await stub?.close();
  });

  /** Starts a run of the manual composite and resolves once the stub holds its `:begin`. */
  async function startComposite(extra: Record<string, unknown> = {}) {
    const r = await call("POST", `${fabric.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: MANUAL, input: { n: 1 }, ...extra });
    expect(r.status).toBe(200);
    const begin = await eventually(async () => begins.find((b) => b.run_id === r.body.run_id));
    return { runId: r.body.run_id as string, rootId: r.body.root_node_run_id as string, begin };
  }

  const create = (runId: string, parent: string, node_runs: unknown[]) => call("POST", `${coordinator}/v1/node-runs`, { run_id: runId, parent_node_run_id: parent, node_runs });
  const nodeRuns = async (runId: string) => (await call("GET", `${coordinator}/v1/runs/${runId}/node-runs`)).body as Array<Record<string, any>>;

  it("sends :begin with the coordinator's address and an assignment token", async () => {
    const { runId, rootId, begin } = await startComposite();
    expect(validatorFor("composite_begin_request")(begin)).toBe(true);
    expect(begin).toMatchObject({ run_id: runId, node_run_id: rootId, node_type_ref: MANUAL, inputs: { n: 1 }, coordinator_endpoint: coordinator });
    expect(begin.assignment_token.split(".")).toHaveLength(3);
    const root = await call("GET", `${coordinator}/v1/node-runs/${rootId}`);
    expect(root.body).toMatchObject({ state: "running", kind: "composite" });
  });

  it("creates children, returns existing ones for repeated keys, and refuses a reused key with other inputs", async () => {
    const { runId, rootId } = await startComposite();
    const specs = [
      { node_type_ref: ECHO, inputs: { i: 0 }, idempotency_key: `${rootId}:0` },
      { node_type_ref: ECHO, inputs: { i: 1 }, idempotency_key: `${rootId}:1` },
    ];
    const first = await create(runId, rootId, specs);
    expect(first.status).toBe(200);
    expect(validatorFor("node_runs_create_response")(first.body)).toBe(true);
    expect(first.body.node_runs.map((n: { inputs: unknown }) => n.inputs)).toEqual([{ i: 0 }, { i: 1 }]);
    expect(first.body.node_runs.every((n: { parent_node_run_id: string }) => n.parent_node_run_id === rootId)).toBe(true);
    const again = await create(runId, rootId, specs);
    expect(again.body.node_runs.map((n: { node_run_id: string }) => n.node_run_id)).toEqual(first.body.node_runs.map((n: { node_run_id: string }) => n.node_run_id));
    const clash = await create(runId, rootId, [{ ...specs[0], inputs: { i: 99 } }]);
    expect(clash.status).toBe(409);
    expect(clash.body.error.code).toBe("idempotency_conflict");
    expect((await nodeRuns(runId)).length).toBe(3);

    // The composite's own event stream covers its children, and their outputs travel in the events.
    const done = await eventually(async () => {
      const ev = await readNdjson(`${coordinator}/v1/node-runs/${rootId}/events?follow=false`);
      const ends = ev.lines.filter((e) => e.type === "node_run_completed");
      return ends.length === 2 ? ev.lines : undefined;
    });
    const ends = done.filter((e) => e.type === "node_run_completed");
    expect(ends.map((e) => e.data.outputs).sort((a, b) => a.echo.i - b.echo.i)).toEqual([{ echo: { i: 0 } }, { echo: { i: 1 } }]);
    const childIds = done.find((e) => e.type === "composite_decomposed").data.child_node_run_ids;
    expect(childIds).toHaveLength(2);
    // Each child passed the node.run.create checkpoint before it was dispatched.
    for (const id of childIds) {
      expect(done.find((e) => e.type === "policy_decided" && e.node_run_id === id && e.data.action === "node.run.create")?.data.decision).toBe("allow");
    }

    const complete = await call("POST", `${coordinator}/v1/node-runs/${rootId}:complete`, { state: "completed", outputs: { total: 2 } });
    expect(complete.status).toBe(204);
    const run = await call("GET", `${coordinator}/v1/runs/${runId}`);
    expect(run.body).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { total: 2 } } });
  });

  it("refuses children past a structural limit, all or nothing", async () => {
    const { runId, rootId } = await startComposite({ constraints: { structural: { max_children_per_composite: 3 } } });
    expect((await create(runId, rootId, [{ node_type_ref: ECHO, inputs: {} }, { node_type_ref: ECHO, inputs: {} }])).status).toBe(200);
    const over = await create(runId, rootId, [{ node_type_ref: ECHO, inputs: {} }, { node_type_ref: ECHO, inputs: {} }]);
    expect(over.status).toBe(409);
    expect(over.body.error.code).toBe("constraint_violation");
    expect(over.body.error.details.violations[0].constraint).toBe("structural.max_children_per_composite");
    expect((await nodeRuns(runId)).length).toBe(3);
  });

  it("refuses a child deeper than max_depth, and too many node runs in a run", async () => {
    const { runId, rootId } = await startComposite({ constraints: { structural: { max_depth: 1, max_total_nodes_per_run: 3 } } });
    const mid = await create(runId, rootId, [{ node_type_ref: MANUAL, inputs: {} }]);
    expect(mid.status).toBe(200);
    const midId = mid.body.node_runs[0].node_run_id;
    await eventually(async () => begins.find((b) => b.node_run_id === midId));
    const deep = await create(runId, midId, [{ node_type_ref: ECHO, inputs: {} }]);
    expect(deep.status).toBe(409);
    expect(deep.body.error.details.violations[0].constraint).toBe("structural.max_depth");
    const many = await create(runId, rootId, [{ node_type_ref: ECHO, inputs: {} }, { node_type_ref: ECHO, inputs: {} }]);
    expect(many.status).toBe(409);
    expect(many.body.error.details.violations.map((v: { constraint: string }) => v.constraint)).toContain("structural.max_total_nodes_per_run");
  });

  it("refuses a decomposition round past max_decomposition_rounds_per_node", async () => {
    const { runId, rootId } = await startComposite({ constraints: { structural: { max_decomposition_rounds_per_node: 1 } } });
    expect((await create(runId, rootId, [{ node_type_ref: ECHO, inputs: { round: 1 } }])).status).toBe(200);
    const second = await create(runId, rootId, [{ node_type_ref: ECHO, inputs: { round: 2 } }]);
    expect(second.status).toBe(409);
    expect(second.body.error.details.violations[0].constraint).toBe("structural.max_decomposition_rounds_per_node");
    expect((await nodeRuns(runId)).length).toBe(2);
  });

  it("enforces allow and deny lists", async () => {
    // The run's lists bind its root too, so the allow list names the composite itself.
    const { runId, rootId } = await startComposite({ constraints: { candidates: { denied_node_type_ids: ["demo.fail"], allowed_node_type_ids: [MANUAL.node_type_id, "demo.echo", "demo.fail"] } } });
    const denied = await create(runId, rootId, [{ node_type_ref: { node_type_id: "demo.fail", version: "1.0.0" }, inputs: {} }]);
    expect(denied.status).toBe(409);
    expect(denied.body.error.message).toContain("node_type_denied");
    const notAllowed = await create(runId, rootId, [{ node_type_ref: SLEEP, inputs: { ms: 1 } }]);
    expect(notAllowed.status).toBe(409);
    expect(notAllowed.body.error.message).toContain("node_type_not_allowed");
    expect((await create(runId, rootId, [{ node_type_ref: ECHO, inputs: {} }])).status).toBe(200);
  });

  it("checks a binding against its stored candidate set", async () => {
    const { runId, rootId } = await startComposite();
    const set = await call("POST", `${fabric.urls["selection"]}/v1/candidate-sets`, { subtask_spec: { subtask_id: "s1", goal: "echo the inputs back" }, constraints: { candidates: { max_candidates_per_subtask: 1 } } });
    expect(set.status).toBe(200);
    const chosen = set.body.candidates[0].node_type_ref;
    const other = chosen.node_type_id === "demo.echo" ? SLEEP : ECHO;
    const outside = await create(runId, rootId, [
      { node_type_ref: other, inputs: { ms: 1 }, candidate_set_id: set.body.candidate_set_id, binding_decision: { subtask_id: "s1", chosen_node_type_ref: other, candidate_set_id: set.body.candidate_set_id } },
    ]);
    expect(outside.status).toBe(409);
    expect(outside.body.error.code).toBe("candidate_binding_violation");
    const unknownSet = await create(runId, rootId, [{ node_type_ref: chosen, inputs: {}, candidate_set_id: "cs_nope" }]);
    expect(unknownSet.status).toBe(409);
    expect(unknownSet.body.error.code).toBe("candidate_binding_violation");
    const inside = await create(runId, rootId, [
      { node_type_ref: chosen, inputs: {}, candidate_set_id: set.body.candidate_set_id, binding_decision: { subtask_id: "s1", chosen_node_type_ref: chosen, candidate_set_id: set.body.candidate_set_id } },
    ]);
    expect(inside.status).toBe(200);
    const ev = await readNdjson(`${coordinator}/v1/runs/${runId}/events?follow=false`);
    expect(ev.lines.find((e) => e.type === "subtask_mapped").data).toMatchObject({ subtask_id: "s1", candidate_set_id: set.body.candidate_set_id, chosen_node_type_ref: chosen });
  });

  it("fails a composite whose outputs break its output_schema", async () => {
    const { runId, rootId } = await startComposite();
    expect((await call("POST", `${coordinator}/v1/node-runs/${rootId}:complete`, { state: "completed", outputs: { total: "many" } })).status).toBe(204);
    const run = await call("GET", `${coordinator}/v1/runs/${runId}`);
    expect(run.body.state).toBe("failed");
    expect(run.body.extensions["nodefabric.error"]).toMatchObject({ code: "invalid_outputs" });
    expect(run.body.extensions["nodefabric.outputs"]).toBeUndefined();
  });

  it("cancels a composite's open children when it ends, and tells the composite executor when the run is canceled", async () => {
    const a = await startComposite();
    const slow = await create(a.runId, a.rootId, [{ node_type_ref: SLEEP, inputs: { ms: 10_000 } }]);
    const slowId = slow.body.node_runs[0].node_run_id;
    await eventually(async () => ((await call("GET", `${coordinator}/v1/node-runs/${slowId}`)).body.state === "running" ? true : undefined));
    expect((await call("POST", `${coordinator}/v1/node-runs/${a.rootId}:complete`, { state: "completed", outputs: { total: 0 } })).status).toBe(204);
    expect((await call("GET", `${coordinator}/v1/node-runs/${slowId}`)).body.state).toBe("canceled");
    const ev = await readNdjson(`${coordinator}/v1/runs/${a.runId}/events`);
    expect(ev.lines.at(-1).type).toBe("run_completed");
    expect(ev.lines.map((e) => e.seq)).toEqual(ev.lines.map((_, i) => i));

    const b = await startComposite();
    const c = await call("POST", `${fabric.urls["run-gateway"]}/v1/runs/${b.runId}:cancel`);
    expect(c.body.state).toBe("canceled");
    await eventually(async () => (cancels.includes(b.rootId) ? true : undefined));
    const late = await create(b.runId, b.rootId, [{ node_type_ref: ECHO, inputs: {} }]);
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe("parent_node_run_invalid");
  });

  it("refuses children under a parent that is not a running composite of the run", async () => {
    const a = await startComposite();
    const other = await startComposite();
    const wrongRun = await create(other.runId, a.rootId, [{ node_type_ref: ECHO, inputs: {} }]);
    expect(wrongRun.status).toBe(409);
    expect(wrongRun.body.error.code).toBe("parent_node_run_invalid");
    const child = await create(a.runId, a.rootId, [{ node_type_ref: ECHO, inputs: {} }]);
    const atomicParent = await create(a.runId, child.body.node_runs[0].node_run_id, [{ node_type_ref: ECHO, inputs: {} }]);
    expect(atomicParent.status).toBe(409);
    expect(atomicParent.body.error.code).toBe("parent_node_run_invalid");
    const empty = await create(a.runId, a.rootId, []);
    expect(empty.status).toBe(400);
  });
});
