/**
 * How long a NodeRun waits for an executor it cannot reach (docs/upstream-failures.md, "An executor that cannot be
 * reached"), across real services on loopback (SQLite files): a registry, an atomic executor that is closed and
 * started again on the same address, and coordinators with a small `executorWaitMs` (coordinator.executor_wait_ms),
 * so the test runs in seconds. The executor down for longer than the node type's three attempts used to last, but
 * within the bound: the run completes once it is back. Down past the bound: the NodeRun fails executor_unavailable
 * with a message naming the bound. Nothing waits on a fixed time: each step waits for what the run's events say.
 */
import { describe, it, expect, afterAll } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { buildAtomicExecutor, buildNodeRegistry, buildRunCoordinator, ConfigError, handlersFromDefinitions, loadConfig, startFabric } from "@nodefabric/core";
import { defineAtomic } from "@nodefabric/core/sdk";
import { call, eventually, readNdjson } from "./run-client.js";

const REF = { node_type_id: "wait.echo", version: "1.0.0" };
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const echo = defineAtomic<{ i?: number }>({
  nodeType: {
    ...REF,
    description: "Answers its input (the node type's default retry policy: 3 attempts)",
    input_schema: { type: "object", properties: { i: { type: "integer" } } },
    output_schema: { type: "object", properties: { i: { type: "integer" } } },
  },
  async handler(inputs) {
    return { i: inputs.i ?? 0 };
  },
});

describe("a NodeRun waits for an executor it cannot reach, within coordinator.executor_wait_ms", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "nf-executor-wait-"));
  const open: FastifyInstance[] = [];
  afterAll(async () => {
    for (const app of open.reverse()) await app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function listen(app: FastifyInstance, port = 0): Promise<string> {
    open.push(app);
    await app.listen({ host: "127.0.0.1", port });
    return `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  }
  async function close(app: FastifyInstance): Promise<void> {
    open.splice(open.indexOf(app), 1);
    await app.close();
  }
  const startExecutor = async (registryUrl: string, port = 0) => {
    const app = await buildAtomicExecutor({ logger: false, handlers: handlersFromDefinitions([echo]), registryUrl, executorInstanceId: "ae-wait" });
    return { app, url: await listen(app, port) };
  };
  const events = async (coordinator: string, runId: string): Promise<Json[]> => (await readNdjson(`${coordinator}/v1/runs/${runId}/events?follow=false`)).lines;
  const retries = async (coordinator: string, runId: string) => (await events(coordinator, runId)).filter((e) => e.type === "node_run_retrying");
  const ended = (coordinator: string, runId: string, within: number) =>
    eventually(async () => {
      const r = await call("GET", `${coordinator}/v1/runs/${runId}`);
      return ["completed", "failed", "canceled"].includes(r.body.state) ? (r.body as Json) : undefined;
    }, within, "the run's end");

  async function setUp(name: string, executorWaitMs: number) {
    const registryUrl = await listen(await buildNodeRegistry({ logger: false, dbPath: path.join(dir, `${name}-registry.db`) }));
    const executor = await startExecutor(registryUrl);
    const coordinator = await listen(await buildRunCoordinator({ logger: false, dbPath: path.join(dir, `${name}-runs.db`), registryUrl, tickMs: 20, executorWaitMs }));
    // The executor is up: a first run completes at once, with no retry.
    const first = await call("POST", `${coordinator}/v1/runs`, { root_node_type_ref: REF, input: { i: 1 } }, { prefer: "wait=30" });
    expect(first.body.state, JSON.stringify(first.body)).toBe("completed");
    expect(await retries(coordinator, first.body.run_id)).toHaveLength(0);
    return { registryUrl, executor, coordinator };
  }

  it("completes a run whose executor was down longer than the node type's attempts last, once it is back", async () => {
    // A bound far beyond what the test needs: the run must not fail while the executor is down.
    const { registryUrl, executor, coordinator } = await setUp("back", 120_000);
    const port = Number(new URL(executor.url).port);
    await close(executor.app);

    const started = await call("POST", `${coordinator}/v1/runs`, { root_node_type_ref: REF, input: { i: 2 } });
    expect(started.status).toBe(200);
    const runId = started.body.run_id as string;
    // Four failed tries: more than the three attempts of the node type's retry policy, which used to end it.
    await eventually(async () => ((await retries(coordinator, runId)).length >= 4 ? true : undefined), 30_000, "four tries of the closed executor");
    expect((await call("GET", `${coordinator}/v1/runs/${runId}`)).body.state).toBe("running");

    await startExecutor(registryUrl, port);
    const run = await ended(coordinator, runId, 30_000);
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    expect(run.extensions["nodefabric.outputs"]).toEqual({ i: 2 });
    const retried = await retries(coordinator, runId);
    expect(retried.length).toBeGreaterThanOrEqual(4);
    for (const e of retried) expect(e.data.error.code).toBe("executor_unavailable");
    // The pauses grow: each is at least the one before it.
    const pauses = retried.map((e) => e.data.delay_ms as number);
    for (let i = 1; i < pauses.length; i++) expect(pauses[i]).toBeGreaterThanOrEqual(pauses[i - 1]!);
    expect(pauses[0]).toBeGreaterThan(0);
    // One execution reached the handler, and it completed.
    const executed = (await events(coordinator, runId)).filter((e) => e.type === "atomic_executed" && e.data.state === "completed");
    expect(executed).toHaveLength(1);
  }, 60_000);

  it("fails the NodeRun executor_unavailable once it has waited past the bound, naming the bound", async () => {
    const bound = 1_500;
    const { executor, coordinator } = await setUp("gone", bound);
    await close(executor.app);

    const startedAt = Date.now();
    const started = await call("POST", `${coordinator}/v1/runs`, { root_node_type_ref: REF, input: { i: 3 } });
    expect(started.status).toBe(200);
    const runId = started.body.run_id as string;
    const run = await ended(coordinator, runId, 30_000);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(bound);
    expect(run.state).toBe("failed");

    const nodeRuns = (await call("GET", `${coordinator}/v1/runs/${runId}/node-runs`)).body as Json[];
    expect(nodeRuns).toHaveLength(1);
    const error = nodeRuns[0]!.extensions["nodefabric.error"] as Json;
    expect(error.code).toBe("executor_unavailable");
    expect(error.message).toContain(`coordinator.executor_wait_ms (${bound} ms)`);
    expect(error.details.executor_wait_ms).toBe(bound);
    expect(error.details.waited_ms).toBeGreaterThanOrEqual(bound);
    expect(error.cause.code).toBe("executor_unavailable");
    // It was tried more often than the node type's three attempts, every time finding no executor.
    const retried = await retries(coordinator, runId);
    expect(retried.length).toBeGreaterThanOrEqual(3);
    for (const e of retried) expect(e.data.error.code).toBe("executor_unavailable");
    expect((await events(coordinator, runId)).filter((e) => e.type === "atomic_executed" && e.data.state === "completed")).toHaveLength(0);
  }, 60_000);

  it("reads coordinator.executor_wait_ms from the file and FABRIC_COORDINATOR_EXECUTOR_WAIT_MS, and a fabric's coordinator keeps to it", async () => {
    const cwd = mkdtempSync(path.join(dir, "config-"));
    expect(loadConfig({ cwd, env: {} }).coordinator?.executor_wait_ms).toBeUndefined();
    expect(loadConfig({ cwd, env: {}, flags: { coordinator: { executor_wait_ms: 60_000 } } as never }).coordinator).toEqual({ executor_wait_ms: 60_000 });
    const config = loadConfig({ cwd, env: { FABRIC_COORDINATOR_EXECUTOR_WAIT_MS: "800" }, flags: { port_base: 0, data_dir: path.join(cwd, "data"), log_level: "silent" } as never });
    expect(config.coordinator).toEqual({ executor_wait_ms: 800 });
    expect(() => loadConfig({ cwd, env: { FABRIC_COORDINATOR_EXECUTOR_WAIT_MS: "soon" } })).toThrow(ConfigError);
    expect(() => loadConfig({ cwd, env: { FABRIC_COORDINATOR_EXECUTOR_WAIT_MS: "-1" } })).toThrow(/executor_wait_ms/);

    // A fabric without its atomic executor: a run of a node type the registry knows waits 800 ms for one, then fails.
    const fabric = await startFabric(config, ["node-registry", "pdp", "run-coordinator"]);
    try {
      const nodeType = { ...REF, node_type_id: "wait.unserved", kind: "atomic", description: "nothing serves it", input_schema: { type: "object" }, output_schema: { type: "object" } };
      expect((await call("POST", `${fabric.urls["node-registry"]}/v1/node-types`, { node_type: nodeType })).status).toBe(200);
      const coordinator = fabric.urls["run-coordinator"]!;
      const started = await call("POST", `${coordinator}/v1/runs`, { root_node_type_ref: { node_type_id: "wait.unserved", version: "1.0.0" }, input: {} });
      expect(started.status).toBe(200);
      const run = await ended(coordinator, started.body.run_id, 30_000);
      expect(run.state).toBe("failed");
      const nodeRuns = (await call("GET", `${coordinator}/v1/runs/${run.run_id}/node-runs`)).body as Json[];
      const error = nodeRuns[0]!.extensions["nodefabric.error"] as Json;
      expect(error).toMatchObject({ code: "executor_unavailable", details: { executor_wait_ms: 800 } });
      expect(error.message).toContain("coordinator.executor_wait_ms (800 ms)");
      // The last failure: the fabric's own atomic-executor address, where nothing listens.
      expect(error.cause).toMatchObject({ code: "executor_unavailable", message: expect.stringContaining("cannot be reached") });
    } finally {
      await fabric.close();
    }
  }, 60_000);
});
