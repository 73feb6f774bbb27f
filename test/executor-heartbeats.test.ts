/**
 * Executor heartbeats across real services on loopback (SQLite files): two atomic executors serve the same node type
 * behind one registry and one coordinator. Runs are spread over both; a closed executor leaves the directory within
 * the registry's TTL while runs go on completing on the other; a registry restarted empty gets the executor back,
 * because its heartbeat is answered 404 and it registers again.
 */
import { describe, it, expect, afterAll } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { buildAtomicExecutor, buildNodeRegistry, buildRunCoordinator, handlersFromDefinitions } from "@nodefabric/core";
import { defineAtomic } from "@nodefabric/core/sdk";
import { call, eventually } from "./run-client.js";

const TTL_MS = 1_000;
const REF = { node_type_id: "hb.where", version: "1.0.0" };

/** The same node type in each executor, answering which executor ran it. */
function whereDefinition(label: string) {
  return defineAtomic<{ i?: number }>({
    nodeType: {
      ...REF,
      description: "Says which executor ran it",
      input_schema: { type: "object", properties: { i: { type: "integer" } } },
      output_schema: { type: "object", properties: { served_by: { type: "string" } }, required: ["served_by"] },
    },
    async handler() {
      return { served_by: label };
    },
  });
}

describe("executor heartbeats: several executors of one node type behind one registry", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "nf-heartbeats-"));
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

  const executor = async (label: string, registryUrl: string) => {
    const app = await buildAtomicExecutor({ logger: false, handlers: handlersFromDefinitions([whereDefinition(label)]), registryUrl, executorInstanceId: `ae-${label}` });
    return { app, url: await listen(app) };
  };

  const listed = async (registryUrl: string): Promise<string[]> => {
    const r = await call("GET", `${registryUrl}/v1/executors?node_type_id=${REF.node_type_id}&version=${REF.version}`);
    expect(r.status).toBe(200);
    return (r.body as Array<{ executor_instance_id: string }>).map((e) => e.executor_instance_id);
  };

  const registrationCheck = async (url: string) => {
    const h = await call("GET", `${url}/v1/health`);
    const body = h.body.checks ? h.body : h.body.error.details.health;
    return (body.checks as Array<{ name: string; status: string; message?: string; details: Record<string, unknown> }>).find((c) => c.name === "registry_registration")!;
  };

  it("spreads runs over both, drops a closed one within the TTL, and gets an executor back into a registry restarted empty", async () => {
    const registryDb = (n: number) => path.join(dir, `registry-${n}.db`);
    const registry = await buildNodeRegistry({ logger: false, dbPath: registryDb(1), executorTtlMs: TTL_MS });
    const registryUrl = await listen(registry);
    const registryPort = Number(new URL(registryUrl).port);
    const a = await executor("a", registryUrl);
    const b = await executor("b", registryUrl);
    const coordinator = await listen(await buildRunCoordinator({ logger: false, dbPath: path.join(dir, "runs.db"), registryUrl, tickMs: 20 }));

    await eventually(async () => ((await listed(registryUrl)).join() === "ae-a,ae-b" ? true : undefined), 10_000, "both executors registered");
    // The registry's TTL sets the pace: a third of it, below the default 3 s.
    expect((await registrationCheck(a.url)).details.heartbeat_ms).toBe(Math.floor(TTL_MS / 3));

    const runMany = async (n: number, from: number) => {
      const runs = await Promise.all(
        Array.from({ length: n }, (_, i) => call("POST", `${coordinator}/v1/runs`, { root_node_type_ref: REF, input: { i: from + i } }, { prefer: "wait=20" })),
      );
      return runs.map((r) => {
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        expect(r.body.state, JSON.stringify(r.body)).toBe("completed");
        return r.body.extensions["nodefabric.outputs"].served_by as string;
      });
    };

    // Both executors take a share of the runs.
    const spread = await runMany(20, 0);
    expect(spread.filter((s) => s === "a").length).toBeGreaterThanOrEqual(5);
    expect(spread.filter((s) => s === "b").length).toBeGreaterThanOrEqual(5);

    // Executor a goes away: it stops beating and leaves the directory within the TTL (and a heartbeat's margin).
    await close(a.app);
    const closedAt = Date.now();
    // Runs started right away may be offered to a first; they complete on b all the same.
    const during = runMany(10, 100);
    await eventually(async () => ((await listed(registryUrl)).join() === "ae-b" ? true : undefined), 5_000, "ae-a leaves the directory");
    expect(Date.now() - closedAt).toBeLessThan(TTL_MS + 1_000);
    expect(new Set(await during)).toEqual(new Set(["b"]));
    // Still out, and the runs after it all go to b.
    await new Promise((r) => setTimeout(r, TTL_MS));
    expect(await listed(registryUrl)).toEqual(["ae-b"]);
    expect(new Set(await runMany(10, 200))).toEqual(new Set(["b"]));
    expect((await call("GET", `${registryUrl}/v1/executors`)).body.map((e: { executor_instance_id: string }) => e.executor_instance_id)).toEqual(["ae-b"]);

    // The registry goes down: b's heartbeats fail, which its health says; it keeps trying.
    await close(registry);
    await eventually(async () => {
      const check = await registrationCheck(b.url);
      return check.status === "degraded" && /heartbeats to .* fail/.test(check.message ?? "") ? true : undefined;
    }, 5_000, "b reports failing heartbeats");

    // It comes back on the same address with an empty store: b's heartbeat is answered 404, and b publishes and
    // registers again, so the node type and the executor are back.
    const fresh = await buildNodeRegistry({ logger: false, dbPath: registryDb(2), executorTtlMs: TTL_MS });
    await listen(fresh, registryPort);
    await eventually(async () => ((await listed(registryUrl)).join() === "ae-b" ? true : undefined), 5_000, "b registered again");
    expect((await call("GET", `${registryUrl}/v1/node-types/${REF.node_type_id}?version=${REF.version}`)).status).toBe(200);
    await eventually(async () => ((await registrationCheck(b.url)).status === "ok" ? true : undefined), 5_000, "b's registration ok again");
    // And it stays listed, beating, past several TTLs.
    await new Promise((r) => setTimeout(r, 2 * TTL_MS));
    expect(await listed(registryUrl)).toEqual(["ae-b"]);
    expect(new Set(await runMany(5, 300))).toEqual(new Set(["b"]));
  }, 60_000);
});
