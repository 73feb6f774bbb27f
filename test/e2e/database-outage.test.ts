/**
 * A whole fabric on PostgreSQL whose database goes away (docs/deploy.md, "When the database goes away"), through a TCP
 * proxy in front of the tests' server (plugins/postgres/test/support/pg-proxy.ts), never stopping the server itself:
 * every connection cut under load and new ones refused, every backend terminated by the server, and a start while
 * the database refuses connections. The process keeps running (an unhandled 'error' would fail the file), clients get
 * 503 `unavailable` ErrorEnvelopes with Retry-After while it is down, /v1/health names the store, and every run
 * acknowledged before the outage completes once the database is back.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadConfig, startFabric, type RunningFabric } from "@nodefabric/core";
import { call, eventually } from "../run-client.js";
import { dropSchemas, newSchema } from "./pg-fabric.js";
import { PgProxy } from "../../plugins/postgres/test/support/pg-proxy.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const SLEEP = { node_type_id: "demo.sleep", version: "1.0.0" };
const TERMINAL = new Set(["completed", "failed", "canceled"]);

let proxy: PgProxy;
const fabrics: RunningFabric[] = [];

async function fabricOn(schema: string): Promise<RunningFabric> {
  const url = proxy.url();
  url.searchParams.set("schema", schema);
  const config = loadConfig({
    cwd: repo,
    env: {},
    flags: {
      port_base: 0,
      data_dir: mkdtempSync(path.join(os.tmpdir(), "nf-outage-")),
      log_level: "silent",
      handlers: ["@nodefabric/handler-demo"],
      plugins: [path.join(repo, "plugins/postgres")],
      store: { url: url.toString(), pool_size: 4 },
    } as never,
  });
  const fabric = await startFabric(config);
  fabrics.push(fabric);
  return fabric;
}

/** Waits until the fabric's executor serves demo.sleep (it registers in the background). */
async function servingSleep(f: RunningFabric): Promise<void> {
  await eventually(async () => {
    const r = await call("GET", `${f.urls["node-registry"]}/v1/executors?node_type_id=demo.sleep`);
    return r.status === 200 && r.body.length > 0 ? true : undefined;
  }, 60_000, "the executor registered");
}

/** A 503 as a dependency that is down answers: an ErrorEnvelope, retryable, with Retry-After. */
function expectUnavailable(r: { status: number; headers: Record<string, unknown>; body: any }, what: string): void {
  expect(r.status, `${what}: ${JSON.stringify(r.body)}`).toBe(503);
  expect(r.body.error.code, what).toBe("unavailable");
  expect(r.body.error.retryable, what).toBe(true);
  expect(Number(r.headers["retry-after"]), what).toBeGreaterThan(0);
}

/** The store check of a service's /v1/health. */
async function storeHealth(url: string): Promise<{ status: number; check: { name: string; status: string; message?: string } | undefined }> {
  const r = await call("GET", `${url}/v1/health`);
  const health = r.status === 200 ? r.body : r.body?.error?.details?.health;
  return { status: r.status, check: health?.checks?.find((c: { name: string }) => c.name === "store") };
}

async function start(f: RunningFabric, ms: number): Promise<string> {
  const r = await call("POST", `${f.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.run_id as string;
}

async function allEnd(f: RunningFabric, runIds: string[], timeoutMs = 120_000): Promise<Map<string, string>> {
  const states = new Map<string, string>();
  try {
    await eventually(async () => {
      for (const id of runIds) {
        if (TERMINAL.has(states.get(id) ?? "")) continue;
        const r = await call("GET", `${f.urls["run-gateway"]}/v1/runs/${id}`);
        if (r.status === 200) states.set(id, r.body.state);
      }
      return runIds.every((id) => TERMINAL.has(states.get(id) ?? "")) ? true : undefined;
    }, timeoutMs, "every acknowledged run ended");
  } catch (err) {
    const open = runIds.filter((id) => !TERMINAL.has(states.get(id) ?? "")).map((id) => `${id}: ${states.get(id) ?? "unread"}`);
    throw new Error(`${(err as Error).message}; still open: ${open.join(", ")}`);
  }
  return states;
}

beforeAll(async () => {
  proxy = await PgProxy.start();
});
afterAll(async () => {
  await proxy.restore();
  proxy.unstall();
  for (const f of fabrics) await f.close();
  await proxy.close();
  await dropSchemas();
});

describe("a fabric whose database goes away", () => {
  it("waits out a cut under load: 503 while down, /v1/health names the store, and every acknowledged run completes", async () => {
    const f = await fabricOn(newSchema("nf_outage"));
    await servingSleep(f);
    const acknowledged: string[] = [];
    for (let i = 0; i < 20; i++) acknowledged.push(await start(f, 200 + 50 * i));
    // Load that goes on through the outage: some starts are refused (503), none crashes anything.
    let loading = true;
    const refused: number[] = [];
    const load = (async () => {
      while (loading) {
        const r = await call("POST", `${f.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms: 50 } }).catch(() => undefined);
        if (r?.status === 200) acknowledged.push(r.body.run_id);
        else if (r) refused.push(r.status);
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    await new Promise((res) => setTimeout(res, 300));
    await proxy.cut();

    expectUnavailable(await call("POST", `${f.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms: 1 } }), "POST /v1/runs");
    expectUnavailable(await call("GET", `${f.urls["run-gateway"]}/v1/runs/run_not_held_here`), "GET /v1/runs/{id}");
    const coordinator = await eventually(async () => {
      const h = await storeHealth(f.urls["run-coordinator"]!);
      return h.check?.status === "down" ? h : undefined;
    }, 20_000, "the coordinator's health naming the store down");
    expect(coordinator.status).toBe(503);
    expect(coordinator.check!.message).toMatch(/database/);
    const registry = await storeHealth(f.urls["node-registry"]!);
    expect(registry.check?.status).toBe("down");
    // Down a while, under load: the process stays up, every refusal is a 503.
    await new Promise((res) => setTimeout(res, 3_000));
    expect(refused.length).toBeGreaterThan(0);
    expect(refused.every((s) => s === 503), JSON.stringify(refused)).toBe(true);

    await proxy.restore();
    await eventually(async () => ((await storeHealth(f.urls["run-coordinator"]!)).check?.status === "ok" ? true : undefined), 30_000, "the store healthy again");
    loading = false;
    await load;
    const states = await allEnd(f, acknowledged);
    const notCompleted = [...states].filter(([, s]) => s !== "completed");
    expect(notCompleted, JSON.stringify(notCompleted)).toEqual([]);
    // And new work runs.
    await allEnd(f, [await start(f, 1)], 30_000);
  }, 240_000);

  it("survives the server terminating every connection of the fabric while runs are in flight", async () => {
    const f = await fabricOn(newSchema("nf_outage"));
    await servingSleep(f);
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push(await start(f, 300));
    expect(await proxy.terminateBackends()).toBeGreaterThan(0);
    for (let i = 0; i < 5; i++) {
      // A start right after may meet a dead connection once (a retryable 503), never a 500.
      const r = await call("POST", `${f.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms: 10 } });
      if (r.status === 200) ids.push(r.body.run_id);
      else expectUnavailable(r, "POST /v1/runs after the terminations");
    }
    const states = await allEnd(f, ids);
    expect([...states.values()].every((s) => s === "completed"), JSON.stringify([...states])).toBe(true);
  }, 240_000);

  it("starts while the database refuses connections, reports it, and comes up by itself when it accepts", async () => {
    await proxy.cut();
    const f = await fabricOn(newSchema("nf_outage"));
    const h = await storeHealth(f.urls["run-coordinator"]!);
    expect(h.status).toBe(503);
    expect(h.check?.status).toBe("down");
    expect(h.check?.message).toMatch(/database/);
    expectUnavailable(await call("POST", `${f.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms: 1 } }), "POST /v1/runs before the database");
    await proxy.restore();
    await eventually(async () => ((await storeHealth(f.urls["run-coordinator"]!)).check?.status === "ok" ? true : undefined), 60_000, "the store reached");
    await servingSleep(f);
    const states = await allEnd(f, [await start(f, 10)], 60_000);
    expect([...states.values()]).toEqual(["completed"]);
  }, 240_000);
});
