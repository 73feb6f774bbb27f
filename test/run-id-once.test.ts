/**
 * One run per run_id across gateways: two whole fabrics on one PostgreSQL schema (two coordinators, each behind its
 * own gateway), and the same start with a client-chosen run_id sent to both gateways at the same moment, as a client
 * retrying through a load balancer while its first try is still being served. Both answers name the same run and the
 * same root NodeRun, the run has one `run_started`, and it runs once; the same run_id with another request is a 409
 * on either gateway.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { loadConfig, startFabric, type RunningFabric } from "@nodefabric/core";
import { call, eventually, readNdjson } from "./run-client.js";
import { dropSchemas, newSchema, storeUrl } from "./e2e/pg-fabric.js";

const repo = fileURLToPath(new URL("..", import.meta.url));
const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };
const ROUNDS = 50;

describe("a client-chosen run_id started through two gateways of one database at once", () => {
  const fabrics: RunningFabric[] = [];
  const gateway = (i: number) => fabrics[i]!.urls["run-gateway"]!;

  beforeAll(async () => {
    const schema = newSchema("nf_once");
    for (let i = 0; i < 2; i++) {
      const config = loadConfig({
        cwd: repo,
        env: {},
        flags: {
          port_base: 0,
          data_dir: mkdtempSync(path.join(os.tmpdir(), `nf-once-${i}-`)),
          log_level: "silent",
          handlers: ["@nodefabric/handler-demo"],
          plugins: [path.join(repo, "plugins/postgres")],
          store: { url: storeUrl(schema) },
          auth: { mode: "disabled" },
        } as never,
      });
      fabrics.push(await startFabric(config));
    }
  }, 90_000);
  afterAll(async () => {
    for (const f of fabrics) await f.close();
    await dropSchemas();
  });

  it(`is one run with one root, started once, in ${ROUNDS} rounds of the same start sent to both gateways together`, async () => {
    const runIds: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const runId = `run_once_${randomUUID()}`;
      runIds.push(runId);
      const body = { run_id: runId, root_node_type_ref: ECHO, input: { message: `round ${round}` } };
      const [a, b] = await Promise.all([call("POST", `${gateway(0)}/v1/runs`, body), call("POST", `${gateway(1)}/v1/runs`, body)]);
      expect(a.status, JSON.stringify(a.body)).toBe(200);
      expect(b.status, JSON.stringify(b.body)).toBe(200);
      expect(a.body.run_id).toBe(runId);
      expect(b.body.run_id).toBe(runId);
      expect(b.body.root_node_run_id).toBe(a.body.root_node_run_id);
    }
    for (const runId of runIds) {
      const ended = await eventually(async () => {
        const r = await call("GET", `${gateway(runIds.indexOf(runId) % 2)}/v1/runs/${runId}`);
        return r.body.state === "completed" ? r.body : undefined;
      }, 30_000, `run ${runId} completed`);
      const { lines } = await readNdjson(`${gateway(0)}/v1/runs/${runId}/events`);
      const types = lines.map((e) => e.type);
      expect(types.filter((t) => t === "run_started"), runId).toHaveLength(1);
      expect(types.filter((t) => t === "run_completed"), runId).toHaveLength(1);
      expect(lines.map((e) => e.seq)).toEqual(lines.map((_, i) => i));
      const times = lines.map((e) => Date.parse(e.time));
      expect(times).toEqual([...times].sort((x, y) => x - y));
      // Only one root was ever created: every NodeRun event names the root the run names.
      const roots = new Set(lines.filter((e) => e.type === "node_run_created").map((e) => e.node_run_id));
      expect([...roots]).toEqual([ended.root_node_run_id]);
    }
  }, 120_000);

  it("answers 409 run_already_exists on either gateway for the same run_id with another request, and changes nothing", async () => {
    const runId = `run_once_${randomUUID()}`;
    const first = await call("POST", `${gateway(0)}/v1/runs`, { run_id: runId, root_node_type_ref: ECHO, input: { message: "first" } });
    expect(first.status).toBe(200);
    for (const i of [0, 1]) {
      const other = await call("POST", `${gateway(i)}/v1/runs`, { run_id: runId, root_node_type_ref: ECHO, input: { message: "other" } });
      expect(other.status).toBe(409);
      expect(other.body.error.code).toBe("run_already_exists");
    }
    const run = await eventually(async () => {
      const r = await call("GET", `${gateway(1)}/v1/runs/${runId}`);
      return r.body.state === "completed" ? r.body : undefined;
    }, 30_000, "the first run completed");
    expect(run.root_node_run_id).toBe(first.body.root_node_run_id);
    const root = await call("GET", `${gateway(1)}/v1/node-runs/${run.root_node_run_id}`);
    expect(root.body.inputs).toEqual({ message: "first" });
  }, 60_000);
});
