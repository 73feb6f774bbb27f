import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { request } from "undici";
import type { FastifyInstance } from "fastify";
import type { Run, RunEvent } from "@nodefabric/schemas";
import { loadConfig } from "../src/config.js";
import { startFabric, type RunningFabric } from "../src/fabric.js";
import { buildRunGateway } from "../src/services/run-gateway/index.js";
import { GatewayClient } from "../src/clients/gateway-client.js";
import { followRun } from "../src/cli/follow-run.js";

import { baseOf, call, expectEnvelope, expectValid, until } from "./support/gateway-http.js";
const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const ENDED = ["completed", "failed", "canceled"];

const echoRef = { node_type_id: "demo.echo", version: "1.0.0" };
const sleepRef = { node_type_id: "demo.sleep", version: "1.0.0" };
const failRef = { node_type_id: "demo.fail", version: "1.0.0" };

async function gatewayFor(coordinatorUrl: string, extra: { requestTimeoutMs?: number; healthTimeoutMs?: number } = {}): Promise<{ app: FastifyInstance; url: string }> {
  const app = await buildRunGateway({ logger: false, coordinatorUrl, ...extra });
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

/** Reads an NDJSON response line by line, as it arrives. */
class LineReader {
  private buffered = "";
  private readonly iterator: AsyncIterator<string>;
  constructor(body: AsyncIterable<unknown> & { setEncoding(e: string): unknown }) {
    body.setEncoding("utf8");
    this.iterator = (body as AsyncIterable<string>)[Symbol.asyncIterator]();
  }
  /** The next line, or undefined at the end of the stream. */
  async next(): Promise<string | undefined> {
    for (;;) {
      const nl = this.buffered.indexOf("\n");
      if (nl >= 0) {
        const line = this.buffered.slice(0, nl);
        this.buffered = this.buffered.slice(nl + 1);
        return line;
      }
      const chunk = await this.iterator.next();
      if (chunk.done) return this.buffered ? this.buffered : undefined;
      this.buffered += chunk.value;
    }
  }
}

describe("run gateway over a real fabric", () => {
  let fabric: RunningFabric;
  let gateway: { app: FastifyInstance; url: string };
  let coordinatorUrl: string;
  let client: GatewayClient;

  beforeAll(async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-"));
    const config = loadConfig({
      cwd: repoRoot,
      env: {},
      flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"] },
    });
    fabric = await startFabric(config, ["node-registry", "pdp", "selection", "atomic-executor", "run-coordinator"]);
    coordinatorUrl = fabric.urls["run-coordinator"]!;
    gateway = await gatewayFor(coordinatorUrl);
    client = new GatewayClient(gateway.url);
    // The executor publishes the demo node types once it listens.
    await until("demo node types published", async () => {
      const r = await call("GET", `${fabric.urls["node-registry"]}/v1/node-types/demo.sleep`);
      return r.status === 200 ? true : undefined;
    });
  });

  afterAll(async () => {
    await client?.close();
    await gateway?.app.close();
    await fabric?.close();
  });

  describe("POST /v1/runs", () => {
    it("runs demo.echo to completion and answers its outputs", async () => {
      const started = await call("POST", `${gateway.url}/v1/runs`, { root_node_type_ref: echoRef, input: { a: 1, b: ["x"] } });
      expect(started.status, started.text).toBe(200);
      expectValid("run", started.body);
      expect(["queued", "running"]).toContain(started.body.state);
      expect(started.headers["preference-applied"]).toBeUndefined();
      const runId = started.body.run_id as string;

      const ended = await until("echo run ended", async () => {
        const r = await call("GET", `${gateway.url}/v1/runs/${runId}`);
        return ENDED.includes(r.body?.state) ? r : undefined;
      });
      expect(ended.status).toBe(200);
      expectValid("run", ended.body);
      expect(ended.body).toMatchObject({ run_id: runId, state: "completed", root_node_run_id: started.body.root_node_run_id });
      expect(ended.body.extensions["nodefabric.outputs"]).toEqual({ echo: { a: 1, b: ["x"] } });
    });

    it("holds the answer with Prefer: wait=5 and answers the ended run with Preference-Applied", async () => {
      const t0 = Date.now();
      const r = await call("POST", `${gateway.url}/v1/runs`, { root_node_type_ref: sleepRef, input: { ms: 300, value: "v" } }, { prefer: "wait=5" });
      expect(r.status, r.text).toBe(200);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
      expect(String(r.headers["preference-applied"])).toMatch(/^wait/);
      expectValid("run", r.body);
      expect(r.body.state).toBe("completed");
      expect(r.body.extensions["nodefabric.outputs"]).toEqual({ slept_ms: 300, value: "v" });
    });

    it("answers a run that fails with its error (demo.fail)", async () => {
      const { run, preferenceApplied } = await client.startRun(
        { root_node_type_ref: failRef, input: { code: "boom", message: "failed on purpose", retryable: false } },
        { waitSeconds: 5 },
      );
      expect(preferenceApplied).toMatch(/^wait/);
      expectValid("run", run);
      expect(run.state).toBe("failed");
      expect(run.extensions?.["nodefabric.error"]).toMatchObject({ code: "boom", message: "failed on purpose" });
      const nodeRuns = await call("GET", `${gateway.url}/v1/runs/${run.run_id}/node-runs`);
      expect(nodeRuns.status).toBe(200);
      expectValid("node_run_list", nodeRuns.body);
      expect(nodeRuns.body).toHaveLength(1);
      expect(nodeRuns.body[0]).toMatchObject({ node_run_id: run.root_node_run_id, state: "failed" });
      expect(nodeRuns.body[0].extensions["nodefabric.error"].code).toBe("boom");
      const nodeRun = await call("GET", `${gateway.url}/v1/node-runs/${run.root_node_run_id}`);
      expect(nodeRun.status).toBe(200);
      expectValid("node_run", nodeRun.body);
      expect(nodeRun.body).toEqual(nodeRuns.body[0]);
    });

    it("refuses a bad body at the edge with 400 and starts nothing", async () => {
      const before = (await client.listRuns({ limit: 1000 })).items.length;
      const missing = await call("POST", `${gateway.url}/v1/runs`, { root_node_type_ref: echoRef });
      expectEnvelope(missing, 400, "invalid_request");
      expect(missing.body.error.details.errors).toContainEqual(expect.objectContaining({ path: "/input", message: "is required" }));
      const unknown = await call("POST", `${gateway.url}/v1/runs`, { root_node_type_ref: echoRef, input: {}, colour: "red" });
      expectEnvelope(unknown, 400, "invalid_request");
      expect(unknown.body.error.details.errors).toContainEqual(expect.objectContaining({ path: "/colour" }));
      const badId = await call("POST", `${gateway.url}/v1/runs`, { root_node_type_ref: echoRef, input: {}, run_id: "../etc" });
      expectEnvelope(badId, 400, "invalid_request");
      const notJson = await call("POST", `${gateway.url}/v1/runs`, "{ nope");
      expectEnvelope(notJson, 400, "invalid_request");
      const notObject = await call("POST", `${gateway.url}/v1/runs`, []);
      expectEnvelope(notObject, 400, "invalid_request");
      expect((await client.listRuns({ limit: 1000 })).items.length).toBe(before);
    });

    it("passes the coordinator's refusals back with their status and envelope", async () => {
      const unknownType = await call("POST", `${gateway.url}/v1/runs`, { root_node_type_ref: { node_type_id: "no.such.type", version: "1.0.0" }, input: {} });
      expect(unknownType.status).toBeGreaterThanOrEqual(400);
      expect(unknownType.status).toBeLessThan(500);
      expectValid("error_envelope", unknownType.body);
      const direct = await call("POST", `${coordinatorUrl}/v1/runs`, { root_node_type_ref: { node_type_id: "no.such.type", version: "1.0.0" }, input: {} });
      expect(unknownType.status).toBe(direct.status);
      expect(unknownType.body.error.code).toBe(direct.body.error.code);

      // A client-chosen run id reused with another request is a conflict the coordinator decides.
      const runId = `gw-${Date.now()}`;
      const first = await call("POST", `${gateway.url}/v1/runs`, { run_id: runId, root_node_type_ref: echoRef, input: { n: 1 } }, { prefer: "wait=5" });
      expect(first.status).toBe(200);
      expect(first.body.run_id).toBe(runId);
      const again = await call("POST", `${gateway.url}/v1/runs`, { run_id: runId, root_node_type_ref: echoRef, input: { n: 2 } });
      expectEnvelope(again, 409, "run_already_exists");
    });
  });

  describe("reads and cancel", () => {
    it("answers 404 run_not_found, node_run_not_found and approval_not_found from the coordinator", async () => {
      expectEnvelope(await call("GET", `${gateway.url}/v1/runs/run_doesnotexist`), 404, "run_not_found");
      expectEnvelope(await call("POST", `${gateway.url}/v1/runs/run_doesnotexist:cancel`), 404, "run_not_found");
      expectEnvelope(await call("GET", `${gateway.url}/v1/runs/run_doesnotexist/node-runs`), 404, "run_not_found");
      expectEnvelope(await call("GET", `${gateway.url}/v1/runs/run_doesnotexist/events`), 404, "run_not_found");
      expectEnvelope(await call("GET", `${gateway.url}/v1/node-runs/nr_doesnotexist`), 404, "node_run_not_found");
      expectEnvelope(await call("POST", `${gateway.url}/v1/approvals/apr_doesnotexist:approve`), 404, "approval_not_found");
      expectEnvelope(await call("POST", `${gateway.url}/v1/approvals/apr_doesnotexist:reject`), 404, "approval_not_found");
      expectEnvelope(await call("GET", `${gateway.url}/v1/nothing-here`), 404, "route_not_found");
      expectEnvelope(await call("DELETE", `${gateway.url}/v1/runs`), 405, "method_not_allowed");
    });

    it("cancels a run while demo.sleep runs, and a second cancel returns it unchanged", async () => {
      const { run } = await client.startRun({ root_node_type_ref: sleepRef, input: { ms: 20_000 } });
      await until("sleep running", async () => {
        const nr = await client.getNodeRun(run.root_node_run_id);
        return nr.state === "running" ? true : undefined;
      });
      const t0 = Date.now();
      const canceled = await call("POST", `${gateway.url}/v1/runs/${run.run_id}:cancel`);
      expect(canceled.status, canceled.text).toBe(200);
      expectValid("run", canceled.body);
      expect(canceled.body.state).toBe("canceled");
      expect(canceled.body.extensions["nodefabric.error"].code).toBe("canceled");
      expect(Date.now() - t0).toBeLessThan(5_000);
      const root = await client.getNodeRun(run.root_node_run_id);
      expect(root.state).toBe("canceled");
      const again = await call("POST", `${gateway.url}/v1/runs/${run.run_id}:cancel`);
      expect(again.status).toBe(200);
      expect(again.body).toEqual(canceled.body);
    });

    it("lists runs, filtered by state and paged with X-Next-Page-Token", async () => {
      const all = await call("GET", `${gateway.url}/v1/runs`);
      expect(all.status).toBe(200);
      expectValid("run_list", all.body);
      expect(all.body.length).toBeGreaterThanOrEqual(3);
      const completed = await call("GET", `${gateway.url}/v1/runs?state=completed`);
      expect(completed.status).toBe(200);
      expect(completed.body.length).toBeGreaterThanOrEqual(1);
      expect(completed.body.every((r: Run) => r.state === "completed")).toBe(true);

      const first = await call("GET", `${gateway.url}/v1/runs?limit=1`);
      expect(first.status).toBe(200);
      expect(first.body).toHaveLength(1);
      const token = first.headers["x-next-page-token"];
      expect(typeof token).toBe("string");
      const second = await call("GET", `${gateway.url}/v1/runs?limit=1&page_token=${token}`);
      expect(second.status).toBe(200);
      expect(second.body).toHaveLength(1);
      expect(second.body[0].run_id).not.toBe(first.body[0].run_id);
      const page = await client.listRuns({ limit: 1, page_token: String(token) });
      expect(page.items).toEqual(second.body);
      expect(page.nextPageToken).toBeDefined();
    });

    it("refuses bad query strings at the edge with 400", async () => {
      for (const q of ["limit=0", "limit=5000", "limit=abc", "state=sleeping", "page_token=%20%21", "colour=red"]) {
        const r = await call("GET", `${gateway.url}/v1/runs?${q}`);
        expectEnvelope(r, 400, "invalid_request");
      }
      const { run } = await client.startRun({ root_node_type_ref: echoRef, input: {} }, { waitSeconds: 5 });
      for (const q of ["after_seq=-2", "after_seq=x", "follow=maybe", "since=1"]) {
        const r = await call("GET", `${gateway.url}/v1/runs/${run.run_id}/events?${q}`);
        expectEnvelope(r, 400, "invalid_request");
      }
    });
  });

  describe("GET /v1/runs/{run_id}/events", () => {
    it("pipes the stream live: the first events arrive while the run still runs, the rest as it ends", async () => {
      const { run } = await client.startRun({ root_node_type_ref: sleepRef, input: { ms: 1500 } });
      const res = await request(`${gateway.url}/v1/runs/${run.run_id}/events`);
      expect(res.statusCode).toBe(200);
      expect(res.headers["content-type"]).toMatch(/^application\/x-ndjson/);
      const reader = new LineReader(res.body);
      const events: RunEvent[] = [];
      for (;;) {
        const line = await reader.next();
        expect(line, "stream ended before the node run started").toBeDefined();
        const e = JSON.parse(line!) as RunEvent;
        events.push(e);
        if (e.type === "node_run_started") break;
      }
      // Streamed, not buffered: the run had not ended when these lines reached us.
      const meanwhile = await client.getRun(run.run_id);
      expect(meanwhile.state).toBe("running");
      expect(events.some((e) => e.type === "run_completed")).toBe(false);

      for (;;) {
        const line = await reader.next();
        if (line === undefined) break;
        if (line) events.push(JSON.parse(line));
      }
      for (const e of events) expectValid("run_event", e);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
      expect(events[0].type).toBe("run_started");
      const last = events[events.length - 1];
      expect(last).toMatchObject({ type: "run_completed", data: { state: "completed" } });
      expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(["node_run_created", "node_run_started", "node_run_completed"]));

      // Resumed after a seq: only what came later.
      const k = 2;
      const resumed = await call("GET", `${gateway.url}/v1/runs/${run.run_id}/events?after_seq=${k}`);
      expect(resumed.status).toBe(200);
      const later = resumed.text.trim().split("\n").map((l) => JSON.parse(l) as RunEvent);
      expect(later).toEqual(events.filter((e) => e.seq > k));

      // follow=false: what exists now, the same for an ended run.
      const snapshot = await call("GET", `${gateway.url}/v1/runs/${run.run_id}/events?follow=false`);
      expect(snapshot.text.trim().split("\n").map((l) => JSON.parse(l))).toEqual(events);
    });

    it("gives the same events through GatewayClient.events and followRun", async () => {
      const { run } = await client.startRun({ root_node_type_ref: echoRef, input: { via: "client" } }, { waitSeconds: 5 });
      const direct: RunEvent[] = [];
      for await (const e of client.events(run.run_id)) direct.push(e);
      expect(direct[direct.length - 1].type).toBe("run_completed");
      const followed: RunEvent[] = [];
      await followRun(client, run.run_id, (e) => followed.push(e));
      expect(followed).toEqual(direct);
      const tail: RunEvent[] = [];
      for await (const e of client.events(run.run_id, { afterSeq: direct.length - 2, follow: false })) tail.push(e);
      expect(tail).toEqual(direct.slice(-1));
      await expect(async () => {
        for await (const _ of client.events("run_doesnotexist")) void _;
      }).rejects.toMatchObject({ code: "run_not_found", statusCode: 404 });
    });

    it("aborts the upstream stream when the client goes away", async () => {
      const followers = async () => {
        const h = await call("GET", `${coordinatorUrl}/v1/health`);
        return h.body.checks.find((c: { name: string }) => c.name === "dispatch").details.followers as number;
      };
      const baseline = await followers();
      const { run } = await client.startRun({ root_node_type_ref: sleepRef, input: { ms: 20_000 } });
      const ac = new AbortController();
      const res = await request(`${gateway.url}/v1/runs/${run.run_id}/events`, { signal: ac.signal });
      const reader = new LineReader(res.body);
      expect(JSON.parse((await reader.next())!).type).toBe("run_started");
      await until("the coordinator follows the run for the gateway", async () => ((await followers()) > baseline ? true : undefined));
      ac.abort();
      await until("the coordinator stops following once the client left", async () => ((await followers()) === baseline ? true : undefined));
      await client.cancelRun(run.run_id);
    });

    it("closes promptly with live streams open, ending them", async () => {
      const own = await gatewayFor(coordinatorUrl);
      const { run } = await client.startRun({ root_node_type_ref: sleepRef, input: { ms: 20_000 } });
      const res = await request(`${own.url}/v1/runs/${run.run_id}/events`);
      const reader = new LineReader(res.body);
      expect(JSON.parse((await reader.next())!).type).toBe("run_started");
      const t0 = Date.now();
      await own.app.close();
      expect(Date.now() - t0).toBeLessThan(3_000);
      const rest = (async () => {
        while ((await reader.next()) !== undefined) {
          // drain until the gateway's end of the stream
        }
      })();
      await rest.catch(() => undefined);
      expect((await client.getRun(run.run_id)).state).toBe("running");
      await client.cancelRun(run.run_id);
    });
  });

  describe("health", () => {
    it("reflects the coordinator's health in the run-coordinator check", async () => {
      const own = await call("GET", `${coordinatorUrl}/v1/health`);
      const h = await call("GET", `${gateway.url}/v1/health`);
      expect(h.status).toBe(200);
      expectValid("health", h.body);
      const check = h.body.checks.find((c: { name: string }) => c.name === "run-coordinator");
      expect(check).toMatchObject({ name: "run-coordinator", status: own.body.status, details: { url: coordinatorUrl } });
      expect(h.body.status).toBe(own.body.status);
      const v = await call("GET", `${gateway.url}/v1/version`);
      expectValid("version_info", v.body);
      expect(v.body.service_name).toBe("run-gateway");
    });

    it("names its fabric's registry when it is told it, so a client given the gateway alone finds the registry", async () => {
      // A gateway built without a registry URL (an older deployment) names none.
      expect((await call("GET", `${gateway.url}/v1/health`)).body.extensions).not.toHaveProperty(["nodefabric.registry_url"]);
      expect(await client.registryUrl()).toBeUndefined();

      const registryUrl = fabric.urls["node-registry"]!;
      const told = await buildRunGateway({ logger: false, coordinatorUrl, registryUrl });
      await told.listen({ host: "127.0.0.1", port: 0 });
      const toldClient = new GatewayClient(baseOf(told));
      try {
        const h = await call("GET", `${baseOf(told)}/v1/health`);
        expectValid("health", h.body);
        expect(h.body.extensions).toMatchObject({ "nodefabric.service": "run-gateway", "nodefabric.registry_url": registryUrl });
        expect(await toldClient.registryUrl()).toBe(registryUrl);
      } finally {
        await toldClient.close();
        await told.close();
      }
    });
  });
});

describe("run gateway when the coordinator misbehaves", () => {
  const opened: Array<{ close(): Promise<unknown> | void }> = [];
  afterAll(async () => {
    for (const o of opened.reverse()) await o.close();
  });

  async function fakeCoordinator(handler: http.RequestListener): Promise<string> {
    const server = http.createServer(handler);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    opened.push({ close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) });
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it("answers 502 upstream_unavailable when the coordinator cannot be reached, and health goes down", async () => {
    const gw = await gatewayFor(`http://127.0.0.1:${await closedPort()}`);
    opened.push(gw.app);
    expectEnvelope(await call("GET", `${gw.url}/v1/runs/run_x`), 502, "upstream_unavailable");
    expectEnvelope(await call("POST", `${gw.url}/v1/runs`, { root_node_type_ref: echoRef, input: {} }), 502, "upstream_unavailable");
    expectEnvelope(await call("POST", `${gw.url}/v1/runs/run_x:cancel`), 502, "upstream_unavailable");
    expectEnvelope(await call("GET", `${gw.url}/v1/runs/run_x/events`), 502, "upstream_unavailable");
    expectEnvelope(await call("GET", `${gw.url}/v1/runs`), 502, "upstream_unavailable");
    // Validation happens before forwarding: a bad request is still a 400, not a 502.
    expectEnvelope(await call("POST", `${gw.url}/v1/runs`, { input: {} }), 400, "invalid_request");
    expectEnvelope(await call("GET", `${gw.url}/v1/runs?limit=0`), 400, "invalid_request");

    const h = await call("GET", `${gw.url}/v1/health`);
    expectEnvelope(h, 503, "unavailable");
    const health = h.body.error.details.health;
    expectValid("health", health);
    expect(health.status).toBe("down");
    expect(health.checks).toContainEqual(expect.objectContaining({ name: "run-coordinator", status: "down" }));
  });

  it("answers 504 upstream_timeout when the coordinator does not answer in time", async () => {
    const url = await fakeCoordinator(() => {
      // never answers
    });
    const gw = await gatewayFor(url, { requestTimeoutMs: 300, healthTimeoutMs: 300 });
    opened.push(gw.app);
    expectEnvelope(await call("GET", `${gw.url}/v1/runs/run_x`), 504, "upstream_timeout");
    const h = await call("GET", `${gw.url}/v1/health`);
    expect(h.status).toBe(503);
    expect(h.body.error.details.health.checks[0]).toMatchObject({ name: "run-coordinator", status: "down" });
  });

  it("relays status, envelope and Retry-After; an answer without an envelope becomes a 502", async () => {
    const url = await fakeCoordinator((req, res) => {
      if (req.url === "/v1/health") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ status: "degraded", time: new Date().toISOString() }));
      } else if (req.url?.startsWith("/v1/runs/busy")) {
        res.writeHead(429, { "content-type": "application/json", "retry-after": "7" });
        res.end(JSON.stringify({ error: { code: "rate_limited", message: "slow down", details: { limit: 10 }, retryable: true } }));
      } else {
        res.writeHead(500, { "content-type": "text/html" }).end("<h1>oops</h1>");
      }
    });
    const gw = await gatewayFor(url);
    opened.push(gw.app);
    const busy = await call("GET", `${gw.url}/v1/runs/busy`);
    expectEnvelope(busy, 429, "rate_limited");
    expect(busy.headers["retry-after"]).toBe("7");
    expect(busy.body).toEqual({ error: { code: "rate_limited", message: "slow down", details: { limit: 10 }, retryable: true } });
    const broken = await call("GET", `${gw.url}/v1/runs/other`);
    expectEnvelope(broken, 502, "upstream_unavailable");
    expect(broken.text).not.toContain("oops");
    const h = await call("GET", `${gw.url}/v1/health`);
    expect(h.status).toBe(200);
    expect(h.body.status).toBe("degraded");
    expect(h.body.checks[0]).toMatchObject({ name: "run-coordinator", status: "degraded" });
  });

  it("forwards Authorization and Prefer, and gives the coordinator the time a wait needs", async () => {
    const seen: http.IncomingHttpHeaders[] = [];
    const url = await fakeCoordinator((req, res) => {
      seen.push(req.headers);
      const run = { run_id: "run_fake", state: "completed", root_node_run_id: "nr_fake" };
      // Answers much later than the gateway's ordinary request timeout (undici's timers are coarse), as a held
      // `Prefer: wait` does.
      const timer = setTimeout(() => res.writeHead(200, { "content-type": "application/json", "preference-applied": "wait=3" }).end(JSON.stringify(run)), 2500);
      res.on("close", () => clearTimeout(timer));
    });
    const gw = await gatewayFor(url, { requestTimeoutMs: 300 });
    opened.push(gw.app);
    const r = await call("POST", `${gw.url}/v1/runs`, { root_node_type_ref: echoRef, input: {} }, { prefer: "wait=3", authorization: "Bearer abc.def.ghi" });
    expect(r.status, r.text).toBe(200);
    expect(r.headers["preference-applied"]).toBe("wait=3");
    expect(r.body.run_id).toBe("run_fake");
    expect(seen[0].authorization).toBe("Bearer abc.def.ghi");
    expect(seen[0].prefer).toBe("wait=3");
    // Without a wait the same slowness is a timeout.
    expectEnvelope(await call("POST", `${gw.url}/v1/runs`, { root_node_type_ref: echoRef, input: {} }), 504, "upstream_timeout");
  });

  it("cuts the client stream when the coordinator's stream breaks off, and relays its refusals", async () => {
    const url = await fakeCoordinator((req, res) => {
      if (req.url?.startsWith("/v1/runs/gone/events")) {
        res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { code: "run_not_found", message: "no run gone" } }));
        return;
      }
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(`${JSON.stringify({ run_id: "run_b", seq: 0, type: "run_started", time: new Date().toISOString() })}\n`);
      setTimeout(() => res.destroy(), 100);
    });
    const gw = await gatewayFor(url);
    opened.push(gw.app);
    expectEnvelope(await call("GET", `${gw.url}/v1/runs/gone/events`), 404, "run_not_found");
    const c = new GatewayClient(gw.url);
    opened.push(c);
    const got: RunEvent[] = [];
    await expect(async () => {
      for await (const e of c.events("run_b")) got.push(e);
    }).rejects.toMatchObject({ code: "upstream_unavailable" });
    expect(got.map((e) => e.type)).toEqual(["run_started"]);
  });
});
