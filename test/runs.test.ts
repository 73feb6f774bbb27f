import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer, type Server } from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { validatorFor } from "@nodefabric/schemas";
import { loadConfig, startFabric, type RunningFabric } from "@nodefabric/core";
import { call, eventually, followNdjson, readNdjson } from "./run-client.js";

const repo = fileURLToPath(new URL("..", import.meta.url));
const fixtures = path.join(repo, "test/fixtures/run-handlers");
const isRun = validatorFor("run");
const isNodeRun = validatorFor("node_run");
const isEvent = validatorFor("run_event");
const isEnvelope = validatorFor("error_envelope");

const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };
const SLEEP = { node_type_id: "demo.sleep", version: "1.0.0" };
const FAIL = { node_type_id: "demo.fail", version: "1.0.0" };

async function fabricWith(extra: Record<string, unknown> = {}): Promise<RunningFabric> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-runs-"));
  const config = loadConfig({
    cwd: repo,
    env: {},
    flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo", fixtures], ...extra } as never,
  });
  const fabric = await startFabric(config);
  // The executor registers its node types with the registry shortly after it listens.
  await eventually(async () => {
    const r = await call("GET", `${fabric.urls["node-registry"]}/v1/executors?node_type_id=fixture.flaky`);
    return r.status === 200 && r.body.length > 0 ? true : undefined;
  }, 15_000, "executor registration");
  return fabric;
}

function expectGapless(events: Array<{ seq: number }>) {
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
}

describe("runs through the gateway", () => {
  let fabric: RunningFabric;
  let gw: string;

  beforeAll(async () => {
    fabric = await fabricWith();
    gw = fabric.urls["run-gateway"]!;
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  it("completes a run and carries its outputs; Prefer: wait answers once it ended", async () => {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: ECHO, input: { city: "Oslo" } }, { prefer: "wait=10" });
    expect(r.status).toBe(200);
    expect(r.headers["preference-applied"]).toBe("wait=10");
    expect(r.body.state).toBe("completed");
    expect(r.body.extensions["nodefabric.outputs"]).toEqual({ echo: { city: "Oslo" } });
    expect(r.body.ended_at).toBeTypeOf("string");
    expect(isRun(r.body)).toBe(true);

    const root = await call("GET", `${gw}/v1/node-runs/${r.body.root_node_run_id}`);
    expect(root.status).toBe(200);
    expect(root.body).toMatchObject({ state: "completed", kind: "atomic", outputs: { echo: { city: "Oslo" } }, node_type_ref: ECHO });
    expect(isNodeRun(root.body)).toBe(true);

    const ev = await readNdjson(`${gw}/v1/runs/${r.body.run_id}/events`);
    expect(ev.status).toBe(200);
    expect(ev.contentType).toMatch(/^application\/x-ndjson/);
    expect(ev.lines.map((e) => e.type)).toEqual([
      "run_started",
      "node_run_created",
      "policy_decided",
      "policy_decided",
      "node_run_assigned",
      "node_run_started",
      "atomic_executed",
      "node_run_completed",
      "run_completed",
    ]);
    expectGapless(ev.lines);
    for (const e of ev.lines) expect(isEvent(e), JSON.stringify(e)).toBe(true);
    expect(ev.lines.at(-1).data).toEqual({ state: "completed" });
  });

  it("answers a run at once without Prefer, queued or running, and it completes later", async () => {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: ECHO, input: {} });
    expect(r.status).toBe(200);
    expect(["queued", "running"]).toContain(r.body.state);
    expect(r.headers["preference-applied"]).toBeUndefined();
    const done = await eventually(async () => {
      const g = await call("GET", `${gw}/v1/runs/${r.body.run_id}`);
      return g.body.state === "completed" ? g.body : undefined;
    });
    expect(done.extensions["nodefabric.outputs"]).toEqual({ echo: {} });
  });

  it("fails a run with the handler's error", async () => {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: FAIL, input: { code: "quota_exhausted", message: "no quota left" } }, { prefer: "wait=10" });
    expect(r.body.state).toBe("failed");
    expect(r.body.extensions["nodefabric.error"]).toMatchObject({ code: "quota_exhausted", message: "no quota left" });
    const nr = await call("GET", `${gw}/v1/node-runs/${r.body.root_node_run_id}`);
    expect(nr.body.state).toBe("failed");
    expect(nr.body.extensions["nodefabric.error"].code).toBe("quota_exhausted");
  });

  it("retries a retryable failure and succeeds on a later attempt", async () => {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: { node_type_id: "fixture.flaky", version: "1.0.0" }, input: {} }, { prefer: "wait=10" });
    expect(r.body.state).toBe("completed");
    expect(r.body.extensions["nodefabric.outputs"]).toEqual({ attempt: 3 });
    const ev = await readNdjson(`${gw}/v1/runs/${r.body.run_id}/events`);
    const retrying = ev.lines.filter((e) => e.type === "node_run_retrying");
    expect(retrying.map((e) => e.data.attempt)).toEqual([2, 3]);
    expect(retrying[0].data.error.code).toBe("upstream_error");
    expect(ev.lines.filter((e) => e.type === "atomic_executed").map((e) => e.data.state)).toEqual(["failed", "failed", "completed"]);
    expectGapless(ev.lines);
    const nr = await call("GET", `${gw}/v1/node-runs/${r.body.root_node_run_id}`);
    expect(nr.body.extensions["nodefabric.attempt"]).toBe(3);
  });

  it("gives up after the retry policy's attempts", async () => {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: FAIL, input: { retryable: true, code: "upstream_error" } }, { prefer: "wait=20" });
    expect(r.body.state).toBe("failed");
    const ev = await readNdjson(`${gw}/v1/runs/${r.body.run_id}/events`);
    expect(ev.lines.filter((e) => e.type === "atomic_executed")).toHaveLength(3);
    expect(ev.lines.filter((e) => e.type === "node_run_retrying")).toHaveLength(2);
  });

  it("fails a NodeRun that outlives its timeout with timeout", async () => {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: { node_type_id: "fixture.slow", version: "1.0.0" }, input: {} }, { prefer: "wait=10" });
    expect(r.body.state).toBe("failed");
    expect(r.body.extensions["nodefabric.error"]).toMatchObject({ code: "timeout", retryable: true });
  });

  it("cancels a run during a sleep: the handler's AbortSignal fires", async () => {
    let notified: (v: unknown) => void = () => undefined;
    const aborted = new Promise((resolve) => (notified = resolve));
    const observer: Server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        notified(JSON.parse(body));
        res.end("{}");
      });
    });
    await new Promise<void>((resolve) => observer.listen(0, "127.0.0.1", resolve));
    const port = (observer.address() as { port: number }).port;
    try {
      const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: { node_type_id: "fixture.abortable", version: "1.0.0" }, input: { notify_url: `http://127.0.0.1:${port}/aborted` } });
      await eventually(async () => {
        const nr = await call("GET", `${gw}/v1/node-runs/${r.body.root_node_run_id}`);
        return nr.body.state === "running" ? true : undefined;
      });
      const c = await call("POST", `${gw}/v1/runs/${r.body.run_id}:cancel`);
      expect(c.status).toBe(200);
      expect(c.body.state).toBe("canceled");
      expect(c.body.extensions["nodefabric.error"].code).toBe("canceled");
      expect(await aborted).toEqual({ node_run_id: r.body.root_node_run_id, aborted: true });
      const nr = await call("GET", `${gw}/v1/node-runs/${r.body.root_node_run_id}`);
      expect(nr.body.state).toBe("canceled");
      // Cancel is idempotent: an ended run comes back unchanged.
      const again = await call("POST", `${gw}/v1/runs/${r.body.run_id}:cancel`);
      expect(again.status).toBe(200);
      expect(again.body).toEqual(c.body);
      const ev = await readNdjson(`${gw}/v1/runs/${r.body.run_id}/events`);
      expect(ev.lines.at(-1)).toMatchObject({ type: "run_completed", data: { state: "canceled" } });
      expect(ev.lines.filter((e) => e.type === "run_completed")).toHaveLength(1);
      expectGapless(ev.lines);
    } finally {
      observer.close();
    }
  });

  it("treats a client run_id as an idempotency key", async () => {
    const body = { run_id: `order-${Date.now()}`, root_node_type_ref: ECHO, input: { n: 1 } };
    const first = await call("POST", `${gw}/v1/runs`, body, { prefer: "wait=10" });
    expect(first.body.run_id).toBe(body.run_id);
    const again = await call("POST", `${gw}/v1/runs`, body);
    expect(again.status).toBe(200);
    expect(again.body.run_id).toBe(body.run_id);
    expect(again.body.root_node_run_id).toBe(first.body.root_node_run_id);
    const clash = await call("POST", `${gw}/v1/runs`, { ...body, input: { n: 2 } });
    expect(clash.status).toBe(409);
    expect(clash.body.error.code).toBe("run_already_exists");
    expect(isEnvelope(clash.body)).toBe(true);
    const bad = await call("POST", `${gw}/v1/runs`, { ...body, run_id: "has spaces/and slashes" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_request");
  });

  it("answers unknown ids with 404s and finished NodeRuns with 409", async () => {
    for (const [path, code] of [
      ["/v1/runs/run_nope", "run_not_found"],
      ["/v1/runs/run_nope/node-runs", "run_not_found"],
      ["/v1/runs/run_nope/events", "run_not_found"],
      ["/v1/node-runs/nr_nope", "node_run_not_found"],
    ] as const) {
      const r = await call("GET", `${gw}${path}`);
      expect(r.status, path).toBe(404);
      expect(r.body.error.code, path).toBe(code);
    }
    expect((await call("POST", `${gw}/v1/runs/run_nope:cancel`)).body.error.code).toBe("run_not_found");
    expect((await call("POST", `${gw}/v1/approvals/apr_nope:approve`)).body.error.code).toBe("approval_not_found");
    const unknownType = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: { node_type_id: "no.such", version: "1.0.0" }, input: {} });
    expect(unknownType.status).toBe(404);
    expect(unknownType.body.error.code).toBe("node_type_not_found");

    const coordinator = fabric.urls["run-coordinator"];
    const done = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: ECHO, input: {} }, { prefer: "wait=10" });
    const complete = await call("POST", `${coordinator}/v1/node-runs/${done.body.root_node_run_id}:complete`, { state: "failed" });
    expect(complete.status).toBe(409);
    expect(complete.body.error.code).toBe("node_run_terminal");
    const after = await call("GET", `${gw}/v1/runs/${done.body.run_id}`);
    expect(after.body.state).toBe("completed");
    const orphan = await call("POST", `${coordinator}/v1/node-runs`, {
      run_id: done.body.run_id,
      parent_node_run_id: done.body.root_node_run_id,
      node_runs: [{ node_type_ref: ECHO, inputs: {} }],
    });
    expect(orphan.status).toBe(409);
    expect(orphan.body.error.code).toBe("parent_node_run_invalid");
  });

  it("records an evaluation of a NodeRun in flight, and refuses one after the run ended", async () => {
    const coordinator = fabric.urls["run-coordinator"];
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms: 400 } });
    const nrId = r.body.root_node_run_id;
    const report = {
      evaluation_result: { status: "success", reason_code: "looks_right", confidence: 0.9 },
      recovery_action: { type: "retry", target_node_run_id: nrId, message: "just noting" },
    };
    const ok = await call("POST", `${coordinator}/v1/node-runs/${nrId}:evaluation`, report);
    expect(ok.status).toBe(204);
    const nr = await call("GET", `${gw}/v1/node-runs/${nrId}`);
    expect(nr.body.evaluation_result).toEqual(report.evaluation_result);
    expect(nr.body.recovery_actions).toEqual([report.recovery_action]);
    const done = await eventually(async () => {
      const g = await call("GET", `${gw}/v1/runs/${r.body.run_id}`);
      return g.body.state === "completed" ? g.body : undefined;
    });
    const ev = await readNdjson(`${gw}/v1/runs/${done.run_id}/events`);
    expect(ev.lines.find((e) => e.type === "node_evaluated").data.evaluation_result.status).toBe("success");
    expect(ev.lines.find((e) => e.type === "recovery_applied").data.recovery_action.type).toBe("retry");
    const late = await call("POST", `${coordinator}/v1/node-runs/${nrId}:evaluation`, report);
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe("node_run_terminal");
    const bad = await call("POST", `${coordinator}/v1/node-runs/${nrId}:evaluation`, { evaluation_result: { status: "great" } });
    expect(bad.status).toBe(400);
    expect((await call("POST", `${coordinator}/v1/node-runs/nr_nope:evaluation`, report)).body.error.code).toBe("node_run_not_found");
  });

  it("follows a run's events live, and resumes a stream after a seq", async () => {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms: 400 } });
    let sawStartedBeforeEnd = false;
    const live = await followNdjson(`${gw}/v1/runs/${r.body.run_id}/events`, (e) => {
      if (e.type === "node_run_started") {
        sawStartedBeforeEnd = true;
      }
    });
    expect(sawStartedBeforeEnd).toBe(true);
    expect(live.at(-1).type).toBe("run_completed");
    expectGapless(live);
    const resumed = await readNdjson(`${gw}/v1/runs/${r.body.run_id}/events?after_seq=4`);
    expect(resumed.lines.map((e) => e.seq)).toEqual(live.filter((e) => e.seq > 4).map((e) => e.seq));
    const snapshot = await readNdjson(`${gw}/v1/runs/${r.body.run_id}/events?follow=false`);
    expect(snapshot.lines).toEqual(live);
    const ends = await readNdjson(`${gw}/v1/runs/${r.body.run_id}/events?types=node_run_completed,run_completed`);
    expect(ends.lines).toEqual(live.filter((e) => e.type === "node_run_completed" || e.type === "run_completed"));
    expect((await call("GET", `${gw}/v1/runs/${r.body.run_id}/events?types=Not-A-Type`)).status).toBe(400);
    const nodeStream = await readNdjson(`${fabric.urls["run-coordinator"]}/v1/node-runs/${r.body.root_node_run_id}/events`);
    expect(nodeStream.lines.every((e) => e.node_run_id === r.body.root_node_run_id)).toBe(true);
    expect(nodeStream.lines.at(-1).type).toBe("node_run_completed");
  });

  it("serves many followers of one run from memory", async () => {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms: 300 } });
    const streams = await Promise.all(Array.from({ length: 25 }, () => readNdjson(`${fabric.urls["run-coordinator"]}/v1/runs/${r.body.run_id}/events`)));
    for (const s of streams) expect(s.lines).toEqual(streams[0].lines);
    expect(streams[0].lines.at(-1).type).toBe("run_completed");
  });

  it("fails a run that exceeds max_wall_time_ms with budget_exceeded", async () => {
    const r = await call(
      "POST",
      `${gw}/v1/runs`,
      { root_node_type_ref: SLEEP, input: { ms: 5000 }, constraints: { budgets: { max_wall_time_ms: 300 } } },
      { prefer: "wait=10" },
    );
    expect(r.body.state).toBe("failed");
    expect(r.body.extensions["nodefabric.error"].code).toBe("budget_exceeded");
  });

  it("lists runs newest first, a page at a time", async () => {
    const first = await call("GET", `${gw}/v1/runs?limit=2`);
    expect(first.status).toBe(200);
    expect(first.body).toHaveLength(2);
    const token = first.headers["x-next-page-token"] as string;
    expect(token).toBeTruthy();
    const second = await call("GET", `${gw}/v1/runs?limit=2&page_token=${token}`);
    expect(second.body[0].run_id < first.body[1].run_id || second.body[0].run_id !== first.body[1].run_id).toBe(true);
    expect(second.body.map((r: { run_id: string }) => r.run_id)).not.toContain(first.body[0].run_id);
    const failed = await call("GET", `${gw}/v1/runs?state=failed`);
    expect(failed.body.length).toBeGreaterThan(0);
    expect(failed.body.every((r: { state: string }) => r.state === "failed")).toBe(true);
    expect((await call("GET", `${gw}/v1/runs?limit=0`)).status).toBe(400);
  });

  // Last in this block: it leaves a dead entry in the directory for demo.echo.
  it("passes over an executor whose directory entry outlived it", async () => {
    const registry = fabric.urls["node-registry"];
    const gone = await call("PUT", `${registry}/v1/executors/gone-executor`, { endpoint: "http://127.0.0.1:9", kind: "atomic", node_types: [ECHO] });
    expect(gone.status).toBe(200);
    await new Promise((r) => setTimeout(r, 2_200)); // the coordinator's directory cache lives 2 s
    const runs = await Promise.all(Array.from({ length: 6 }, (_, i) => call("POST", `${gw}/v1/runs`, { root_node_type_ref: ECHO, input: { i } }, { prefer: "wait=20" })));
    for (const r of runs) expect(r.body.state).toBe("completed");
    // Once the dead endpoint failed it is passed over: a run sent there retries once, on the live executor.
    for (const r of runs) {
      const ev = await readNdjson(`${gw}/v1/runs/${r.body.run_id}/events`);
      const retrying = ev.lines.filter((e) => e.type === "node_run_retrying");
      expect(retrying.length).toBeLessThanOrEqual(1);
      for (const e of retrying) expect(e.data.error.code).toBe("executor_unavailable");
    }
    const later = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: ECHO, input: { later: true } }, { prefer: "wait=20" });
    const ev = await readNdjson(`${gw}/v1/runs/${later.body.run_id}/events`);
    expect(ev.lines.filter((e) => e.type === "node_run_retrying")).toHaveLength(0);
  });
});

describe("policy checkpoints", () => {
  let fabric: RunningFabric;
  let gw: string;

  beforeAll(async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "nf-policy-"));
    const policy = path.join(dir, "policy.cedar");
    writeFileSync(
      policy,
      [
        '@id("allow-the-rest") permit(principal, action, resource);',
        '@id("no-fail-runs") forbid(principal, action == NodeFabric::Action::"run.start", resource == NodeFabric::NodeType::"demo.fail");',
        '@id("no-upstream") forbid(principal, action == NodeFabric::Action::"node.run.execute", resource == NodeFabric::NodeType::"demo.upstream");',
        '@id("sleep-needs-approval") @require_approval("true") permit(principal, action == NodeFabric::Action::"node.run.execute", resource == NodeFabric::NodeType::"demo.sleep");',
      ].join("\n"),
    );
    fabric = await fabricWith({ policy });
    gw = fabric.urls["run-gateway"]!;
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  it("denies at run.start: the run fails with policy_denied", async () => {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: FAIL, input: {} }, { prefer: "wait=5" });
    expect(r.status).toBe(200);
    expect(r.body.state).toBe("failed");
    expect(r.body.extensions["nodefabric.error"]).toMatchObject({ code: "policy_denied" });
    const ev = await readNdjson(`${gw}/v1/runs/${r.body.run_id}/events`);
    const decided = ev.lines.find((e) => e.type === "policy_decided");
    expect(decided.data).toMatchObject({ action: "run.start", decision: "deny", reason_code: "denied_by:no-fail-runs" });
  });

  it("denies at node.run.execute: the NodeRun fails with policy_denied and never runs", async () => {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: { node_type_id: "demo.upstream", version: "1.0.0" }, input: { url: "http://127.0.0.1:9/x" } }, { prefer: "wait=5" });
    expect(r.body.state).toBe("failed");
    expect(r.body.extensions["nodefabric.error"].code).toBe("policy_denied");
    const ev = await readNdjson(`${gw}/v1/runs/${r.body.run_id}/events`);
    expect(ev.lines.some((e) => e.type === "atomic_executed")).toBe(false);
  });

  async function waitingApproval(): Promise<{ runId: string; approvalId: string }> {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms: 1 } });
    const requested = await eventually(async () => {
      const ev = await readNdjson(`${gw}/v1/runs/${r.body.run_id}/events?follow=false`);
      return ev.lines.find((e) => e.type === "approval_requested");
    });
    const nr = await call("GET", `${gw}/v1/node-runs/${r.body.root_node_run_id}`);
    expect(nr.body.state).toBe("queued");
    return { runId: r.body.run_id, approvalId: requested.data.approval_id };
  }

  it("parks a NodeRun that needs approval until it is approved", async () => {
    const { runId, approvalId } = await waitingApproval();
    const a = await call("POST", `${gw}/v1/approvals/${approvalId}:approve`);
    expect(a.status).toBe(204);
    const done = await eventually(async () => {
      const g = await call("GET", `${gw}/v1/runs/${runId}`);
      return g.body.state === "completed" ? g.body : undefined;
    });
    expect(done.extensions["nodefabric.outputs"]).toMatchObject({ slept_ms: 1 });
    const ev = await readNdjson(`${gw}/v1/runs/${runId}/events`);
    expect(ev.lines.find((e) => e.type === "approval_resolved").data).toMatchObject({ approval_id: approvalId, decision: "approved" });
    expect((await call("POST", `${gw}/v1/approvals/${approvalId}:approve`)).status).toBe(204);
    const contrary = await call("POST", `${gw}/v1/approvals/${approvalId}:reject`);
    expect(contrary.status).toBe(409);
  });

  it("fails a NodeRun whose approval is rejected", async () => {
    const { runId, approvalId } = await waitingApproval();
    expect((await call("POST", `${gw}/v1/approvals/${approvalId}:reject`)).status).toBe(204);
    const done = await eventually(async () => {
      const g = await call("GET", `${gw}/v1/runs/${runId}`);
      return g.body.state === "failed" ? g.body : undefined;
    });
    expect(done.extensions["nodefabric.error"].code).toBe("approval_rejected");
  });
});
