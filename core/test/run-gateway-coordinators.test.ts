/**
 * A gateway over several coordinators: new runs go round robin over those up, a closed one is passed over (and its
 * runs' requests retried elsewhere when that is safe), a probe brings it back, and health reports each.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import { ConfigError, loadConfig } from "../src/config.js";
import { startFabric, type RunningFabric } from "../src/fabric.js";
import { buildRunGateway, type RunGatewayOptions } from "../src/services/run-gateway/index.js";
import { buildRunCoordinator } from "../src/services/run-coordinator/index.js";

import { baseOf, call, expectEnvelope, expectValid, until } from "./support/gateway-http.js";
const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const echoRef = { node_type_id: "demo.echo", version: "1.0.0" };

async function gatewayOver(urls: string[], extra: Partial<RunGatewayOptions> = {}): Promise<{ app: FastifyInstance; url: string }> {
  const app = await buildRunGateway({ logger: false, coordinatorUrls: urls, coordinatorDownMs: 100, healthTimeoutMs: 1_000, ...extra });
  await app.listen({ host: "127.0.0.1", port: 0 });
  return { app, url: baseOf(app) };
}

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

function coordinatorChecks(health: any): Array<{ url: string; status: string }> {
  const check = health.checks.find((c: { name: string }) => c.name === "run-coordinator");
  return check.details.coordinators;
}

describe("run gateway over three real coordinators", () => {
  let fabric: RunningFabric;
  let dataDir: string;
  /** Three coordinators, each with its own SQLite file: where a run lives tells which coordinator took it. */
  const coords: Array<{ app?: FastifyInstance; url: string; port: number; dbPath: string }> = [];
  let gateway: { app: FastifyInstance; url: string };
  let seq = 0;

  async function startCoordinator(dbPath: string, port = 0): Promise<FastifyInstance> {
    const app = await buildRunCoordinator({
      logger: false,
      dbPath,
      registryUrl: fabric.urls["node-registry"]!,
      atomicExecutorUrl: fabric.urls["atomic-executor"],
      selectionUrl: fabric.urls.selection,
      pdpUrl: fabric.urls.pdp,
    });
    await app.listen({ host: "127.0.0.1", port });
    return app;
  }

  /** Starts a run through the gateway and waits for its end; answers which coordinator holds it. */
  async function startRun(): Promise<{ runId: string; holders: number[] }> {
    const runId = `run_multi_${++seq}`;
    const r = await call("POST", `${gateway.url}/v1/runs`, { run_id: runId, root_node_type_ref: echoRef, input: { n: seq } }, { prefer: "wait=10" });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ run_id: runId, state: "completed" });
    const holders: number[] = [];
    for (const [i, c] of coords.entries()) {
      if (!c.app) continue;
      const g = await call("GET", `${c.url}/v1/runs/${runId}`);
      if (g.status === 200) holders.push(i);
      else expectEnvelope(g, 404, "run_not_found");
    }
    return { runId, holders };
  }

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-gw-multi-"));
    const config = loadConfig({
      cwd: repoRoot,
      env: {},
      flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"] },
    });
    fabric = await startFabric(config, ["node-registry", "pdp", "selection", "atomic-executor"]);
    await until("demo node types published", async () => {
      const r = await call("GET", `${fabric.urls["node-registry"]}/v1/node-types/demo.echo`);
      return r.status === 200 ? true : undefined;
    });
    for (let i = 0; i < 3; i++) {
      const dbPath = path.join(dataDir, `coordinator-${i}.db`);
      const app = await startCoordinator(dbPath);
      coords.push({ app, url: baseOf(app), port: (app.server.address() as AddressInfo).port, dbPath });
    }
    gateway = await gatewayOver(coords.map((c) => c.url));
  });

  afterAll(async () => {
    await gateway?.app.close();
    for (const c of coords) await c.app?.close();
    await fabric?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("spreads new runs round robin: each of three coordinators takes one in three", async () => {
    const counts = [0, 0, 0];
    for (let i = 0; i < 6; i++) {
      const { holders } = await startRun();
      expect(holders).toHaveLength(1);
      counts[holders[0]!]++;
    }
    expect(counts).toEqual([2, 2, 2]);
    const h = await call("GET", `${gateway.url}/v1/health`);
    expect(h.status, h.text).toBe(200);
    expectValid("health", h.body);
    expect(coordinatorChecks(h.body).map((c) => c.status)).toEqual(["ok", "ok", "ok"]);
  });

  it("passes over a closed coordinator: every run still starts and ends, none lost, health is degraded", async () => {
    await coords[1]!.app!.close();
    coords[1]!.app = undefined;
    const counts = [0, 0, 0];
    for (let i = 0; i < 6; i++) {
      const { holders } = await startRun();
      // Held by exactly one live coordinator: nothing lost, nothing started twice.
      expect(holders).toHaveLength(1);
      counts[holders[0]!]++;
    }
    expect(counts[1]).toBe(0);
    expect(counts[0]).toBeGreaterThanOrEqual(2);
    expect(counts[2]).toBeGreaterThanOrEqual(2);
    // Reads go to a live one as well: the closed one's refusals are not the answer.
    for (let i = 0; i < 4; i++) {
      const list = await call("GET", `${gateway.url}/v1/runs`);
      expect(list.status, list.text).toBe(200);
    }

    const h = await call("GET", `${gateway.url}/v1/health`);
    expect(h.status, h.text).toBe(200);
    expectValid("health", h.body);
    expect(h.body.status).toBe("degraded");
    const each = coordinatorChecks(h.body);
    expect(each.map((c) => [c.url, c.status])).toEqual([
      [coords[0]!.url, "ok"],
      [coords[1]!.url, "down"],
      [coords[2]!.url, "ok"],
    ]);
    const check = h.body.checks.find((c: { name: string }) => c.name === "run-coordinator");
    expect(check).toMatchObject({ status: "degraded", message: "1 of 3 run coordinators down" });
  });

  it("takes a coordinator back once it is up again, found by the background probe", async () => {
    const c = coords[1]!;
    c.app = await startCoordinator(c.dbPath, c.port);
    // No health call here: only the gateway's own probe can bring it back into the rotation.
    await until("a new run lands on the restarted coordinator", async () => {
      const { holders } = await startRun();
      return holders[0] === 1 ? true : undefined;
    }, 15_000);
    const counts = [0, 0, 0];
    for (let i = 0; i < 3; i++) counts[(await startRun()).holders[0]!]++;
    expect(counts).toEqual([1, 1, 1]);
    const h = await call("GET", `${gateway.url}/v1/health`);
    expect(h.status, h.text).toBe(200);
    expect(h.body.status).toBe("ok");
  });

  it("fabric start run-gateway takes its coordinators from gateway.coordinators", async () => {
    const config = loadConfig({
      cwd: repoRoot,
      env: { FABRIC_GATEWAY_COORDINATORS: coords.map((c) => c.url).join(",") },
      flags: { port_base: 0, data_dir: dataDir, log_level: "silent" },
    });
    const gw = await startFabric(config, ["run-gateway"]);
    try {
      const h = await call("GET", `${gw.urls["run-gateway"]}/v1/health`);
      expect(h.status, h.text).toBe(200);
      expect(coordinatorChecks(h.body)).toEqual(coords.map((c) => expect.objectContaining({ url: c.url, status: "ok" })));
      const r = await call("POST", `${gw.urls["run-gateway"]}/v1/runs`, { run_id: "run_via_start", root_node_type_ref: echoRef, input: {} }, { prefer: "wait=10" });
      expect(r.status, r.text).toBe(200);
      expect(r.body.state).toBe("completed");
    } finally {
      await gw.close();
    }
  });

  it("answers an ErrorEnvelope when every coordinator is down, and health is down naming each", async () => {
    const urls = [`http://127.0.0.1:${await closedPort()}`, `http://127.0.0.1:${await closedPort()}`, `http://127.0.0.1:${await closedPort()}`];
    const gw = await gatewayOver(urls);
    try {
      expectEnvelope(await call("POST", `${gw.url}/v1/runs`, { root_node_type_ref: echoRef, input: {} }), 502, "upstream_unavailable");
      expectEnvelope(await call("POST", `${gw.url}/v1/runs`, { run_id: "run_all_down", root_node_type_ref: echoRef, input: {} }), 502, "upstream_unavailable");
      expectEnvelope(await call("GET", `${gw.url}/v1/runs/run_x`), 502, "upstream_unavailable");
      expectEnvelope(await call("GET", `${gw.url}/v1/runs/run_x/events`), 502, "upstream_unavailable");
      expectEnvelope(await call("POST", `${gw.url}/v1/runs/run_x:cancel`), 502, "upstream_unavailable");
      const h = await call("GET", `${gw.url}/v1/health`);
      expectEnvelope(h, 503, "unavailable");
      const health = h.body.error.details.health;
      expectValid("health", health);
      expect(health.status).toBe("down");
      expect(coordinatorChecks(health)).toEqual(urls.map((url) => expect.objectContaining({ url, status: "down" })));
    } finally {
      await gw.app.close();
    }
  });
});

describe("run gateway retries only what is safe to send again", () => {
  const opened: Array<{ close(): Promise<unknown> | void }> = [];
  afterAll(async () => {
    for (const o of opened.reverse()) await o.close();
  });

  async function server(handler: http.RequestListener): Promise<{ url: string; seen: string[] }> {
    const seen: string[] = [];
    const s = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      handler(req, res);
    });
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    opened.push({ close: () => new Promise<void>((r) => { s.closeAllConnections(); s.close(() => r()); }) });
    return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, seen };
  }

  const run = { run_id: "run_ok", state: "queued", root_node_run_id: "nr_ok", root_node_type_ref: echoRef, created_at: new Date().toISOString() };

  /** A coordinator that reads the whole request, then drops the connection without an answer. */
  const dropper = () =>
    server((req, res) => {
      req.resume();
      req.on("end", () => res.socket?.destroy());
    });
  /** A coordinator that answers every request. */
  const answerer = () =>
    server((req, res) => {
      req.resume();
      req.on("end", () => {
        if (req.url?.includes("/events")) {
          res.writeHead(200, { "content-type": "application/x-ndjson" });
          res.end(`${JSON.stringify({ run_id: "run_ok", seq: 0, type: "run_started", time: new Date().toISOString() })}\n`);
          return;
        }
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(run));
      });
    });

  it("does not send a start without run_id again after the connection dropped; with a run_id it does", async () => {
    const a = await dropper();
    const b = await answerer();
    const gw = await gatewayOver([a.url, b.url], { coordinatorDownMs: 60_000 });
    opened.push(gw.app);
    // The first request goes to the first coordinator, which took it and then went away: it may have started the run.
    expectEnvelope(await call("POST", `${gw.url}/v1/runs`, { root_node_type_ref: echoRef, input: {} }), 502, "upstream_unavailable");
    expect(a.seen).toEqual(["POST /v1/runs"]);
    expect(b.seen).toEqual([]);

    const gw2 = await gatewayOver([a.url, b.url], { coordinatorDownMs: 60_000 });
    opened.push(gw2.app);
    const r = await call("POST", `${gw2.url}/v1/runs`, { run_id: "run_ok", root_node_type_ref: echoRef, input: {} });
    expect(r.status, r.text).toBe(200);
    expect(r.body.run_id).toBe("run_ok");
    expect(a.seen).toEqual(["POST /v1/runs", "POST /v1/runs"]);
    expect(b.seen).toEqual(["POST /v1/runs"]);

    // A read is safe anywhere, and the dropped coordinator is now passed over.
    const gw3 = await gatewayOver([a.url, b.url], { coordinatorDownMs: 60_000 });
    opened.push(gw3.app);
    for (let i = 0; i < 3; i++) expect((await call("GET", `${gw3.url}/v1/runs/run_ok`)).status).toBe(200);
    expect(a.seen.filter((s) => s.startsWith("GET"))).toEqual(["GET /v1/runs/run_ok"]);
    expect(b.seen.filter((s) => s.startsWith("GET"))).toHaveLength(3);
  });

  it("sends any request on when the first coordinator refused the connection, and opens event streams on a live one", async () => {
    const refused = `http://127.0.0.1:${await closedPort()}`;
    const b = await answerer();
    const gw = await gatewayOver([refused, b.url], { coordinatorDownMs: 60_000 });
    opened.push(gw.app);
    // Refused: nothing was sent, so even a start without run_id and a cancel may go to the next one.
    const r = await call("POST", `${gw.url}/v1/runs`, { root_node_type_ref: echoRef, input: {} });
    expect(r.status, r.text).toBe(200);
    expect((await call("POST", `${gw.url}/v1/runs/run_ok:cancel`)).status).toBe(200);
    for (let i = 0; i < 2; i++) {
      const e = await call("GET", `${gw.url}/v1/runs/run_ok/events`);
      expect(e.status, e.text).toBe(200);
      expect(e.headers["content-type"]).toMatch(/^application\/x-ndjson/);
      expect(JSON.parse(e.text.trim())).toMatchObject({ run_id: "run_ok", type: "run_started" });
    }
    const h = await call("GET", `${gw.url}/v1/health`);
    // The answerer's /v1/health is not a Health document, so it counts as down too: all down.
    expect(h.status).toBe(503);
    expect(coordinatorChecks(h.body.error.details.health).map((c) => c.url)).toEqual([refused, b.url]);
  });
});

describe("gateway.coordinators configuration", () => {
  const base = { cwd: repoRoot, flags: { port_base: 0, log_level: "silent" as const } };

  it("takes the coordinators from fabric.config.json", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-gw-config-"));
    try {
      fs.writeFileSync(path.join(dir, "fabric.config.json"), JSON.stringify({ gateway: { coordinators: ["http://10.0.0.7:8081", "https://c2.example:8081/"] } }));
      expect(loadConfig({ cwd: dir, env: {} }).gateway?.coordinators).toEqual(["http://10.0.0.7:8081", "https://c2.example:8081/"]);
      fs.writeFileSync(path.join(dir, "fabric.config.json"), JSON.stringify({ gateway: { coordinators: "http://10.0.0.7:8081" } }));
      expect(() => loadConfig({ cwd: dir, env: {} })).toThrow(/gateway\.coordinators: must be array/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("takes the coordinators from the environment, comma-separated", () => {
    const config = loadConfig({ ...base, env: { FABRIC_GATEWAY_COORDINATORS: "http://10.0.0.1:8085, http://10.0.0.2:8085" } });
    expect(config.gateway?.coordinators).toEqual(["http://10.0.0.1:8085", "http://10.0.0.2:8085"]);
  });

  it("names the field of a bad coordinator URL", () => {
    expect(() => loadConfig({ ...base, env: { FABRIC_GATEWAY_COORDINATORS: "http://10.0.0.1:8085,ftp://x" } })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, env: { FABRIC_GATEWAY_COORDINATORS: "http://10.0.0.1:8085,ftp://x" } })).toThrow(/gateway\.coordinators\[1\]: "ftp:\/\/x" is not a coordinator base URL/);
    expect(() => loadConfig({ ...base, env: { FABRIC_GATEWAY_COORDINATORS: "http://[bad:8085" } })).toThrow(/gateway\.coordinators/);
    expect(() => loadConfig({ ...base, env: {}, flags: { ...base.flags, gateway: { coordinators: [] } } as never })).toThrow(/gateway\.coordinators/);
    expect(() => loadConfig({ ...base, env: { FABRIC_GATEWAY_COORDINATORS: "http://10.0.0.1:8085/api" } })).toThrow(/gateway\.coordinators\[0\]: "http:\/\/10\.0\.0\.1:8085\/api" is not a coordinator base URL/);
  });
});
