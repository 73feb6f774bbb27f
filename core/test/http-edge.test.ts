/**
 * The HTTP edge of every service, over real loopback HTTP: every refusal is an ErrorEnvelope (bad percent-encoding,
 * over-long path ids, oversized headers, malformed HTTP, JSON nested too deep), a 413 reaches a client still sending
 * its body, and every service has limits by default: requests in flight, event streams, timeouts against slow clients.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import net from "node:net";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Pool, request } from "undici";
import type { FastifyInstance } from "fastify";
import { validatorFor } from "@nodefabric/schemas";
import { createService } from "../src/http/service.js";
import { exceedsJsonDepth } from "../src/http/validation.js";
import { loadConfig, ConfigError } from "../src/config.js";
import { startFabric, type RunningFabric } from "../src/fabric.js";
import type { ServiceName } from "../src/http/service.js";

const isEnvelope = validatorFor("error_envelope");
const repo = fileURLToPath(new URL("../..", import.meta.url));

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

async function call(url: string, init: { method?: string; body?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  const res = await request(url, { method: (init.method ?? "GET") as "GET", body: init.body, headers: init.headers });
  const text = await res.body.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    // left as text: the assertion on the envelope says what it was
  }
  return { status: res.statusCode, headers: res.headers, body };
}

function expectEnvelope(a: { status: number; body: any }, status: number, code: string): void { // eslint-disable-line @typescript-eslint/no-explicit-any
  expect(a.status, JSON.stringify(a.body)).toBe(status);
  expect(isEnvelope(a.body), JSON.stringify(a.body)).toBe(true);
  expect(a.body.error.code).toBe(code);
}

/** A JSON text nesting arrays `depth` levels deep (the outermost included). */
const deepArrays = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

function portOf(url: string): number {
  return Number(new URL(url).port);
}

function portOfApp(app: FastifyInstance): number {
  const addr = app.server.address();
  return typeof addr === "object" && addr ? addr.port : 0;
}

/** What a raw connection saw: the bytes it read, the first error, and whether (and when) the server closed it. */
interface RawResult {
  text: string;
  error?: string;
  closed: boolean;
  closedAfterMs?: number;
}

/** Parses the status and JSON body of a raw HTTP/1.1 answer. */
function parseRaw(text: string): { status: number; headers: string; body: any } { // eslint-disable-line @typescript-eslint/no-explicit-any
  const m = /^HTTP\/1\.1 (\d{3})[^\r\n]*\r\n([\s\S]*?)\r\n\r\n([\s\S]*)$/.exec(text);
  if (!m) return { status: 0, headers: "", body: text };
  let body: unknown = m[3];
  try {
    body = JSON.parse(m[3]);
  } catch {
    // not JSON
  }
  return { status: Number(m[1]), headers: m[2].toLowerCase(), body };
}

/**
 * Writes a request's head and then `bodyBytes` of body as fast as the socket takes them, without reading first (as a
 * client that sends its whole body before looking at the answer does), then reads whatever the server answered.
 */
function sendWholeBody(port: number, head: string, bodyBytes: number, chunked: boolean): Promise<RawResult> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    const started = Date.now();
    const r: RawResult = { text: "", closed: false };
    s.on("data", (d) => (r.text += d.toString("latin1")));
    s.on("error", (e: NodeJS.ErrnoException) => (r.error ??= e.code ?? e.message));
    s.on("close", () => {
      r.closed = true;
      r.closedAfterMs = Date.now() - started;
      clearTimeout(guard);
      resolve(r);
    });
    const guard = setTimeout(() => s.destroy(), 10_000);
    s.write(head);
    const piece = Buffer.alloc(16 * 1024, 0x20);
    const chunk = chunked ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")]) : piece;
    let sent = 0;
    const pump = () => {
      while (!s.destroyed && sent < bodyBytes) {
        sent += piece.length;
        if (!s.write(chunk)) {
          s.once("drain", pump);
          return;
        }
      }
      if (!s.destroyed) s.end(chunked ? "0\r\n\r\n" : "");
    };
    pump();
  });
}

/** Opens a connection, writes `data` (a string, or pieces sent `everyMs` apart), and reports what happened within `ms`. */
function rawExchange(port: number, data: string | string[], ms: number, everyMs = 0): Promise<RawResult> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: "127.0.0.1" });
    const started = Date.now();
    const r: RawResult = { text: "", closed: false };
    let timer: NodeJS.Timeout | undefined;
    s.on("data", (d) => (r.text += d.toString("latin1")));
    s.on("error", (e: NodeJS.ErrnoException) => (r.error ??= e.code ?? e.message));
    s.on("close", () => {
      r.closed = true;
      r.closedAfterMs = Date.now() - started;
      clearInterval(timer);
      clearTimeout(guard);
      resolve(r);
    });
    const guard = setTimeout(() => {
      clearInterval(timer);
      s.destroy();
      r.closed = false;
      resolve({ ...r, closed: false });
    }, ms);
    if (typeof data === "string") {
      s.write(data);
    } else {
      let i = 0;
      timer = setInterval(() => {
        if (s.destroyed || i >= data.length) return;
        s.write(data[i++]);
      }, everyMs);
    }
  });
}

function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

// ------------------------------------------------------------------------------------------------ all seven services

/** A route of each service with an id in its path, and a route taking a JSON body. */
const EDGES: Record<ServiceName, { idPath: (id: string) => [string, string]; post: string }> = {
  "run-gateway": { idPath: (id) => ["GET", `/v1/runs/${id}`], post: "/v1/runs" },
  "run-coordinator": { idPath: (id) => ["GET", `/v1/node-runs/${id}`], post: "/v1/node-runs" },
  "atomic-executor": { idPath: (id) => ["POST", `/v1/atomic-node-runs/${id}:cancel`], post: "/v1/atomic-node-runs:execute" },
  "composite-executor": { idPath: (id) => ["POST", `/v1/composite-node-runs/${id}:cancel`], post: "/v1/composite-node-runs:begin" },
  "node-registry": { idPath: (id) => ["GET", `/v1/node-types/${id}/versions`], post: "/v1/node-types" },
  selection: { idPath: (id) => ["GET", `/v1/candidate-sets/${id}`], post: "/v1/candidate-sets" },
  pdp: { idPath: (id) => ["POST", `/v1/policy${id}:decide`], post: "/v1/policy:decide" },
};

describe("every service answers what it refuses with an ErrorEnvelope", () => {
  let fabric: RunningFabric;

  beforeAll(async () => {
    const config = loadConfig({ cwd: repo, env: {}, flags: { port_base: 0, data_dir: tempDir("nf-edge-data-"), log_level: "silent", handlers: ["@nodefabric/handler-demo"] } });
    fabric = await startFabric(config);
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  it("refuses malformed percent-encoding and invalid UTF-8 in the path with 400 invalid_request", async () => {
    for (const s of fabric.services) {
      for (const bad of ["%ZZ", "%C3%28", "%E0%A4%A", "abc%"]) {
        const [method, p] = EDGES[s.name].idPath(bad);
        const a = await call(s.url + p, { method });
        expectEnvelope(a, 400, "invalid_request");
        expect(a.body.error.details.errors).toEqual([expect.objectContaining({ path: "/" })]);
      }
    }
  });

  it("refuses a path id longer than the router takes with 400 invalid_request, not fastify's 414", async () => {
    for (const s of fabric.services) {
      const [method, p] = EDGES[s.name].idPath("a".repeat(2_000));
      const a = await call(s.url + p, { method });
      if (s.name === "pdp") {
        // The PDP has no route with an id: a long path is just an unknown one.
        expectEnvelope(a, 404, "route_not_found");
        continue;
      }
      expectEnvelope(a, 400, "invalid_request");
      expect(a.body.error.message).toMatch(/longer than 512/);
    }
  });

  it("refuses oversized headers with 431 and an envelope", async () => {
    for (const s of fabric.services) {
      const a = await call(`${s.url}/v1/version`, { headers: { "x-padding": "a".repeat(32 * 1024) } });
      expectEnvelope(a, 431, "invalid_request");
      expect(a.headers["content-type"]).toMatch(/^application\/json/);
      // The service is fine afterwards.
      expect((await call(`${s.url}/v1/version`)).status).toBe(200);
    }
  });

  it("refuses malformed HTTP (broken chunked framing) with 400 and an envelope", async () => {
    for (const s of fabric.services) {
      const r = await rawExchange(
        portOf(s.url),
        `POST ${EDGES[s.name].post} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nnot-a-chunk-size\r\n`,
        3_000,
      );
      const a = parseRaw(r.text);
      expectEnvelope(a, 400, "invalid_request");
      expect(r.closed).toBe(true);
    }
  });

  it("refuses a JSON body nested 100,000 levels deep with 400 invalid_request, and keeps serving", async () => {
    const deep = `{"input":{"a":${deepArrays(100_000)}}}`;
    for (const s of fabric.services) {
      const a = await call(s.url + EDGES[s.name].post, { method: "POST", body: deep, headers: { "content-type": "application/json" } });
      expectEnvelope(a, 400, "invalid_request");
      expect(a.body.error.message).toMatch(/deeper than 128 levels/);
      const objects = `{"input":${'{"a":'.repeat(50_000)}1${"}".repeat(50_000)}}`;
      const b = await call(s.url + EDGES[s.name].post, { method: "POST", body: objects, headers: { "content-type": "application/json" } });
      expectEnvelope(b, 400, "invalid_request");
      expect((await call(`${s.url}/v1/health`)).status).toBe(200);
    }
  });

  it("runs a run whose input nests as deep as the default limit allows", async () => {
    // 128 levels in all: the request object, `input`, and 126 levels of arrays.
    const body = `{"root_node_type_ref":{"node_type_id":"demo.echo","version":"1.0.0"},"input":{"a":${deepArrays(126)}}}`;
    const a = await call(`${fabric.urls["run-gateway"]}/v1/runs`, { method: "POST", body, headers: { "content-type": "application/json", prefer: "wait=10" } });
    expect(a.status, JSON.stringify(a.body)).toBe(200);
    expect(a.body.state).toBe("completed");
    const over = `{"root_node_type_ref":{"node_type_id":"demo.echo","version":"1.0.0"},"input":{"a":${deepArrays(127)}}}`;
    expectEnvelope(await call(`${fabric.urls["run-gateway"]}/v1/runs`, { method: "POST", body: over, headers: { "content-type": "application/json" } }), 400, "invalid_request");
  });
});

// ------------------------------------------------------------------------------------------------ JSON depth

describe("the JSON depth limit", () => {
  it("counts only brackets outside strings, escapes included, without recursion", () => {
    expect(exceedsJsonDepth('{"a":[1,{"b":2}]}', 3)).toBe(false);
    expect(exceedsJsonDepth('{"a":[1,{"b":[]}]}', 3)).toBe(true);
    expect(exceedsJsonDepth('{"a":"[[[[[[[[[[{{{{{{{{{{{{"}', 1)).toBe(false);
    expect(exceedsJsonDepth('{"a":"\\"[[[[[[[[[[[[[[","b":"\\\\"}', 1)).toBe(false);
    expect(exceedsJsonDepth('{"a":"\\\\",  "b":[[[[[[[[[]]]]]]]]]}', 4)).toBe(true);
    expect(exceedsJsonDepth(deepArrays(1_000_000), 128)).toBe(true);
    expect(exceedsJsonDepth(`[${'"x",'.repeat(100_000)}1]`, 1)).toBe(false);
  });

  it("is a service option: at the limit a body is parsed, past it refused", async () => {
    const app = createService({ name: "pdp", limits: { maxJsonDepth: 4 } });
    app.post("/v1/echo", async (req) => ({ got: req.body }));
    await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const base = `http://127.0.0.1:${portOfApp(app)}`;
      const post = (body: string) => call(`${base}/v1/echo`, { method: "POST", body, headers: { "content-type": "application/json" } });
      const ok = await post('{"a":[[{"b":"[[[[[[{{{{"}]]}');
      expect(ok.status).toBe(200);
      expect(ok.body.got).toEqual({ a: [[{ b: "[[[[[[{{{{" }]] });
      const refused = await post('{"a":[[{"b":[]}]]}');
      expectEnvelope(refused, 400, "invalid_request");
      expect(refused.body.error.details).toMatchObject({ max_depth: 4, errors: [{ path: "/", message: "nests objects and arrays deeper than 4 levels" }] });
    } finally {
      await app.close();
    }
  });
});

// ------------------------------------------------------------------------------------------------ 413

describe("a body over the limit", () => {
  let app: FastifyInstance;
  let port: number;
  beforeAll(async () => {
    app = createService({ name: "run-coordinator", limits: { maxBodyBytes: 64 * 1024 } });
    app.post("/v1/echo", async (req) => ({ got: req.body }));
    await app.listen({ host: "127.0.0.1", port: 0 });
    port = portOfApp(app);
  });
  afterAll(async () => {
    await app.close();
  });

  for (const [what, head, chunked] of [
    ["chunked, without a length", "Transfer-Encoding: chunked", true],
    ["announced by a large Content-Length", `Content-Length: ${8 * 1024 * 1024}`, false],
  ] as const) {
    it(`(${what}) is answered 413 with an envelope, which a client still sending its body reads instead of a reset`, async () => {
      const r = await sendWholeBody(port, `POST /v1/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n${head}\r\n\r\n`, 8 * 1024 * 1024, chunked);
      expect(r.error).toBeUndefined();
      const a = parseRaw(r.text);
      expectEnvelope(a, 413, "payload_too_large");
      expect(a.headers).toMatch(/connection: close/);
      expect(r.closed).toBe(true);
    });
  }

  it("reaches an undici client streaming its body", async () => {
    async function* body() {
      for (let i = 0; i < 256; i++) {
        yield Buffer.alloc(16 * 1024, 0x20);
        if (i % 16 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
      }
    }
    const res = await request(`http://127.0.0.1:${port}/v1/echo`, { method: "POST", body: body(), headers: { "content-type": "application/json" } });
    const a = { status: res.statusCode, body: JSON.parse(await res.body.text()) };
    expectEnvelope(a, 413, "payload_too_large");
    // A body within the limit is still taken.
    const ok = await call(`http://127.0.0.1:${port}/v1/echo`, { method: "POST", body: JSON.stringify({ s: "x".repeat(1000) }), headers: { "content-type": "application/json" } });
    expect(ok.status).toBe(200);
  });
});

// ------------------------------------------------------------------------------------------------ load

describe("requests in flight", () => {
  /** A service whose routes wait until released: an ordinary request, an event stream and a long poll. */
  async function blockingService(limits?: Parameters<typeof createService>[0]["limits"]) {
    const app = createService({ name: "run-gateway", limits });
    const waiting: Array<() => void> = [];
    const hold = () => new Promise<void>((resolve) => waiting.push(resolve));
    app.get("/v1/hold", async () => {
      await hold();
      return { ok: true };
    });
    app.get("/v1/hold/:id/events", async (_req, reply) => {
      reply.type("application/x-ndjson");
      await hold();
      return '{"type":"run_completed"}\n';
    });
    app.post("/v1/hold", async () => {
      await hold();
      return { ok: true };
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    const base = `http://127.0.0.1:${portOfApp(app)}`;
    return { app, base, waiting, release: () => waiting.splice(0).forEach((r) => r()) };
  }

  it("are bounded by default: past 1024 the service answers 503 unavailable with Retry-After", async () => {
    const s = await blockingService();
    const pool = new Pool(s.base, { connections: 1_100 });
    try {
      const held = Array.from({ length: 1_024 }, () => pool.request({ path: "/v1/hold", method: "GET" }));
      // Wait until all of them are being held.
      for (let i = 0; i < 200 && s.waiting.length < 1_024; i++) await new Promise((resolve) => setTimeout(resolve, 25));
      expect(s.waiting.length).toBe(1_024);
      const over = await pool.request({ path: "/v1/hold", method: "GET" });
      const a = { status: over.statusCode, body: JSON.parse(await over.body.text()) };
      expectEnvelope(a, 503, "unavailable");
      expect(over.headers["retry-after"]).toBe("1");
      // Health and version are always answered.
      expect((await pool.request({ path: "/v1/health", method: "GET" })).statusCode).toBe(200);
      s.release();
      const answers = await Promise.all(held);
      expect(answers.map((r) => r.statusCode).every((c) => c === 200)).toBe(true);
      await Promise.all(answers.map((r) => r.body.text()));
      // Once released, requests are taken again.
      const after = pool.request({ path: "/v1/hold", method: "GET" });
      for (let i = 0; i < 100 && s.waiting.length < 1; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      s.release();
      expect((await after).statusCode).toBe(200);
    } finally {
      s.release();
      await pool.destroy();
      await s.app.close();
    }
  }, 60_000);

  it("leave event streams and long polls out; those have their own bound", async () => {
    const s = await blockingService({ maxInFlight: 2, maxStreams: 3 });
    const pool = new Pool(s.base, { connections: 20 });
    const pending: Array<Promise<unknown>> = [];
    const start = (opts: Parameters<Pool["request"]>[0]) => {
      const p = pool.request(opts).then(async (r) => ({ status: r.statusCode, headers: r.headers, text: await r.body.text() }));
      pending.push(p);
      return p;
    };
    const until = async (n: number) => {
      for (let i = 0; i < 200 && s.waiting.length < n; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(s.waiting.length).toBe(n);
    };
    try {
      start({ path: "/v1/hold", method: "GET" });
      start({ path: "/v1/hold", method: "GET" });
      await until(2);
      const shed = await start({ path: "/v1/hold", method: "GET" });
      expect(shed.status).toBe(503);
      expect(shed.headers["retry-after"]).toBe("1");
      expectEnvelope({ status: shed.status, body: JSON.parse(shed.text) }, 503, "unavailable");
      // Streams and long polls are still taken while ordinary requests are at their bound.
      start({ path: "/v1/hold/run_1/events", method: "GET" });
      start({ path: "/v1/hold/run_2/events?follow=true", method: "GET" });
      start({ path: "/v1/hold", method: "POST", headers: { prefer: "wait=30", "content-type": "application/json" }, body: "{}" });
      await until(5);
      const fourth = await start({ path: "/v1/hold/run_3/events", method: "GET" });
      expect(fourth.status).toBe(503);
      expectEnvelope({ status: fourth.status, body: JSON.parse(fourth.text) }, 503, "unavailable");
      s.release();
      const all = await Promise.all(pending);
      expect(all.map((r) => (r as { status: number }).status).sort()).toEqual([200, 200, 200, 200, 200, 503, 503]);
      // Everything released: both bounds are free again.
      start({ path: "/v1/hold", method: "GET" });
      start({ path: "/v1/hold/run_4/events", method: "GET" });
      await until(2);
      s.release();
    } finally {
      s.release();
      await Promise.allSettled(pending);
      await pool.destroy();
      await s.app.close();
    }
  });
});

// ------------------------------------------------------------------------------------------------ slow clients

describe("slow clients", () => {
  let fabric: RunningFabric;
  beforeAll(async () => {
    const config = loadConfig({
      cwd: repo,
      env: {},
      flags: {
        port_base: 0,
        data_dir: tempDir("nf-slow-data-"),
        log_level: "silent",
        handlers: ["@nodefabric/handler-demo"],
        limits: { headers_timeout_ms: 400, request_timeout_ms: 900, keep_alive_timeout_ms: 300, max_json_depth: 16 },
      },
    });
    fabric = await startFabric(config);
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  it("are cut off after the configured timeouts while a legit request is served promptly", async () => {
    const gw = fabric.urls["run-gateway"]!;
    const port = portOf(gw);
    const head = `POST /v1/runs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\nX-Slow: ${"z".repeat(200)}\r\n\r\n`;
    const started = Date.now();
    // Slowloris: headers one byte every 20 ms, never finished.
    const lorises = Array.from({ length: 6 }, () => rawExchange(port, head.split(""), 5_000, 20));
    // A slow body: the head at once, then a byte every 50 ms of a 100-byte body.
    const slowBody = rawExchange(port, [head, ...Array.from({ length: 100 }, () => " ")], 5_000, 50);
    await new Promise((resolve) => setTimeout(resolve, 150));

    const t0 = Date.now();
    const legit = await call(`${gw}/v1/runs`, {
      method: "POST",
      body: JSON.stringify({ root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: { ok: true } }),
      headers: { "content-type": "application/json", prefer: "wait=5" },
    });
    const legitMs = Date.now() - t0;
    expect(legit.status, JSON.stringify(legit.body)).toBe(200);
    expect(legit.body.state).toBe("completed");
    expect(legitMs).toBeLessThan(1_000);

    for (const r of await Promise.all(lorises)) {
      expect(r.closed).toBe(true);
      // The head timeout (400 ms) plus at most one check (100 ms) and some slack, long before the 5 s the client would take.
      expect(r.closedAfterMs!).toBeLessThan(1_500);
      expectEnvelope(parseRaw(r.text), 408, "invalid_request");
    }
    const sb = await slowBody;
    expect(sb.closed).toBe(true);
    expect(sb.closedAfterMs!).toBeLessThan(2_000);
    expectEnvelope(parseRaw(sb.text), 408, "invalid_request");
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it("an idle keep-alive connection is closed after the configured time", async () => {
    const port = portOf(fabric.urls["pdp"]!);
    const r = await rawExchange(port, "GET /v1/version HTTP/1.1\r\nHost: localhost\r\n\r\n", 3_000);
    expect(parseRaw(r.text).status).toBe(200);
    expect(r.closed).toBe(true);
    expect(r.closedAfterMs!).toBeLessThan(1_500);
  });

  it("a silent connection is closed after the head timeout", async () => {
    const r = await rawExchange(portOf(fabric.urls["node-registry"]!), [], 3_000);
    expect(r.closed).toBe(true);
    expect(r.closedAfterMs!).toBeLessThan(1_500);
  });

  it("the configured JSON depth applies to every service", async () => {
    for (const s of fabric.services) {
      const a = await call(s.url + EDGES[s.name].post, { method: "POST", body: `{"input":${deepArrays(16)}}`, headers: { "content-type": "application/json" } });
      expectEnvelope(a, 400, "invalid_request");
      expect(a.body.error.message).toMatch(/deeper than 16 levels/);
    }
  });
});

// ------------------------------------------------------------------------------------------------ configuration

describe("the limits configuration", () => {
  it("has defaults, a section in fabric.config.json and FABRIC_LIMITS_* variables", () => {
    const cwd = tempDir("nf-limits-");
    expect(loadConfig({ cwd, env: {} }).limits).toEqual({
      max_json_depth: 128,
      max_body_bytes: 1_048_576,
      max_in_flight: 1_024,
      max_streams: 10_000,
      max_header_bytes: 16_384,
      headers_timeout_ms: 20_000,
      request_timeout_ms: 60_000,
      keep_alive_timeout_ms: 5_000,
    });
    fs.writeFileSync(path.join(cwd, "fabric.config.json"), JSON.stringify({ limits: { max_json_depth: 32, max_in_flight: 50 } }));
    const fromFile = loadConfig({ cwd, env: { FABRIC_LIMITS_MAX_IN_FLIGHT: "70", FABRIC_LIMITS_HEADERS_TIMEOUT_MS: "5000" } }).limits;
    expect(fromFile).toMatchObject({ max_json_depth: 32, max_in_flight: 70, headers_timeout_ms: 5_000, request_timeout_ms: 60_000 });
    expect(() => loadConfig({ cwd, env: { FABRIC_LIMITS_MAX_JSON_DEPTH: "deep" } })).toThrow(ConfigError);
    expect(() => loadConfig({ cwd, env: { FABRIC_LIMITS_MAX_JSON_DEPTH: "0" } })).toThrow(/limits\.max_json_depth/);
    expect(() => loadConfig({ cwd, env: {}, flags: { limits: { headers_timeout_ms: 5_000, request_timeout_ms: 1_000 } } })).toThrow(/headers_timeout_ms must not exceed/);
    expect(() => loadConfig({ cwd, env: {}, flags: { limits: { max_connections: 1 } as never } })).toThrow(/limits\.max_connections: unknown option/);
  });
});
