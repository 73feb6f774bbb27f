import { describe, it, expect, afterAll } from "vitest";
import { existsSync, mkdtempSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import { buildRunCoordinator, loadConfig, startFabric, type RunningFabric } from "@nodefabric/core";
import { CLI, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually, readNdjson } from "../run-client.js";

// Composite replay: the composite executor runs as its own process (`fabric start composite-executor`) and is killed
// with SIGKILL in the middle of a 50-child composite. Started again on the same address, it gets the composite's
// `:begin` again from the coordinator, replays it from the start, and finishes it without running any child twice.
const repo = fileURLToPath(new URL("../..", import.meta.url));
const fixtures = path.join(repo, "test/fixtures/composite-handlers");
const WAVES = { node_type_id: "fixture.waves", version: "1.0.0" };
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

describe("composite replay after the composite executor is killed", () => {
  let fabric: RunningFabric | undefined;
  let coordinator: FastifyInstance | undefined;
  const procs: FabricProcess[] = [];
  afterAll(async () => {
    for (const p of procs) await p.stop("SIGKILL");
    await coordinator?.close();
    await fabric?.close();
  });

  it("finishes a 50-child composite whose executor died mid-way, each child run exactly once", async () => {
    expect(existsSync(CLI), "core must be built (npm run build) for the fabric CLI").toBe(true);
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-replay-"));
    fabric = await startFabric(
      loadConfig({ cwd: repo, env: {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"] } as never }),
      ["node-registry", "selection", "atomic-executor"],
    );
    const registry = fabric.urls["node-registry"]!;
    const port = await freePort();
    const compositeUrl = `http://127.0.0.1:${port}`;
    // A coordinator of its own, so a composite that makes no progress for 2 s gets its `:begin` again.
    coordinator = await buildRunCoordinator({
      logger: false,
      dbPath: path.join(dataDir, "run-coordinator.db"),
      registryUrl: registry,
      atomicExecutorUrl: fabric.urls["atomic-executor"],
      compositeExecutorUrl: compositeUrl,
      selectionUrl: fabric.urls.selection,
      compositeLeaseMs: 2000,
      tickMs: 50,
    });
    await coordinator.listen({ host: "127.0.0.1", port: 0 });
    const coord = `http://127.0.0.1:${(coordinator.server.address() as net.AddressInfo).port}`;

    // The composite executor listens on `port` (port-base + 3 is its slot), and finds the others through --url.
    const args = [
      "start",
      "composite-executor",
      "--auth",
      "disabled",
      "--port-base",
      String(port - 3),
      "--data-dir",
      dataDir,
      "--handlers",
      fixtures,
      "--url",
      `node-registry=${registry}`,
      `run-coordinator=${coord}`,
      `selection=${fabric.urls.selection}`,
    ];
    const startExecutor = async () => {
      const p = await startFabricProcess(args, { cwd: repo, expect: 1 });
      procs.push(p);
      expect(p.urls["composite-executor"]).toBe(compositeUrl);
      return p;
    };
    const first = await startExecutor();
    await eventually(async () => ((await call("GET", `${registry}/v1/executors?node_type_id=fixture.waves`)).body.length > 0 ? true : undefined), 15_000, "registration");

    // 10 waves of 5 parallel 200 ms sleeps: about 2 s when nothing goes wrong.
    const started = await call("POST", `${coord}/v1/runs`, { root_node_type_ref: WAVES, input: { waves: 10, width: 5, ms: 200 } });
    expect(started.status).toBe(200);
    const runId = started.body.run_id as string;
    const children = async (): Promise<Json[]> => (await call("GET", `${coord}/v1/runs/${runId}/node-runs`)).body.filter((n: Json) => n.parent_node_run_id);
    const doneBeforeKill = await eventually(async () => {
      const done = (await children()).filter((c) => c.state === "completed").length;
      return done >= 15 ? done : undefined;
    }, 15_000, "three waves done");
    first.child.kill("SIGKILL");
    expect(await first.stop()).toBeNull();
    expect(doneBeforeKill).toBeLessThan(50);

    // However long the new process takes to come up, the coordinator keeps offering the composite's `:begin` to it
    // (within coordinator.executor_wait_ms, 5 minutes by default) instead of failing it executor_unavailable.
    const second = await startExecutor();
    const run = await eventually(async () => {
      const r = await call("GET", `${coord}/v1/runs/${runId}`);
      return ["completed", "failed", "canceled"].includes(r.body.state) ? r.body : undefined;
    }, 60_000, "the run's end");
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    expect(run.extensions["nodefabric.outputs"]).toEqual({ values: Array.from({ length: 50 }, (_, i) => i) });

    // Exactly one NodeRun per call: 50 keys, each used once, each child completed once.
    const all = await children();
    expect(all).toHaveLength(50);
    const perKey = new Map<string, number>();
    for (const c of all) perKey.set(c.extensions["nodefabric.idempotency_key"], (perKey.get(c.extensions["nodefabric.idempotency_key"]) ?? 0) + 1);
    expect([...perKey.keys()].sort()).toEqual(Array.from({ length: 50 }, (_, i) => `${run.root_node_run_id}:${i}`).sort());
    expect([...perKey.values()].every((n) => n === 1)).toBe(true);
    expect(all.every((c) => c.state === "completed" && c.extensions["nodefabric.attempt"] === 1)).toBe(true);
    // And each ran once: one execution per child.
    const events = (await readNdjson(`${coord}/v1/runs/${runId}/events?follow=false`)).lines;
    const executed = events.filter((e) => e.type === "atomic_executed").map((e) => e.node_run_id);
    expect(executed.sort()).toEqual(all.map((c) => c.node_run_id).sort());

    // The restarted executor is the one that finished it.
    const health = await call("GET", `${second.urls["composite-executor"]}/v1/health`);
    expect(health.body.checks.find((c: Json) => c.name === "driving").details).toEqual({ count: 0, ended: 1 });
  }, 150_000);
});
