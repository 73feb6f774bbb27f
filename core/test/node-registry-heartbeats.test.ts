/**
 * Executor heartbeats at the Node Registry: `POST /v1/executors/{id}:heartbeat` answers 204 or 404 (register again),
 * the directory lists only executors heard from within the TTL, long-silent ones are removed, and heartbeats take the
 * registration's scope.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { TokenVerifier } from "@nodefabric/core";
import { buildNodeRegistry, type NodeRegistryOptions } from "../src/services/node-registry/index.js";
import { ConfigError, loadConfig } from "../src/config.js";
import { setClock } from "../src/clock.js";
import { buildService } from "../src/fabric.js";
import { checkedCall as call } from "./support/checked-call.js";
import { startTestIssuer, type TestIssuer } from "./support/test-issuer.js";

async function start(options: Partial<NodeRegistryOptions> = {}): Promise<{ app: FastifyInstance; base: string }> {
  const dbPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "nf-hb-")), "registry.db");
  const app = await buildNodeRegistry({ logger: false, dbPath, ...options });
  await app.listen({ host: "127.0.0.1", port: 0 });
  return { app, base: `http://127.0.0.1:${(app.server.address() as { port: number }).port}` };
}

const registration = (port: number) => ({
  endpoint: `http://127.0.0.1:${port}`,
  kind: "atomic",
  node_types: [{ node_type_id: "demo.echo", version: "1.0.0" }],
});

const listed = async (base: string, query = "") =>
  ((await call(base, "GET", `/v1/executors${query}`)).body as Array<{ executor_instance_id: string }>).map((e) => e.executor_instance_id);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` until it returns true or `ms` pass. */
async function until(probe: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (await probe()) return true;
    if (Date.now() > end) return false;
    await sleep(25);
  }
}

describe("node registry: executor heartbeats", () => {
  let reg: { app: FastifyInstance; base: string };
  beforeAll(async () => {
    reg = await start();
    await call(reg.base, "POST", "/v1/node-types", { node_type: { node_type_id: "demo.echo", version: "1.0.0", kind: "atomic", description: "echo" } });
  });
  afterAll(async () => {
    await reg.app.close();
  });

  it("answers 204 with no body to a registered executor, telling it the TTL, and 404 route_not_found to an unknown one", async () => {
    const put = await call(reg.base, "PUT", "/v1/executors/ae-1", registration(9001));
    expect(put.status).toBe(200);
    expect(put.headers["x-executor-ttl-ms"]).toBe("10000");

    const beat = await call(reg.base, "POST", "/v1/executors/ae-1:heartbeat");
    expect(beat.status).toBe(204);
    expect(beat.body).toBeUndefined();
    expect(beat.headers["x-executor-ttl-ms"]).toBe("10000");

    const unknown = await call(reg.base, "POST", "/v1/executors/ae-unknown:heartbeat");
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("route_not_found");
    expect(unknown.body.error.details).toEqual({ executor_instance_id: "ae-unknown" });
    expect(unknown.body.error.message).toMatch(/register/);
    // A heartbeat registers nothing.
    expect(await listed(reg.base)).toEqual(["ae-1"]);
  });

  it("takes ids holding ':' (encoded or not) and refuses an id that is not one with 400", async () => {
    await call(reg.base, "PUT", `/v1/executors/${encodeURIComponent("host:8082")}`, registration(9002));
    expect((await call(reg.base, "POST", "/v1/executors/host:8082:heartbeat")).status).toBe(204);
    expect((await call(reg.base, "POST", `/v1/executors/${encodeURIComponent("host:8082")}:heartbeat`)).status).toBe(204);
    const bad = await call(reg.base, "POST", `/v1/executors/${encodeURIComponent("bad id!")}:heartbeat`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_request");
    const get = await call(reg.base, "GET", "/v1/executors/ae-1:heartbeat");
    expect(get.status).toBe(405);
  });
});

describe("node registry: the executor TTL", () => {
  const TTL = 400;
  let reg: { app: FastifyInstance; base: string };
  beforeAll(async () => {
    reg = await start({ executorTtlMs: TTL, executorPruneAfterMs: 1200 });
    await call(reg.base, "POST", "/v1/node-types", { node_type: { node_type_id: "demo.echo", version: "1.0.0", kind: "atomic", description: "echo" } });
  });
  afterAll(async () => {
    await reg.app.close();
  });

  it("lists only executors heard from within the TTL, takes a late heartbeat back, and removes long-silent ones", async () => {
    // The fabric's clock, moved by hand: what is listed depends on when each executor was last heard from, not on how
    // fast this machine answers (a loaded one once let a beating executor lapse between two of its heartbeats).
    // It starts a minute back, so that whatever it stamps is in the past for the real clock the next test reads.
    let now = Date.now() - 60_000;
    setClock({ now: () => now, isoNow: () => new Date(now).toISOString() });
    const beat = async (id: string) => (await call(reg.base, "POST", `/v1/executors/${id}:heartbeat`)).status;
    try {
      expect((await call(reg.base, "PUT", "/v1/executors/ae-beating", registration(9101))).headers["x-executor-ttl-ms"]).toBe(String(TTL));
      await call(reg.base, "PUT", "/v1/executors/ae-silent", registration(9102));
      expect(await listed(reg.base, "?node_type_id=demo.echo")).toEqual(["ae-beating", "ae-silent"]);

      // Half a TTL on, only one beats; past the TTL of the other's last word, the silent one leaves the directory and
      // the registry's own view of what is served.
      now += TTL / 2;
      expect(await beat("ae-beating")).toBe(204);
      now += TTL / 2 + 1;
      expect(await listed(reg.base)).toEqual(["ae-beating"]);
      expect(await listed(reg.base, "?node_type_id=demo.echo&version=1.0.0")).toEqual(["ae-beating"]);

      // A heartbeat before it is removed brings it back as it was registered.
      expect(await beat("ae-silent")).toBe(204);
      expect(await beat("ae-beating")).toBe(204);
      const back = (await call(reg.base, "GET", "/v1/executors")).body as Array<{ executor_instance_id: string; endpoint: string }>;
      expect(back.map((e) => [e.executor_instance_id, e.endpoint])).toEqual([["ae-beating", "http://127.0.0.1:9101"], ["ae-silent", "http://127.0.0.1:9102"]]);

      // Silent past the prune age (1.2 s; the registry checks every 0.6 s of real time), while the other beats: the
      // silent one is removed at the next check, so its heartbeat is told to register again. The clock stands still
      // while we wait for that check, so a late timer changes nothing.
      now += 700;
      expect(await beat("ae-beating")).toBe(204);
      now += 501;
      await sleep(2_000);
      const gone = await call(reg.base, "POST", "/v1/executors/ae-silent:heartbeat");
      expect(gone.status).toBe(404);
      expect(gone.body.error.code).toBe("route_not_found");
      expect((await call(reg.base, "PUT", "/v1/executors/ae-silent", registration(9102))).status).toBe(200);
      expect(await beat("ae-beating")).toBe(204);
      expect(await listed(reg.base)).toEqual(["ae-beating", "ae-silent"]);
    } finally {
      setClock();
    }
  });

  it("counts an executor that stopped beating as not serving in the health check", async () => {
    await call(reg.base, "PUT", "/v1/executors/ae-once", registration(9103));
    const unserved = async () => {
      const h = await call(reg.base, "GET", "/v1/health");
      return h.body.checks.find((c: { name: string }) => c.name === "unserved_node_types");
    };
    expect((await unserved()).status).toBe("ok");
    expect(await until(async () => (await unserved()).status === "degraded", TTL + 1000)).toBe(true);
    expect((await unserved()).details.node_types).toEqual([{ node_type_id: "demo.echo", version: "1.0.0" }]);
  });
});

describe("node registry: heartbeats with authentication", () => {
  let idp: TestIssuer;
  let reg: { app: FastifyInstance; base: string };
  const AUD = "nodefabric-node-registry";
  const bearer = async (scope: string) => ({ authorization: `Bearer ${await idp.mint({ aud: AUD, scope })}` });
  beforeAll(async () => {
    idp = await startTestIssuer();
    reg = await start({ auth: { mode: "required", verifier: new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer, clockToleranceSeconds: 60 }) } });
  });
  afterAll(async () => {
    await reg?.app.close();
    await idp?.close();
  });

  it("needs executors:register, like registering: none is 401, node-types:write is 403", async () => {
    const register = await bearer("executors:register");
    expect((await call(reg.base, "PUT", "/v1/executors/ae-1", registration(9201), register)).status).toBe(200);
    expect((await call(reg.base, "POST", "/v1/executors/ae-1:heartbeat", undefined, register)).status).toBe(204);
    expect((await call(reg.base, "POST", "/v1/executors/ae-2:heartbeat", undefined, register)).status).toBe(404);

    const none = await call(reg.base, "POST", "/v1/executors/ae-1:heartbeat");
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe("unauthenticated");
    const writer = await call(reg.base, "POST", "/v1/executors/ae-1:heartbeat", undefined, await bearer("node-types:write node-types:read"));
    expect(writer.status).toBe(403);
    expect(writer.body.error.code).toBe("permission_denied");
    expect(writer.body.error.details).toEqual({ required_scope: "executors:register" });
  });
});

describe("node registry: registry.executor_ttl_ms in the configuration", () => {
  it("reaches the registry from fabric.config.json or FABRIC_REGISTRY_EXECUTOR_TTL_MS, and a bad value stops the start", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-hb-config-"));
    fs.writeFileSync(path.join(dir, "fabric.config.json"), JSON.stringify({ data_dir: "data", registry: { executor_ttl_ms: 1500 } }));
    const fromFile = loadConfig({ cwd: dir, env: {} });
    expect(fromFile.registry).toEqual({ executor_ttl_ms: 1500 });
    expect(loadConfig({ cwd: dir, env: { FABRIC_REGISTRY_EXECUTOR_TTL_MS: "2500" } }).registry).toEqual({ executor_ttl_ms: 2500 });
    expect(() => loadConfig({ cwd: dir, env: { FABRIC_REGISTRY_EXECUTOR_TTL_MS: "soon" } })).toThrow(ConfigError);
    expect(() => loadConfig({ cwd: dir, env: { FABRIC_REGISTRY_EXECUTOR_TTL_MS: "0" } })).toThrow(/executor_ttl_ms/);

    const app = await buildService("node-registry", { ...fromFile, log_level: "silent" }, [], undefined, { plugins: [] });
    try {
      await app.listen({ host: "127.0.0.1", port: 0 });
      const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
      const put = await call(base, "PUT", "/v1/executors/ae-1", registration(9301));
      expect(put.headers["x-executor-ttl-ms"]).toBe("1500");
    } finally {
      await app.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
