/**
 * The executor's side of heartbeats (RegistryRegistration) against a real registry on loopback: the pace, one log line
 * per outage, registering again when the registry has lost the executor, a registry older than heartbeats, and no
 * request after stop().
 */
import { describe, it, expect, afterEach } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import type { NodeType } from "@nodefabric/schemas";
import { buildNodeRegistry } from "../src/services/node-registry/index.js";
import { RegistryRegistration } from "../src/services/atomic-executor/registry-registration.js";
import { checkedCall as call } from "./support/checked-call.js";

const ECHO = { node_type_id: "hb.echo", version: "1.0.0", kind: "atomic", description: "echo" } as unknown as NodeType;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function recordingLogger() {
  const lines: Array<{ level: string; msg: string }> = [];
  const at = (level: string) => (_obj: object, msg?: string) => void lines.push({ level, msg: msg ?? "" });
  const logger = { info: at("info"), warn: at("warn"), error: at("error"), debug: () => undefined, trace: () => undefined, fatal: () => undefined, child: () => logger, level: "info", silent: () => undefined };
  return { lines, logger: logger as never };
}

describe("RegistryRegistration heartbeats", () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  async function listen(app: FastifyInstance, port = 0): Promise<string> {
    await app.listen({ host: "127.0.0.1", port });
    cleanup.push(() => app.close());
    return `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  }

  const registry = (ttl?: number) => buildNodeRegistry({ logger: false, dbPath: path.join(fs.mkdtempSync(path.join(os.tmpdir(), "nf-rr-hb-")), "r.db"), executorTtlMs: ttl });

  function registration(registryUrl: string, heartbeatMs?: number) {
    const log = recordingLogger();
    const reg = new RegistryRegistration({ registryUrl, kind: "atomic", nodeTypes: [ECHO], logger: log.logger, executorInstanceId: "ae-hb", initialRetryDelayMs: 10, maxRetryDelayMs: 50, heartbeatMs });
    cleanup.push(() => reg.stop());
    reg.start({ host: "127.0.0.1", port: 9 });
    return { reg, ...log };
  }

  it("beats at heartbeatMs, or a third of the registry's TTL when shorter, and stays listed past the TTL", async () => {
    const registryUrl = await listen(await registry(600));
    const { reg } = registration(registryUrl, 5_000);
    await reg.settled();
    expect(reg.heartbeatIntervalMs).toBe(200);
    await sleep(1_300);
    expect(reg.check()).toMatchObject({ status: "ok" });
    expect(reg.check().details!.heartbeats).toBeGreaterThanOrEqual(4);
    expect((await call(registryUrl, "GET", "/v1/executors")).body.map((e: { executor_instance_id: string }) => e.executor_instance_id)).toEqual(["ae-hb"]);

    const slow = registration(await listen(await registry(60_000)), 150);
    await slow.reg.settled();
    expect(slow.reg.heartbeatIntervalMs).toBe(150);
  });

  it("logs a failing heartbeat once per outage, says when it ends, and registers again with a registry that lost it", async () => {
    const first = await registry(600);
    const registryUrl = await listen(first);
    const port = Number(new URL(registryUrl).port);
    const { reg, lines } = registration(registryUrl);
    await reg.settled();
    await first.close();
    await sleep(1_000); // about five heartbeats, all refused
    const failed = lines.filter((l) => l.msg.startsWith("heartbeat to the node registry failed"));
    expect(failed).toHaveLength(1);
    expect(failed[0]!.level).toBe("warn");
    expect(reg.check()).toMatchObject({ status: "degraded", message: expect.stringMatching(/heartbeats to .* fail/) });

    // Back, empty: the heartbeat is answered 404, and the executor publishes and registers again.
    const second = await registry(600);
    await listen(second, port);
    const until = Date.now() + 3_000;
    while (reg.check().status !== "ok" && Date.now() < until) await sleep(20);
    expect(reg.check().status).toBe("ok");
    expect(lines.filter((l) => l.msg === "heartbeats reach the node registry again")).toHaveLength(1);
    expect(lines.filter((l) => l.msg === "the node registry no longer lists this executor; registering again")).toHaveLength(1);
    expect((await call(registryUrl, "GET", "/v1/executors")).body.map((e: { executor_instance_id: string }) => e.executor_instance_id)).toEqual(["ae-hb"]);
    expect((await call(registryUrl, "GET", "/v1/node-types/hb.echo")).status).toBe(200);
    expect(lines.filter((l) => l.msg.startsWith("heartbeat to the node registry failed"))).toHaveLength(1);
  });

  it("registers again as its heartbeat with a registry older than heartbeats, and sends nothing after stop()", async () => {
    const seen: string[] = [];
    const old = Fastify();
    old.addHook("onRequest", async (req) => void seen.push(`${req.method} ${req.url}`));
    old.post("/v1/node-types:batch", async (req) => ({ node_types: (req.body as { node_types: unknown[] }).node_types }));
    old.put("/v1/executors/:id", async (req) => ({ ...(req.body as object), executor_instance_id: "ae-hb", registered_at: new Date().toISOString() }));
    const registryUrl = await listen(old);
    const { reg } = registration(registryUrl, 100);
    await reg.settled();
    await sleep(450);
    const puts = seen.filter((s) => s === "PUT /v1/executors/ae-hb").length;
    expect(puts).toBeGreaterThanOrEqual(3);
    expect(seen.filter((s) => s.startsWith("POST /v1/node-types"))).toHaveLength(1);
    expect(reg.check().status).toBe("ok");

    await reg.stop();
    const after = seen.length;
    await sleep(300);
    expect(seen.length).toBe(after);
  });
});
