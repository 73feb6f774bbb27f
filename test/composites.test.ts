import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer, type Server } from "node:http";
import { mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { validatorFor } from "@nodefabric/schemas";
import { loadConfig, startFabric, type RunningFabric } from "@nodefabric/core";
import { call, eventually, readNdjson } from "./run-client.js";

// Composites through the whole fabric over loopback HTTP: the coordinator dispatches them to the composite executor,
// which drives their code against the coordinator's node-run API.
const repo = fileURLToPath(new URL("..", import.meta.url));
const runFixtures = path.join(repo, "test/fixtures/run-handlers");
const compositeFixtures = path.join(repo, "test/fixtures/composite-handlers");
const isRun = validatorFor("run");
const isNodeRun = validatorFor("node_run");
const isEvent = validatorFor("run_event");

const ref = (node_type_id: string) => ({ node_type_id, version: "1.0.0" });
const ECHO = ref("demo.echo");
const FAIL = ref("demo.fail");

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe("composites through the fabric", () => {
  let fabric: RunningFabric;
  let gw: string;

  beforeAll(async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-composites-"));
    fabric = await startFabric(
      loadConfig({ cwd: repo, env: {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo", "@nodefabric/handler-examples", runFixtures, compositeFixtures] } as never }),
    );
    gw = fabric.urls["run-gateway"]!;
    const registry = fabric.urls["node-registry"]!;
    // Both executors register their node types shortly after they listen.
    for (const id of ["fixture.parallel", "fixture.abortable"]) {
      await eventually(async () => ((await call("GET", `${registry}/v1/executors?node_type_id=${id}`)).body.length > 0 ? true : undefined), 15_000, `registration of ${id}`);
    }
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  /** Starts a run and waits for its end. */
  async function runToEnd(root: { node_type_id: string; version: string }, input: Json): Promise<Json> {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: root, input }, { prefer: "wait=30" });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(["completed", "failed", "canceled"], JSON.stringify(r.body)).toContain(r.body.state);
    expect(isRun(r.body), JSON.stringify(isRun.errors)).toBe(true);
    return r.body;
  }

  async function nodeRuns(runId: string): Promise<Json[]> {
    const r = await call("GET", `${gw}/v1/runs/${runId}/node-runs`);
    expect(r.status).toBe(200);
    for (const nr of r.body) expect(isNodeRun(nr), JSON.stringify(isNodeRun.errors)).toBe(true);
    return r.body;
  }

  async function events(runId: string): Promise<Json[]> {
    const ev = await readNdjson(`${gw}/v1/runs/${runId}/events`);
    expect(ev.status).toBe(200);
    for (const e of ev.lines) expect(isEvent(e), JSON.stringify(isEvent.errors)).toBe(true);
    return ev.lines;
  }

  it("runs children in parallel, created in one request with deterministic keys, and completes with their outputs", async () => {
    const run = await runToEnd(ref("fixture.parallel"), { items: ["a", "b", "c", "d"] });
    expect(run.state).toBe("completed");
    expect(run.extensions["nodefabric.outputs"]).toEqual({ results: ["a", "b", "c", "d"] });

    const all = await nodeRuns(run.run_id);
    const root = all.find((n) => n.node_run_id === run.root_node_run_id)!;
    expect(root).toMatchObject({ kind: "composite", state: "completed", outputs: { results: ["a", "b", "c", "d"] } });
    const children = all.filter((n) => n.parent_node_run_id === root.node_run_id);
    expect(children).toHaveLength(4);
    for (const c of children) expect(c).toMatchObject({ kind: "atomic", state: "completed", node_type_ref: ECHO });
    const keys = children.map((c) => c.extensions["nodefabric.idempotency_key"]).sort();
    expect(keys).toEqual([0, 1, 2, 3].map((i) => `${root.node_run_id}:${i}`));
    for (const c of children) {
      const i = Number(c.extensions["nodefabric.idempotency_key"].split(":").at(-1));
      expect(c.inputs).toEqual({ item: ["a", "b", "c", "d"][i] });
    }

    // The four calls of one tick went out as one create: one decomposition round holding every child.
    const ev = await events(run.run_id);
    const rounds = ev.filter((e) => e.type === "composite_decomposed");
    expect(rounds).toHaveLength(1);
    expect(rounds[0].data.child_node_run_ids.sort()).toEqual(children.map((c) => c.node_run_id).sort());
    expect(ev.map((e) => e.seq)).toEqual(ev.map((_, i) => i));
  });

  it("nests composites three levels deep, and a middle composite's event stream covers exactly its subtree", async () => {
    const run = await runToEnd(ref("fixture.nest"), { depth: 3, width: 2 });
    expect(run.state).toBe("completed");
    expect(run.extensions["nodefabric.outputs"]).toEqual({ depth: 3, leaves: 2 });

    const all = await nodeRuns(run.run_id);
    expect(all).toHaveLength(5);
    const composites = all.filter((n) => n.kind === "composite").sort((a, b) => a.extensions["nodefabric.depth"] - b.extensions["nodefabric.depth"]);
    expect(composites.map((c) => c.extensions["nodefabric.depth"])).toEqual([0, 1, 2]);
    expect(composites.map((c) => c.outputs)).toEqual([
      { depth: 3, leaves: 2 },
      { depth: 2, leaves: 2 },
      { depth: 1, leaves: 2 },
    ]);
    expect(composites[1].parent_node_run_id).toBe(composites[0].node_run_id);
    expect(composites[2].parent_node_run_id).toBe(composites[1].node_run_id);
    const leaves = all.filter((n) => n.kind === "atomic");
    expect(leaves.map((l) => l.parent_node_run_id)).toEqual([composites[2].node_run_id, composites[2].node_run_id]);
    expect(leaves.every((l) => l.extensions["nodefabric.depth"] === 3 && l.state === "completed")).toBe(true);

    const middle = composites[1].node_run_id;
    const subtree = new Set([middle, composites[2].node_run_id, ...leaves.map((l) => l.node_run_id)]);
    const ev = await readNdjson(`${fabric.urls["run-coordinator"]}/v1/node-runs/${middle}/events`);
    expect(ev.status).toBe(200);
    for (const e of ev.lines) expect(isEvent(e)).toBe(true);
    expect(new Set(ev.lines.map((e) => e.node_run_id))).toEqual(subtree);
    // It ends with the middle composite's own end, and holds every event of the subtree that the run's stream holds.
    expect(ev.lines.at(-1)).toMatchObject({ type: "node_run_completed", node_run_id: middle, data: { state: "completed" } });
    const fromRun = (await events(run.run_id)).filter((e) => e.node_run_id !== undefined && subtree.has(e.node_run_id));
    expect(ev.lines).toEqual(fromRun);
  });

  it("lets a composite catch a child's failure and carry on", async () => {
    const run = await runToEnd(ref("fixture.tolerant"), {});
    expect(run.state).toBe("completed");
    const out = run.extensions["nodefabric.outputs"];
    expect(out).toMatchObject({ caught: true, code: "upstream_error", state: "failed", after: { after: "failure" } });
    const failed = (await nodeRuns(run.run_id)).find((n) => n.node_run_id === out.child)!;
    expect(failed).toMatchObject({ state: "failed", node_type_ref: FAIL, extensions: { "nodefabric.error": { code: "upstream_error" } } });
  });

  it("fails the composite and its run with child_failed when a child's failure is not caught", async () => {
    const run = await runToEnd(ref("fixture.tolerant"), { rethrow: true });
    expect(run.state).toBe("failed");
    const error = run.extensions["nodefabric.error"];
    expect(error.code).toBe("child_failed");
    const all = await nodeRuns(run.run_id);
    const child = all.find((n) => n.parent_node_run_id === run.root_node_run_id)!;
    expect(child.state).toBe("failed");
    expect(error.details).toEqual({ node_run_id: child.node_run_id, error: child.extensions["nodefabric.error"] });
    expect(error.details.error.code).toBe("upstream_error");
    const root = all.find((n) => n.node_run_id === run.root_node_run_id)!;
    expect(root).toMatchObject({ state: "failed", extensions: { "nodefabric.error": { code: "child_failed" } } });
    expect(root.outputs).toBeUndefined();
  });

  it("cancels a composite tree: every NodeRun ends canceled and both the composites' and the atomic grandchild's signals fire", async () => {
    const notes: Json[] = [];
    const observer: Server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        notes.push(JSON.parse(body));
        res.end("{}");
      });
    });
    await new Promise<void>((resolve) => observer.listen(0, "127.0.0.1", resolve));
    const notify_url = `http://127.0.0.1:${(observer.address() as { port: number }).port}/aborted`;
    try {
      const input = { target: ref("fixture.relay"), notify_url, inputs: { target: ref("fixture.abortable"), notify_url, inputs: { notify_url } } };
      const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: ref("fixture.relay"), input });
      expect(r.status).toBe(200);
      const leaf = await eventually(async () => {
        const all = await nodeRuns(r.body.run_id);
        return all.find((n) => n.node_type_ref.node_type_id === "fixture.abortable" && n.state === "running");
      }, 10_000, "the atomic grandchild running");
      const c = await call("POST", `${gw}/v1/runs/${r.body.run_id}:cancel`);
      expect(c.status).toBe(200);
      expect(c.body.state).toBe("canceled");

      const all = await nodeRuns(r.body.run_id);
      expect(all).toHaveLength(3);
      expect(all.map((n) => n.state)).toEqual(["canceled", "canceled", "canceled"]);
      const composites = all.filter((n) => n.kind === "composite").map((n) => n.node_run_id).sort();
      await eventually(async () => (notes.length >= 3 ? true : undefined), 10_000, "three abort notifications");
      expect(notes.find((n) => !n.composite)).toEqual({ node_run_id: leaf.node_run_id, aborted: true });
      expect(notes.filter((n) => n.composite).map((n) => n.node_run_id).sort()).toEqual(composites);
      expect(notes.every((n) => n.aborted === true)).toBe(true);

      // The executor stops driving both, and reports nothing for them: they stay canceled.
      const health = await eventually(async () => {
        const h = await call("GET", `${fabric.urls["composite-executor"]}/v1/health`);
        return h.body.checks.find((k: Json) => k.name === "driving").details.count === 0 ? h.body : undefined;
      });
      expect(validatorFor("health")(health)).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const after = await nodeRuns(r.body.run_id);
      expect(after.map((n) => n.state)).toEqual(["canceled", "canceled", "canceled"]);
      const ev = await events(r.body.run_id);
      expect(ev.at(-1)).toMatchObject({ type: "run_completed", data: { state: "canceled" } });
      expect(ev.filter((e) => e.type === "node_run_completed" && e.data.state !== "canceled")).toEqual([]);
    } finally {
      observer.close();
    }
  });

  it("retries a child judged wrong: a new NodeRun linked by nodefabric.retry_of, the old one unchanged", async () => {
    const run = await runToEnd(ref("fixture.recover"), { action: "retry" });
    expect(run.state).toBe("completed");
    const out = run.extensions["nodefabric.outputs"];
    expect(out.outputs).toEqual({ echo: { question: 42 } });
    const all = await nodeRuns(run.run_id);
    const first = all.find((n) => n.node_run_id === out.first)!;
    expect(first).toMatchObject({
      state: "completed",
      outputs: { echo: { question: 42 } },
      evaluation_result: { status: "fail", reason_code: "not_good_enough" },
      recovery_actions: [{ type: "retry", target_node_run_id: out.first }],
    });
    expect(first.extensions["nodefabric.retry_of"]).toBeUndefined();
    const retried = all.filter((n) => n.extensions["nodefabric.retry_of"] === out.first);
    expect(retried).toHaveLength(1);
    expect(retried[0]).toMatchObject({ state: "completed", node_type_ref: ECHO, inputs: { question: 42 }, parent_node_run_id: run.root_node_run_id });
    expect(retried[0].node_run_id).not.toBe(out.first);
    const ev = await events(run.run_id);
    expect(ev.filter((e) => e.node_run_id === out.first).map((e) => e.type)).toContain("node_evaluated");
    expect(ev.find((e) => e.type === "recovery_applied" && e.node_run_id === out.first).data.recovery_action.type).toBe("retry");
  });

  it("remaps a failed child to another node type with the same inputs", async () => {
    const run = await runToEnd(ref("fixture.recover"), { action: "remap" });
    expect(run.state).toBe("completed");
    const out = run.extensions["nodefabric.outputs"];
    expect(out.outputs).toEqual({ echo: { message: "wrong tool" } });
    const all = await nodeRuns(run.run_id);
    expect(all.find((n) => n.node_run_id === out.first)).toMatchObject({ state: "failed", node_type_ref: FAIL, recovery_actions: [{ type: "remap", target_node_type_ref: ECHO }] });
    const remapped = all.filter((n) => n.extensions["nodefabric.remap_of"] === out.first);
    expect(remapped).toHaveLength(1);
    expect(remapped[0]).toMatchObject({ state: "completed", node_type_ref: ECHO, inputs: { message: "wrong tool" } });
  });

  it("aborts the composite with child_failed on an abort recovery; ask_user is only recorded", async () => {
    const aborted = await runToEnd(ref("fixture.recover"), { action: "abort" });
    expect(aborted.state).toBe("failed");
    const error = aborted.extensions["nodefabric.error"];
    expect(error.code).toBe("child_failed");
    expect(error.details).toMatchObject({ recovery: "abort", evaluation_result: { status: "fail" } });
    const abortedRuns = await nodeRuns(aborted.run_id);
    expect(abortedRuns).toHaveLength(2);
    expect(abortedRuns.find((n) => n.node_run_id === error.details.node_run_id)).toMatchObject({ state: "completed", recovery_actions: [{ type: "abort" }] });

    const asked = await runToEnd(ref("fixture.recover"), { action: "ask_user" });
    expect(asked.state).toBe("completed");
    expect(asked.extensions["nodefabric.outputs"].outputs).toBeNull();
    expect(await nodeRuns(asked.run_id)).toHaveLength(2);
    const ev = await events(asked.run_id);
    expect(ev.find((e) => e.type === "recovery_applied").data.recovery_action.type).toBe("ask_user");
  });

  it("binds a child to the candidate set ctx.select returned", async () => {
    const run = await runToEnd(ref("fixture.pick"), { goal: "echo the inputs back" });
    expect(run.state).toBe("completed");
    const out = run.extensions["nodefabric.outputs"];
    expect(out.chosen).toEqual(ECHO);
    expect(out.outputs).toEqual({ echo: { goal: "echo the inputs back" } });
    const set = await call("GET", `${fabric.urls.selection}/v1/candidate-sets/${out.candidate_set_id}`);
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ subtask_id: "pick-1" });
    expect(set.body.candidates.map((c: Json) => c.node_type_ref)).toContainEqual(ECHO);
    const child = (await nodeRuns(run.run_id)).find((n) => n.parent_node_run_id === run.root_node_run_id)!;
    expect(child.extensions["nodefabric.candidate_set_id"]).toBe(out.candidate_set_id);
    expect(child.extensions["nodefabric.binding_decision"]).toEqual({ subtask_id: "pick-1", chosen_node_type_ref: ECHO, candidate_set_id: out.candidate_set_id });
    const mapped = (await events(run.run_id)).find((e) => e.type === "subtask_mapped");
    expect(mapped.data).toMatchObject({ subtask_id: "pick-1", candidate_set_id: out.candidate_set_id, chosen_node_type_ref: ECHO });
  });

  it("fails a composite whose outputs break its output_schema with invalid_outputs", async () => {
    const run = await runToEnd(ref("fixture.wrong-shape"), {});
    expect(run.state).toBe("failed");
    expect(run.extensions["nodefabric.error"]).toMatchObject({ code: "invalid_outputs" });
    expect(run.extensions["nodefabric.outputs"]).toBeUndefined();
    const root = (await nodeRuns(run.run_id)).find((n) => n.node_run_id === run.root_node_run_id)!;
    expect(root.state).toBe("failed");
    expect(root.outputs).toBeUndefined();
  });

  it("fails a composite whose inputs break its input_schema with invalid_inputs, creating no child", async () => {
    const run = await runToEnd(ref("fixture.parallel"), { items: "not a list" });
    expect(run.state).toBe("failed");
    expect(run.extensions["nodefabric.error"]).toMatchObject({ code: "invalid_inputs", details: { errors: [{ path: "/items" }] } });
    expect(await nodeRuns(run.run_id)).toHaveLength(1);
  });

  it("runs the first-party examples: a fan-out, and a pick-and-run bound to Selection's candidate set", async () => {
    const fan = await runToEnd(ref("examples.fanout"), { items: ["x", "y", "z"] });
    expect(fan.state).toBe("completed");
    expect(fan.extensions["nodefabric.outputs"]).toEqual({ results: ["x", "y", "z"] });
    expect((await nodeRuns(fan.run_id)).filter((n) => n.parent_node_run_id === fan.root_node_run_id)).toHaveLength(3);

    const picked = await runToEnd(ref("examples.pick-and-run"), { goal: "echo the inputs back", inputs: { hello: "world" }, allowed_node_type_ids: ["demo.echo"] });
    expect(picked.state, JSON.stringify(picked.extensions)).toBe("completed");
    expect(picked.extensions["nodefabric.outputs"]).toMatchObject({ chosen: ECHO, outputs: { echo: { hello: "world" } } });
    const child = (await nodeRuns(picked.run_id)).find((n) => n.parent_node_run_id === picked.root_node_run_id)!;
    expect(child.extensions["nodefabric.candidate_set_id"]).toBe(picked.extensions["nodefabric.outputs"].candidate_set_id);

    const none = await runToEnd(ref("examples.pick-and-run"), { goal: "zzqx nothing matches this", allowed_node_type_ids: [] });
    expect(none.state).toBe("failed");
    expect(none.extensions["nodefabric.error"].code).toBe("no_candidate");
  });

  it("runs a declarative plan published at run time, and fails a composite type with neither code nor plan", async () => {
    const registry = fabric.urls["node-registry"]!;
    const plan = JSON.parse(readFileSync(path.join(repo, "handlers/examples/node-types/plan-greet.json"), "utf8"));
    const published = await call("POST", `${registry}/v1/node-types`, { node_type: plan });
    expect(published.status, JSON.stringify(published.body)).toBe(200);
    const run = await runToEnd({ node_type_id: plan.node_type_id, version: plan.version }, { names: ["Ada", "Linus"], greeting: "Hello" });
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    expect(run.extensions["nodefabric.outputs"]).toEqual({ greetings: ["Hello, Ada!", "Hello, Linus!"], count: 2 });
    const all = await nodeRuns(run.run_id);
    expect(all.filter((n) => n.parent_node_run_id === run.root_node_run_id).length).toBeGreaterThanOrEqual(2);

    const codeless = { node_type_id: "test.codeless", version: "1.0.0", kind: "composite", description: "A composite nobody implements" };
    expect((await call("POST", `${registry}/v1/node-types`, { node_type: codeless })).status).toBe(200);
    const failed = await runToEnd(ref("test.codeless"), {});
    expect(failed.state).toBe("failed");
    expect(failed.extensions["nodefabric.error"].code).toBe("unknown_node_type");
  });
});
