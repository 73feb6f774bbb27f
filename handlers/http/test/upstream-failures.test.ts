/**
 * http.request names its upstream's network failures: a refused connection, a reset, a connection closed without an
 * answer, a server that never answers within timeout_ms, and a host name that does not resolve are the retryable
 * `upstream_unavailable`, naming host and port, with the network error's code as the cause; the coordinator retries
 * them under the node type's retry policy. A 429 or 503 carries its Retry-After as `details.retry_after_ms`, which the
 * coordinator waits before the next attempt. Everything runs through a whole fabric against real loopback servers.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import dns from "node:dns";
import { createServer, type Server } from "node:http";
import net, { type AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadConfig, SERVICE_NAMES, startFabric, type RunningFabric, type StartFabricOptions } from "@nodefabric/core";
import { httpRequest } from "../src/index.js";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Json }> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** A loopback port nothing listens on: listened on, then closed; taken right before its use, so no server started since holds it. */
async function refusedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A TCP server that does `onConnection` with every socket; `close` destroys what is still open. */
async function tcpServer(onConnection: (socket: net.Socket) => void): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    onConnection(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * The executor's egress resolver: names under `.invalid` (RFC 6761: never resolvable) fail as getaddrinfo fails them,
 * ENOTFOUND, without waiting on this machine's DNS; other names go to the system.
 */
const testLookup: NonNullable<StartFabricOptions["egressLookup"]> = async (hostname) => {
  if (hostname.endsWith(".invalid")) {
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND", errno: -3008, syscall: "getaddrinfo", hostname });
  }
  return dns.promises.lookup(hostname, { all: true });
};

/** A NodeType implemented by http.request@1.0.0, configured by `http`, retried as `retry` says. */
function httpBacked(id: string, http: Record<string, unknown>, retry: Record<string, number> = { max_attempts: 1 }): Json {
  return {
    node_type_id: id,
    version: "1.0.0",
    kind: "atomic",
    description: `${id}, backed by an HTTP API`,
    input_schema: { type: "object" },
    output_schema: { type: "object" },
    constraints: { gates: { side_effect_class: "read" } },
    extensions: { "nodefabric.implementation": { node_type_id: "http.request", version: "1.0.0" }, "nodefabric.http": http, "nodefabric.retry": retry },
  };
}

const errorOf = (run: Json) => run.extensions?.["nodefabric.error"];

describe("http.request against upstreams that cannot be reached", () => {
  let fabric: RunningFabric;
  let dataDir: string;
  let registry: string;
  let gateway: string;
  let resetting: Awaited<ReturnType<typeof tcpServer>>;
  let closing: Awaited<ReturnType<typeof tcpServer>>;
  let stalling: Awaited<ReturnType<typeof tcpServer>>;
  let busy: Server;
  let busyUrl: string;
  /** When each request reached the busy server, by its path. */
  const arrivals = new Map<string, number[]>();

  const publish = async (nodeType: Json) => {
    const r = await call("POST", `${registry}/v1/node-types`, { node_type: nodeType });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
  };
  const run = async (id: string): Promise<Json> => {
    const r = await call("POST", `${gateway}/v1/runs`, { root_node_type_ref: { node_type_id: id, version: "1.0.0" }, input: {} }, { prefer: "wait=30" });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(["completed", "failed"]).toContain(r.body.state);
    return r.body;
  };
  const events = async (runId: string): Promise<Json[]> => {
    const res = await fetch(`${gateway}/v1/runs/${runId}/events?follow=false`);
    return (await res.text())
      .split("\n")
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l));
  };

  beforeAll(async () => {
    resetting = await tcpServer((socket) => socket.resetAndDestroy());
    closing = await tcpServer((socket) => socket.destroy());
    stalling = await tcpServer(() => undefined);
    busy = createServer((req, res) => {
      const url = new URL(req.url!, "http://busy");
      const seen = arrivals.get(url.pathname) ?? [];
      seen.push(Date.now());
      arrivals.set(url.pathname, seen);
      const status = Number(url.searchParams.get("status") ?? 503);
      const retryAfter = url.searchParams.get("retry_after") ?? "1";
      // The first request of each path fails with `status` and Retry-After; later ones succeed.
      if (seen.length === 1 || url.searchParams.has("always")) res.writeHead(status, { "content-type": "application/json", "retry-after": retryAfter }).end('{"error":"busy"}');
      else res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
    busyUrl = `http://127.0.0.1:${(busy.address() as AddressInfo).port}`;

    dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-http-upstream-"));
    // The operator allows loopback, where the test's upstreams listen (egress refuses it by default).
    const config = loadConfig({ cwd: dataDir, env: {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", executor: { egress: { allow_cidrs: ["127.0.0.1/32"] } } } as never });
    fabric = await startFabric(config, SERVICE_NAMES, { definitions: [httpRequest], egressLookup: testLookup });
    registry = fabric.urls["node-registry"]!;
    gateway = fabric.urls["run-gateway"]!;
    const end = Date.now() + 15_000;
    for (;;) {
      const r = await call("GET", `${registry}/v1/executors?node_type_id=http.request`);
      if (r.status === 200 && r.body.length > 0) break;
      if (Date.now() > end) throw new Error("the executor did not register http.request");
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    await resetting?.close();
    await closing?.close();
    await stalling?.close();
    await new Promise((resolve) => busy?.close(resolve));
  });

  it("fails a refused connection with upstream_unavailable naming host and port, with the cause", async () => {
    const refused = await refusedPort();
    await publish(httpBacked("up.refused", { base_url: `http://127.0.0.1:${refused}`, path: "/v1/weather" }));
    const r = await run("up.refused");
    expect(r.state).toBe("failed");
    expect(errorOf(r)).toEqual({
      code: "upstream_unavailable",
      message: `connection refused by 127.0.0.1:${refused} (ECONNREFUSED)`,
      retryable: true,
      details: { reason: "connection_refused", code: "ECONNREFUSED", host: "127.0.0.1", port: refused, syscall: "connect" },
      cause: { code: "ECONNREFUSED", message: `connect ECONNREFUSED 127.0.0.1:${refused}`, details: { host: "127.0.0.1", port: refused, syscall: "connect" } },
    });
  });

  it("fails a connection reset, or closed without an answer, with upstream_unavailable", async () => {
    await publish(httpBacked("up.reset", { base_url: `http://127.0.0.1:${resetting.port}` }));
    expect(errorOf(await run("up.reset"))).toMatchObject({
      code: "upstream_unavailable",
      retryable: true,
      message: `connection reset by 127.0.0.1:${resetting.port} (ECONNRESET)`,
      details: { reason: "connection_reset", code: "ECONNRESET", host: "127.0.0.1", port: resetting.port },
      cause: { code: "ECONNRESET", details: { host: "127.0.0.1", port: resetting.port } },
    });
    await publish(httpBacked("up.closed", { base_url: `http://127.0.0.1:${closing.port}` }));
    expect(errorOf(await run("up.closed"))).toMatchObject({
      code: "upstream_unavailable",
      retryable: true,
      message: `connection closed by 127.0.0.1:${closing.port} (UND_ERR_SOCKET: other side closed)`,
      details: { reason: "connection_reset", code: "UND_ERR_SOCKET", host: "127.0.0.1", port: closing.port },
      cause: { code: "UND_ERR_SOCKET", message: "other side closed", details: { host: "127.0.0.1", port: closing.port } },
    });
  });

  it("fails a server that accepts and never answers within timeout_ms with upstream_unavailable", async () => {
    await publish(httpBacked("up.stalled", { base_url: `http://127.0.0.1:${stalling.port}`, timeout_ms: 200 }));
    const started = Date.now();
    const r = await run("up.stalled");
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(errorOf(r)).toEqual({
      code: "upstream_unavailable",
      message: `127.0.0.1:${stalling.port} did not answer within 200 ms (ETIMEDOUT)`,
      retryable: true,
      details: { reason: "timeout", code: "ETIMEDOUT", host: "127.0.0.1", port: stalling.port, timeout_ms: 200 },
      cause: { code: "ETIMEDOUT", message: `127.0.0.1:${stalling.port} did not answer within 200 ms`, details: { host: "127.0.0.1", port: stalling.port } },
    });
  });

  it("fails a host name that does not resolve with upstream_unavailable", async () => {
    await publish(httpBacked("up.no-such-host", { base_url: "http://api.nodefabric.invalid:8080" }));
    expect(errorOf(await run("up.no-such-host"))).toEqual({
      code: "upstream_unavailable",
      message: "cannot resolve api.nodefabric.invalid (ENOTFOUND)",
      retryable: true,
      details: { reason: "dns_failure", code: "ENOTFOUND", host: "api.nodefabric.invalid", port: 8080, syscall: "getaddrinfo" },
      cause: { code: "ENOTFOUND", message: "getaddrinfo ENOTFOUND api.nodefabric.invalid", details: { host: "api.nodefabric.invalid", port: 8080, syscall: "getaddrinfo" } },
    });
  });

  it("retries a refused connection under the node type's retry policy, then fails with the last error", async () => {
    const refused = await refusedPort();
    await publish(httpBacked("up.refused-retried", { base_url: `http://127.0.0.1:${refused}` }, { max_attempts: 3, initial_interval_ms: 20, backoff_coefficient: 2, max_interval_ms: 1_000 }));
    const r = await run("up.refused-retried");
    expect(r.state).toBe("failed");
    expect(errorOf(r)).toMatchObject({ code: "upstream_unavailable", cause: { code: "ECONNREFUSED" } });
    const all = await events(r.run_id);
    expect(all.filter((e) => e.type === "atomic_executed").map((e) => [e.data.attempt, e.data.error.code])).toEqual([
      [1, "upstream_unavailable"],
      [2, "upstream_unavailable"],
      [3, "upstream_unavailable"],
    ]);
    expect(all.filter((e) => e.type === "node_run_retrying").map((e) => [e.data.attempt, e.data.delay_ms])).toEqual([
      [2, 20],
      [3, 40],
    ]);
  }, 30_000);

  it("gives a 429 and a 503 their Retry-After as details.retry_after_ms, and keeps details.retry_after", async () => {
    await publish(httpBacked("up.rate-limited", { base_url: busyUrl, path: "/limited", query: { status: "429", retry_after: "3", always: "1" } }));
    expect(errorOf(await run("up.rate-limited"))).toMatchObject({ code: "upstream_error", retryable: true, details: { status: 429, retry_after: "3", retry_after_ms: 3_000 } });
    const at = new Date(Date.now() + 60_000).toUTCString();
    await publish(httpBacked("up.unavailable-until", { base_url: busyUrl, path: "/until", query: { status: "503", retry_after: at, always: "1" } }));
    const until = errorOf(await run("up.unavailable-until"));
    expect(until).toMatchObject({ code: "upstream_error", retryable: true, details: { status: 503, retry_after: at } });
    expect(until.details.retry_after_ms).toBeGreaterThan(50_000);
    expect(until.details.retry_after_ms).toBeLessThanOrEqual(60_000);
    // A 404 is final: a Retry-After on it asks for no wait.
    await publish(httpBacked("up.missing", { base_url: busyUrl, path: "/missing", query: { status: "404", always: "1" } }));
    const missing = errorOf(await run("up.missing"));
    expect(missing).toMatchObject({ code: "upstream_error", retryable: false, details: { status: 404 } });
    expect(missing.details.retry_after_ms).toBeUndefined();
  });

  it("waits the 503's Retry-After before the next attempt, within max_interval_ms", async () => {
    await publish(httpBacked("up.busy-once", { base_url: busyUrl, path: "/busy-once" }, { max_attempts: 2, initial_interval_ms: 10, backoff_coefficient: 2, max_interval_ms: 5_000 }));
    const r = await run("up.busy-once");
    expect(r).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { ok: true } } });
    const [first, second] = arrivals.get("/busy-once")!;
    expect(second! - first!).toBeGreaterThanOrEqual(990);
    const retrying = (await events(r.run_id)).filter((e) => e.type === "node_run_retrying");
    expect(retrying.map((e) => e.data)).toMatchObject([{ attempt: 2, delay_ms: 1_000, error: { code: "upstream_error", details: { status: 503, retry_after_ms: 1_000 } } }]);
  }, 30_000);
});
