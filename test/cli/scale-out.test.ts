/**
 * Several coordinators on one PostgreSQL database, every service a process of its own: three coordinators behind
 * one gateway, two atomic and two composite executors serving the same node types. 500 runs go through the gateway;
 * midway one coordinator and one atomic executor die with SIGKILL. Every run must still end completed, with gapless
 * seqs, one run_completed each, and no handler run twice for one Idempotency-Key. Then: a coordinator stopped with
 * SIGSTOP past its lease writes nothing over the one that took its run; a follower on one coordinator sees live the
 * events another writes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { call, eventually, followNdjson, readNdjson } from "../run-client.js";
import { dropSchemas, executionLog, executionsIn, newSchema, pgQuery, startService, storeUrl, type ServiceProcess } from "../e2e/pg-fabric.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const handlers = path.join(repo, "test/fixtures/scale-handlers");
const WORK = { node_type_id: "scale.work", version: "1.0.0" };
const FAN = { node_type_id: "scale.fan", version: "1.0.0" };
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const TERMINAL = new Set(["completed", "failed", "canceled"]);

/** A fabric of separate processes on one schema. */
class Cluster {
  readonly procs: ServiceProcess[] = [];
  registry!: ServiceProcess;
  coordinators: ServiceProcess[] = [];
  atomic: ServiceProcess[] = [];
  composite: ServiceProcess[] = [];
  gateway?: ServiceProcess;
  readonly log = executionLog();
  readonly store: string;
  readonly config: string;

  constructor(
    readonly schema: string,
    coordinator: { run_lease_ms: number; composite_lease_ms: number },
  ) {
    this.store = storeUrl(schema);
    const dir = mkdtempSync(path.join(os.tmpdir(), "nf-scale-cfg-"));
    this.config = path.join(dir, "fabric.config.json");
    // Loopback only, so no tokens: auth across coordinators is covered by the forwarding tests.
    writeFileSync(this.config, JSON.stringify({ policy_checks: false, auth: { mode: "disabled" }, plugins: [path.join(repo, "plugins/postgres")], coordinator, store: { url: this.store } }));
  }

  private env(): NodeJS.ProcessEnv {
    // Executors drop out of the directory after 1.5 s without a heartbeat (they send one every third of that).
    return { NF_SCALE_LOG: this.log, FABRIC_REGISTRY_EXECUTOR_TTL_MS: "1500" };
  }

  private async start(service: string, args: string[] = [], logLevel?: string): Promise<ServiceProcess> {
    const urls = this.registry ? ["--url", `node-registry=${this.registry.url}`] : [];
    const p = await startService(service, ["-c", this.config, ...urls, ...args], { cwd: repo, env: this.env(), logLevel });
    this.procs.push(p);
    return p;
  }

  async up(counts: { coordinators: number; atomic: number; composite: number; gateway: boolean }, coordinatorLogLevel?: string): Promise<void> {
    this.registry = await this.start("node-registry");
    // Coordinators start at the same moment: the migrations they apply at start must not trip over each other.
    this.coordinators = await Promise.all(Array.from({ length: counts.coordinators }, () => this.start("run-coordinator", [], coordinatorLogLevel)));
    this.atomic = await Promise.all(Array.from({ length: counts.atomic }, () => this.start("atomic-executor", ["--handlers", handlers])));
    this.composite = await Promise.all(Array.from({ length: counts.composite }, () => this.start("composite-executor", ["--handlers", handlers])));
    if (counts.gateway) {
      const gw = await startService("run-gateway", ["-c", this.config], {
        cwd: repo,
        env: { ...this.env(), FABRIC_GATEWAY_COORDINATORS: this.coordinators.map((c) => c.url).join(",") },
      });
      this.procs.push(gw);
      this.gateway = gw;
    }
    await eventually(async () => {
      const work = await call("GET", `${this.registry.url}/v1/executors?node_type_id=scale.work`);
      const fan = await call("GET", `${this.registry.url}/v1/executors?node_type_id=scale.fan`);
      return work.body?.length === counts.atomic && fan.body?.length === counts.composite ? true : undefined;
    }, 20_000, "every executor in the directory");
  }

  async down(): Promise<void> {
    for (const p of this.procs) {
      p.child.kill("SIGCONT");
      await p.stop("SIGKILL");
    }
  }
}

/** Checks a finished run's event log: gapless seqs from 0, one run_completed and it comes last, one ending per NodeRun. */
async function checkEvents(base: string, runId: string): Promise<Json[]> {
  const ev = await readNdjson(`${base}/v1/runs/${runId}/events?follow=false`);
  expect(ev.status, runId).toBe(200);
  expect(ev.lines.map((e) => e.seq), runId).toEqual(ev.lines.map((_, i) => i));
  expect(ev.lines.filter((e) => e.type === "run_completed"), runId).toHaveLength(1);
  expect(ev.lines.at(-1).type, runId).toBe("run_completed");
  const endings = ev.lines.filter((e) => e.type === "node_run_completed").map((e) => e.node_run_id);
  expect(new Set(endings).size, runId).toBe(endings.length);
  return ev.lines;
}

describe("three coordinators, two atomic and two composite executors on one PostgreSQL database", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = new Cluster(newSchema("nf_scale"), { run_lease_ms: 2000, composite_lease_ms: 3000 });
    await cluster.up({ coordinators: 3, atomic: 2, composite: 2, gateway: true });
  }, 90_000);
  afterAll(async () => {
    await cluster?.down();
    await dropSchemas();
  });

  it("finishes 500 runs although a coordinator and two executors are killed midway, each handler once per key", async () => {
    const gw = cluster.gateway!.url;
    const total = 500;
    const specs = Array.from({ length: total }, (_, i) =>
      i % 10 < 7
        ? { run_id: `run_scale_${i}`, root_node_type_ref: WORK, input: { i, ms: 50 + (i % 5) * 50 } }
        : { run_id: `run_scale_${i}`, root_node_type_ref: FAN, input: { i, children: 3, ms: 80 } },
    );
    let next = 0;
    let killed = false;
    const started: string[] = [];
    // 32 clients start runs one after another; after 150 starts, coordinator 0 and one executor of each kind are
    // killed: their work is taken over by the coordinators and executors left.
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < total) {
          const spec = specs[next++];
          if (!killed && started.length >= 150) {
            killed = true;
            cluster.coordinators[0].child.kill("SIGKILL");
            cluster.atomic[0].child.kill("SIGKILL");
            cluster.composite[0].child.kill("SIGKILL");
          }
          // A start is idempotent by run_id: repeating it after a transport failure is safe.
          const res = await eventually(async () => {
            const r = await call("POST", `${gw}/v1/runs`, spec);
            return r.status === 200 ? r : undefined;
          }, 30_000, `start of ${spec.run_id}`);
          started.push(res.body.run_id);
        }
      }),
    );
    expect(new Set(started).size).toBe(total);

    const runs = await eventually(async () => {
      const all = await Promise.all(started.map((id) => call("GET", `${gw}/v1/runs/${id}`)));
      return all.every((r) => TERMINAL.has(r.body?.state)) ? all.map((r) => r.body as Json) : undefined;
    }, 120_000, "every run ended");
    for (const run of runs) {
      const i = Number(run.run_id.slice("run_scale_".length));
      expect(run.state, run.run_id).toBe("completed");
      const outputs = run.extensions["nodefabric.outputs"];
      if (i % 10 < 7) expect(outputs, run.run_id).toEqual({ i });
      else expect(outputs, run.run_id).toEqual({ sum: 3 * i * 100 + 3 });
    }

    // Runs were spread over the three coordinators, and the killed one's open runs were taken over.
    const held = await pgQuery<{ lease_owner: string; n: string }>(
      `SELECT lease_owner, count(*) AS n FROM ${cluster.schema}.runs GROUP BY lease_owner`,
    );
    expect(new Set(held.map((r) => r.lease_owner)).size, JSON.stringify(held)).toBeGreaterThanOrEqual(3);
    const [moved] = await pgQuery<{ n: string }>(`SELECT count(*) AS n FROM ${cluster.schema}.runs WHERE lease_epoch > 1`);
    expect(Number(moved.n), "runs taken over from the killed coordinator").toBeGreaterThan(0);

    for (const id of started) await checkEvents(gw, id);

    const executions = executionsIn(cluster.log);
    const twice = [...executions].filter(([, n]) => n > 1);
    expect(twice, "handlers that ran twice for one Idempotency-Key").toEqual([]);
    // Every atomic run and every child ran at least once.
    expect(executions.size).toBeGreaterThanOrEqual(350 + 150 * 3);
  }, 240_000);

  it("lets a follower on one coordinator see, live and in order, the events another coordinator writes", async () => {
    const [a, b] = cluster.coordinators.slice(1);
    const start = await call("POST", `${b.url}/v1/runs`, { root_node_type_ref: FAN, input: { i: 7, children: 5, ms: 300 } });
    expect(start.status).toBe(200);
    const runId = start.body.run_id as string;
    const seen = await followNdjson(`${a.url}/v1/runs/${runId}/events?follow=true`, (e) => e.type === "run_completed");
    expect(seen.map((e) => e.seq)).toEqual(seen.map((_, i) => i));
    expect(seen.at(-1).type).toBe("run_completed");
    expect(seen.filter((e) => e.type === "node_run_completed")).toHaveLength(6);
    // Exactly what the store holds, which coordinator B wrote.
    const stored = await readNdjson(`${b.url}/v1/runs/${runId}/events?follow=false`);
    expect(seen).toEqual(stored.lines);
    const owner = await pgQuery<{ lease_owner: string }>(`SELECT lease_owner FROM ${cluster.schema}.runs WHERE run_id = $1`, [runId]);
    expect(owner[0].lease_owner).toMatch(/^coordinator-/);
  }, 60_000);
});

describe("a coordinator paused past its lease", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = new Cluster(newSchema("nf_fence"), { run_lease_ms: 1000, composite_lease_ms: 3000 });
    await cluster.up({ coordinators: 2, atomic: 1, composite: 1, gateway: false }, "info");
  }, 90_000);
  afterAll(async () => {
    await cluster?.down();
    await dropSchemas();
  });

  it("writes nothing over the coordinator that took its run over", async () => {
    const [a, b] = cluster.coordinators;
    const schema = cluster.schema;
    const ownerOf = async (runId: string) =>
      (await pgQuery<{ lease_owner: string; lease_epoch: string }>(`SELECT lease_owner, lease_epoch FROM ${schema}.runs WHERE run_id = $1`, [runId]))[0];
    const start = await call("POST", `${a.url}/v1/runs`, { root_node_type_ref: WORK, input: { i: 1, ms: 4000 } });
    expect(start.status).toBe(200);
    const runId = start.body.run_id as string;
    await eventually(async () => {
      const ev = await readNdjson(`${b.url}/v1/runs/${runId}/events?follow=false`);
      return ev.lines.some((e) => e.type === "node_run_started") ? true : undefined;
    }, 10_000, "the node run started on coordinator A");
    const first = await ownerOf(runId);
    expect(first.lease_epoch).toBe("1");

    // A stops while its executor works; its lease (1 s) runs out and B takes the run over (epoch 2) and dispatches
    // attempt 2. A resumes while attempt 2 still runs: A's answer for attempt 1 then arrives at A.
    a.child.kill("SIGSTOP");
    const taken = await eventually(async () => {
      const o = await ownerOf(runId);
      return o.lease_epoch === "2" ? o : undefined;
    }, 15_000, "B took the run over");
    expect(taken.lease_owner).not.toBe(first.lease_owner);
    await eventually(async () => {
      const nrs = await call("GET", `${b.url}/v1/runs/${runId}/node-runs`);
      return nrs.body[0].extensions["nodefabric.attempt"] === 2 ? true : undefined;
    }, 10_000, "B dispatched attempt 2");
    a.child.kill("SIGCONT");
    await eventually(async () => (/another coordinator took over runs this one held/.test(a.output()) ? true : undefined), 15_000, "A noticed it lost the run");

    const done = await eventually(async () => {
      const r = await call("GET", `${a.url}/v1/runs/${runId}`);
      return r.body?.state === "completed" ? r.body : undefined;
    }, 30_000, "the run completed");
    expect(done.extensions["nodefabric.outputs"]).toEqual({ i: 1 });
    await new Promise((r) => setTimeout(r, 1500));

    // One ending, by B, whatever A's late answer: gapless events, one run_completed, the holder unchanged.
    const lines = await checkEvents(b.url, runId);
    expect(lines.filter((e) => e.type === "node_run_completed")).toHaveLength(1);
    expect(lines.filter((e) => e.type === "node_run_retrying").map((e) => e.data)).toEqual([{ attempt: 2, reason: "lease_expired" }]);
    expect((await call("GET", `${b.url}/v1/runs/${runId}`)).body).toEqual(done);
    expect((await call("GET", `${b.url}/v1/runs/${runId}/node-runs`)).body[0].extensions["nodefabric.attempt"]).toBe(2);
    expect(await ownerOf(runId)).toEqual(taken);
    // Both attempts ran, each once, under keys of their own.
    const executions = [...executionsIn(cluster.log)].filter(([k]) => k.startsWith(start.body.root_node_run_id));
    expect(executions.map(([k, n]) => [k.slice(k.lastIndexOf(":") + 1), n]).sort()).toEqual([["1", 1], ["2", 1]]);
  }, 90_000);
});

describe("a coordinator stopped cleanly (SIGTERM)", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    // A lease far longer than the test waits: the runs must move because they were let go, not because it ran out.
    cluster = new Cluster(newSchema("nf_drain"), { run_lease_ms: 60_000, composite_lease_ms: 3000 });
    await cluster.up({ coordinators: 2, atomic: 1, composite: 1, gateway: false });
  }, 90_000);
  afterAll(async () => {
    await cluster?.down();
    await dropSchemas();
  });

  it("lets its open runs go, and another coordinator finishes them without waiting for the lease", async () => {
    const [a, b] = cluster.coordinators;
    const started = await Promise.all(
      Array.from({ length: 10 }, (_, i) => call("POST", `${a.url}/v1/runs`, { root_node_type_ref: i % 2 ? FAN : WORK, input: { i, ms: 1500 } })),
    );
    for (const s of started) expect(s.status).toBe(200);
    const t0 = Date.now();
    expect(await a.stop("SIGTERM")).toBe(0);
    const runs = await eventually(async () => {
      const all = await Promise.all(started.map((s) => call("GET", `${b.url}/v1/runs/${s.body.run_id}`)));
      return all.every((r) => r.body?.state === "completed") ? all.map((r) => r.body as Json) : undefined;
    }, 20_000, "B finished every run");
    expect(Date.now() - t0).toBeLessThan(20_000);
    for (const run of runs) await checkEvents(b.url, run.run_id);
  }, 60_000);
});
