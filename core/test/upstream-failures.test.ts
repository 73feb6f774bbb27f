import { describe, it, expect, beforeAll, afterAll } from "vitest";
import dns from "node:dns";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { Agent, errors as undiciErrors, request as undiciRequest } from "undici";
import type { FastifyInstance } from "fastify";
import { validatorFor } from "@nodefabric/schemas";
import { buildAtomicExecutor, handlersFromDefinitions } from "@nodefabric/core";
import { defineAtomic, HandlerError, networkFailureOf, retryAfterMs, upstreamUnavailableError, type AtomicContext, type JsonObject } from "@nodefabric/core/sdk";
import { fabricFixture, runHandler, type FabricFixture } from "@nodefabric/core/testing";
import { retryDelayMs, type RetryPolicy } from "../src/engine/retry-policy.js";

// Upstream network failures, against real local servers: a port nobody listens on, servers that reset or close every
// connection, one that accepts and never answers, and a host name under .invalid. Each becomes the retryable
// `upstream_unavailable` naming the kind, host and port, with the network error's code as its cause.

const isResult = validatorFor("atomic_execute_result");

/** A loopback port nothing listens on: listened on, then closed; taken right before its use, so no server started since holds it. */
async function refusedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

interface TcpServer {
  port: number;
  close(): Promise<void>;
}

/** A TCP server that does `onConnection` with every socket; `close` destroys what is still open. */
async function tcpServer(onConnection: (socket: net.Socket) => void): Promise<TcpServer> {
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
 * Connections through it resolve names under `.invalid` (RFC 6761: never resolvable) the way the system resolver
 * answers them, ENOTFOUND from getaddrinfo, without waiting on this machine's DNS; any other name goes to the system.
 */
function resolverAgent(): Agent {
  const lookup = (hostname: string, options: dns.LookupOptions, callback: (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void) => {
    if (hostname.endsWith(".invalid")) {
      const err: NodeJS.ErrnoException = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND", errno: -3008, syscall: "getaddrinfo", hostname });
      return process.nextTick(() => callback(err, ""));
    }
    dns.lookup(hostname, options, callback as never);
  };
  return new Agent({ connect: { lookup } as never });
}

type Via = "fetch" | "request" | "raw-fetch" | "raw-undici";

/**
 * `net.call`: calls `inputs.url` through ctx.fetch, ctx.request, or the handler's own global fetch or undici call,
 * and lets whatever it throws escape. With `inspect`, it catches the rejection and answers what it looks like.
 */
const netCall = defineAtomic({
  nodeType: {
    node_type_id: "net.call",
    version: "1.0.0",
    description: "calls a URL the way it is told to",
    input_schema: {
      type: "object",
      required: ["url", "via"],
      properties: { url: { type: "string" }, via: { enum: ["fetch", "request", "raw-fetch", "raw-undici"] }, inspect: { type: "boolean" }, headers_timeout_ms: { type: "integer" } },
    },
    output_schema: { type: "object" },
  },
  async handler(inputs: { url: string; via: Via; inspect?: boolean; headers_timeout_ms?: number }, ctx: AtomicContext) {
    const call = async (): Promise<unknown> => {
      switch (inputs.via) {
        case "fetch":
          return (await ctx.fetch(inputs.url)).text();
        case "request":
          return (await ctx.request(inputs.url)).text();
        case "raw-fetch":
          return (await globalThis.fetch(inputs.url)).text();
        case "raw-undici":
          return (await undiciRequest(inputs.url, { headersTimeout: inputs.headers_timeout_ms, bodyTimeout: inputs.headers_timeout_ms })).body.text();
      }
    };
    if (!inputs.inspect) return { body: await call() } as JsonObject;
    try {
      await call();
      return { threw: false };
    } catch (err) {
      const e = err as HandlerError;
      return {
        threw: true,
        is_handler_error: HandlerError.is(err),
        code: e.code,
        retryable: e.retryable ?? null,
        details: (e.details ?? null) as JsonObject,
        cause_is_error: e.cause instanceof Error,
        // The original error, as the handler gets it: undici's TypeError "fetch failed" wraps the connect error.
        cause_code: ((e.cause as { code?: string })?.code ?? (e.cause as { cause?: { code?: string } })?.cause?.code) ?? null,
      };
    }
  },
});

describe("upstream network failures through runHandler", () => {
  let resetting: TcpServer;
  let closing: TcpServer;
  let stalling: TcpServer;

  beforeAll(async () => {
    resetting = await tcpServer((socket) => socket.resetAndDestroy());
    closing = await tcpServer((socket) => socket.destroy());
    stalling = await tcpServer(() => undefined);
  });
  afterAll(async () => {
    await resetting?.close();
    await closing?.close();
    await stalling?.close();
  });

  const run = (inputs: Record<string, unknown>, options: Parameters<typeof runHandler>[2] = {}) => runHandler(netCall, inputs, options);

  it.each(["fetch", "request", "raw-fetch", "raw-undici"] as const)("a refused connection through %s fails upstream_unavailable, naming host and port, with the cause", async (via) => {
    const refused = await refusedPort();
    const result = await run({ url: `http://127.0.0.1:${refused}/weather`, via });
    expect(isResult(result), JSON.stringify(isResult.errors)).toBe(true);
    expect(result.state).toBe("failed");
    expect(result.error).toEqual({
      code: "upstream_unavailable",
      message: `connection refused by 127.0.0.1:${refused} (ECONNREFUSED)`,
      retryable: true,
      details: { reason: "connection_refused", code: "ECONNREFUSED", host: "127.0.0.1", port: refused, syscall: "connect" },
      cause: { code: "ECONNREFUSED", message: `connect ECONNREFUSED 127.0.0.1:${refused}`, details: { host: "127.0.0.1", port: refused, syscall: "connect" } },
    });
  });

  it("names the host asked for, and the address connected to, for a name", async () => {
    const refused = await refusedPort();
    const result = await run({ url: `http://localhost:${refused}/`, via: "fetch" });
    expect(result.error).toMatchObject({ code: "upstream_unavailable", message: `connection refused by localhost:${refused} (ECONNREFUSED)`, details: { host: "localhost", port: refused } });
    expect(["127.0.0.1", "::1"]).toContain(result.error!.details!.address);
  });

  it.each(["fetch", "request"] as const)("ctx.%s rejects with a HandlerError the handler can catch and inspect", async (via) => {
    const refused = await refusedPort();
    const result = await run({ url: `http://127.0.0.1:${refused}/`, via, inspect: true });
    expect(result.state).toBe("completed");
    expect(result.outputs).toEqual({
      threw: true,
      is_handler_error: true,
      code: "upstream_unavailable",
      retryable: true,
      details: { reason: "connection_refused", code: "ECONNREFUSED", host: "127.0.0.1", port: refused, syscall: "connect" },
      cause_is_error: true,
      cause_code: "ECONNREFUSED",
    });
  });

  it.each(["fetch", "request", "raw-fetch", "raw-undici"] as const)("a connection reset by the other side through %s fails upstream_unavailable", async (via) => {
    const result = await run({ url: `http://127.0.0.1:${resetting.port}/`, via });
    expect(result.error).toMatchObject({
      code: "upstream_unavailable",
      retryable: true,
      message: `connection reset by 127.0.0.1:${resetting.port} (ECONNRESET)`,
      details: { reason: "connection_reset", code: "ECONNRESET", host: "127.0.0.1", port: resetting.port },
      cause: { code: "ECONNRESET", details: { host: "127.0.0.1", port: resetting.port } },
    });
  });

  it.each(["fetch", "request"] as const)("a connection the other side closes without answering, through ctx.%s, fails upstream_unavailable", async (via) => {
    const result = await run({ url: `http://127.0.0.1:${closing.port}/`, via });
    expect(result.error).toEqual({
      code: "upstream_unavailable",
      message: `connection closed by 127.0.0.1:${closing.port} (UND_ERR_SOCKET: other side closed)`,
      retryable: true,
      details: { reason: "connection_reset", code: "UND_ERR_SOCKET", host: "127.0.0.1", port: closing.port },
      cause: { code: "UND_ERR_SOCKET", message: "other side closed", details: { host: "127.0.0.1", port: closing.port } },
    });
  });

  it("a closed connection that escapes the handler's own undici call is upstream_unavailable too", async () => {
    const result = await run({ url: `http://127.0.0.1:${closing.port}/`, via: "raw-undici" });
    expect(result.error).toMatchObject({ code: "upstream_unavailable", retryable: true, details: { reason: "connection_reset", code: "UND_ERR_SOCKET" }, cause: { code: "UND_ERR_SOCKET", message: "other side closed" } });
  });

  it.each(["fetch", "request", "raw-fetch", "raw-undici"] as const)("a host name that does not resolve, through %s, fails upstream_unavailable", async (via) => {
    const agent = resolverAgent();
    try {
      const result = await run({ url: "http://weather.nodefabric.invalid:8080/now", via }, { mockAgent: agent });
      expect(result.error).toMatchObject({
        code: "upstream_unavailable",
        retryable: true,
        details: { reason: "dns_failure", code: "ENOTFOUND", host: "weather.nodefabric.invalid", syscall: "getaddrinfo" },
        cause: { code: "ENOTFOUND", message: "getaddrinfo ENOTFOUND weather.nodefabric.invalid", details: { host: "weather.nodefabric.invalid", syscall: "getaddrinfo" } },
      });
      expect(result.error!.message).toBe(`cannot resolve weather.nodefabric.invalid (ENOTFOUND)`);
      // The executor knows the URL, so its own clients name the port too; a raw error only names the host.
      if (via === "fetch" || via === "request") expect(result.error!.details).toMatchObject({ port: 8080 });
    } finally {
      await agent.close();
    }
  });

  it("a server that never answers the handler's own undici call fails upstream_unavailable at its headers timeout", async () => {
    const result = await run({ url: `http://127.0.0.1:${stalling.port}/`, via: "raw-undici", headers_timeout_ms: 200 });
    expect(result.error).toMatchObject({
      code: "upstream_unavailable",
      retryable: true,
      message: "the upstream sent no response headers in time (UND_ERR_HEADERS_TIMEOUT)",
      details: { reason: "timeout", code: "UND_ERR_HEADERS_TIMEOUT" },
      cause: { code: "UND_ERR_HEADERS_TIMEOUT", message: "Headers Timeout Error" },
    });
  });

  it("a server that never answers stays a timeout when the execution's own deadline passes first", async () => {
    const started = Date.now();
    const result = await run({ url: `http://127.0.0.1:${stalling.port}/`, via: "fetch" }, { timeoutMs: 300 });
    expect(result).toMatchObject({ state: "failed", error: { code: "timeout", retryable: true } });
    expect(Date.now() - started).toBeLessThan(5_000);
    const viaRequest = await run({ url: `http://127.0.0.1:${stalling.port}/`, via: "request" }, { timeoutMs: 300 });
    expect(viaRequest).toMatchObject({ state: "failed", error: { code: "timeout" } });
  });

  it("a canceled execution stays canceled, whatever its upstream call was doing", async () => {
    for (const via of ["fetch", "request"] as const) {
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 150);
      const result = await run({ url: `http://127.0.0.1:${stalling.port}/`, via }, { signal: controller.signal });
      expect(result).toMatchObject({ state: "canceled", error: { code: "canceled" } });
    }
  });

  it("an HTTP error answer is not a network failure: the handler's code stands", async () => {
    const upstream = http.createServer((_req, res) => res.writeHead(503).end("busy"));
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    try {
      const result = await run({ url: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/`, via: "fetch" });
      expect(result).toMatchObject({ state: "completed", outputs: { body: "busy" } });
    } finally {
      await new Promise((resolve) => upstream.close(resolve));
    }
  });
});

describe("the executor's ctx.fetch timeout and its log", () => {
  let executor: FastifyInstance;
  let stalling: TcpServer;
  let stallingBody: TcpServer;
  const logLines: Array<Record<string, any>> = [];

  beforeAll(async () => {
    stalling = await tcpServer(() => undefined);
    // Answers the headers and the first bytes of a body it never finishes.
    stallingBody = await tcpServer((socket) => {
      socket.once("data", () => socket.write("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\r\nfirst bytes"));
    });
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split("\n")) if (line.trim()) logLines.push(JSON.parse(line));
        done();
      },
    });
    executor = await buildAtomicExecutor({ logger: { level: "warn", stream }, handlers: handlersFromDefinitions([netCall]), fetchTimeoutMs: 250 });
    await executor.ready();
  });
  afterAll(async () => {
    await executor?.close();
    await stalling?.close();
    await stallingBody?.close();
  });

  const execute = async (inputs: Record<string, unknown>, ids: { run_id: string; node_run_id: string; attempt: number }) => {
    const res = await executor.inject({
      method: "POST",
      url: "/v1/atomic-node-runs:execute",
      payload: { run_id: ids.run_id, node_run_id: ids.node_run_id, node_type_ref: { node_type_id: "net.call", version: "1.0.0" }, inputs, extensions: { "nodefabric.attempt": ids.attempt } },
    });
    expect(res.statusCode).toBe(200);
    return res.json();
  };

  it("ctx.fetch gives up on a server that never answers after its per-request timeout, as upstream_unavailable", async () => {
    const started = Date.now();
    const result = await execute({ url: `http://127.0.0.1:${stalling.port}/slow?key=secret`, via: "fetch" }, { run_id: "run_stall", node_run_id: "nr_stall", attempt: 1 });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result.error).toEqual({
      code: "upstream_unavailable",
      message: `127.0.0.1:${stalling.port} did not answer within 250 ms (ETIMEDOUT)`,
      retryable: true,
      details: { reason: "timeout", code: "ETIMEDOUT", host: "127.0.0.1", port: stalling.port, timeout_ms: 250 },
      cause: { code: "ETIMEDOUT", message: `127.0.0.1:${stalling.port} did not answer within 250 ms`, details: { host: "127.0.0.1", port: stalling.port } },
    });
    // The query (which may carry a key) is never in the error.
    expect(JSON.stringify(result)).not.toContain("secret");
  });

  it("ctx.request gives up at its headers timeout, as upstream_unavailable naming host and port", async () => {
    const result = await execute({ url: `http://127.0.0.1:${stalling.port}/`, via: "request" }, { run_id: "run_stall", node_run_id: "nr_stall_req", attempt: 1 });
    expect(result.error).toMatchObject({
      code: "upstream_unavailable",
      message: `127.0.0.1:${stalling.port} sent no response headers in time (UND_ERR_HEADERS_TIMEOUT)`,
      details: { reason: "timeout", code: "UND_ERR_HEADERS_TIMEOUT", host: "127.0.0.1", port: stalling.port },
      cause: { code: "UND_ERR_HEADERS_TIMEOUT", details: { host: "127.0.0.1", port: stalling.port } },
    });
  });

  it("a body that stops arriving fails upstream_unavailable too, through ctx.fetch and ctx.request", async () => {
    const viaFetch = await execute({ url: `http://127.0.0.1:${stallingBody.port}/`, via: "fetch" }, { run_id: "run_body", node_run_id: "nr_body_fetch", attempt: 1 });
    expect(viaFetch.error).toMatchObject({
      code: "upstream_unavailable",
      message: `127.0.0.1:${stallingBody.port} did not answer within 250 ms (ETIMEDOUT)`,
      details: { reason: "timeout", code: "ETIMEDOUT", host: "127.0.0.1", port: stallingBody.port, timeout_ms: 250 },
      cause: { code: "ETIMEDOUT" },
    });
    const viaRequest = await execute({ url: `http://127.0.0.1:${stallingBody.port}/`, via: "request" }, { run_id: "run_body", node_run_id: "nr_body_request", attempt: 1 });
    expect(viaRequest.error).toMatchObject({
      code: "upstream_unavailable",
      message: `127.0.0.1:${stallingBody.port} stopped sending the response body (UND_ERR_BODY_TIMEOUT)`,
      details: { reason: "timeout", code: "UND_ERR_BODY_TIMEOUT", host: "127.0.0.1", port: stallingBody.port },
      cause: { code: "UND_ERR_BODY_TIMEOUT" },
    });
  });

  it("logs one warn line per upstream failure, with the run's ids, the attempt, the code, host and port", async () => {
    const refused = await refusedPort();
    logLines.length = 0;
    await execute({ url: `http://127.0.0.1:${refused}/`, via: "request" }, { run_id: "run_log", node_run_id: "nr_log", attempt: 2 });
    const lines = logLines.filter((l) => l.node_run_id === "nr_log");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 40,
      run_id: "run_log",
      node_run_id: "nr_log",
      node_type_id: "net.call",
      attempt: 2,
      error_code: "upstream_unavailable",
      code: "ECONNREFUSED",
      host: "127.0.0.1",
      port: refused,
      reason: "connection_refused",
      msg: `upstream unavailable: connection refused by 127.0.0.1:${refused} (ECONNREFUSED)`,
    });
  });
});

describe("the shared classifier", () => {
  it("names undici's connect timeout, with the address it attempted", () => {
    const err = new undiciErrors.ConnectTimeoutError("Connect Timeout Error (attempted address: api.example.com:443, timeout: 10000ms)");
    expect(networkFailureOf(err)).toMatchObject({ reason: "timeout", code: "UND_ERR_CONNECT_TIMEOUT", host: "api.example.com", port: 443 });
    const handlerError = upstreamUnavailableError(new TypeError("fetch failed", { cause: err }));
    expect(handlerError).toMatchObject({ code: "upstream_unavailable", retryable: true, message: "connecting to api.example.com:443 timed out (UND_ERR_CONNECT_TIMEOUT)" });
  });

  it("finds the failure in an AggregateError of several connection attempts, and names an IPv6 host in brackets", () => {
    const attempt = (address: string) => Object.assign(new Error(`connect ECONNREFUSED ${address}:8080`), { code: "ECONNREFUSED", address, port: 8080, syscall: "connect" });
    const err = new TypeError("fetch failed", { cause: Object.assign(new AggregateError([attempt("::1"), attempt("127.0.0.1")]), { code: "ECONNREFUSED" }) });
    expect(upstreamUnavailableError(err)?.message).toBe("connection refused by [::1]:8080 (ECONNREFUSED)");
    expect(upstreamUnavailableError(err, "http://localhost:8080/x")).toMatchObject({ message: "connection refused by localhost:8080 (ECONNREFUSED)", details: { host: "localhost", port: 8080, address: "::1" } });
  });

  it("leaves aborts, HandlerErrors and other errors alone", () => {
    expect(upstreamUnavailableError(new DOMException("the node run was canceled", "AbortError"))).toBeUndefined();
    expect(upstreamUnavailableError(new DOMException("The operation was aborted due to timeout", "TimeoutError"))).toBeUndefined();
    expect(upstreamUnavailableError(new HandlerError("upstream_error", "answered 503", { cause: Object.assign(new Error("x"), { code: "ECONNRESET" }) }))).toBeUndefined();
    expect(upstreamUnavailableError(new TypeError("Cannot read properties of undefined"))).toBeUndefined();
    expect(upstreamUnavailableError(Object.assign(new Error("Mock dispatch not matched"), { code: "UND_ERR_MOCK_NOT_MATCHED" }))).toBeUndefined();
  });
});

describe("Retry-After within the retry policy", () => {
  const policy: RetryPolicy = { max_attempts: 5, initial_interval_ms: 200, backoff_coefficient: 2, max_interval_ms: 3_000 };
  const after = (ms: unknown) => ({ code: "upstream_error", message: "busy", retryable: true, details: { retry_after_ms: ms } });

  it("waits the longer of the backoff and details.retry_after_ms, never past max_interval_ms", () => {
    expect(retryDelayMs(policy, 2)).toBe(200);
    expect(retryDelayMs(policy, 2, after(1_000))).toBe(1_000);
    expect(retryDelayMs(policy, 4, after(100))).toBe(800);
    expect(retryDelayMs(policy, 2, after(120_000))).toBe(3_000);
    expect(retryDelayMs(policy, 2, after(0))).toBe(200);
    for (const bad of [-1, "1000", Number.NaN, Number.POSITIVE_INFINITY, null]) expect(retryDelayMs(policy, 2, after(bad))).toBe(200);
  });
});

describe("upstream failures through a whole fabric", () => {
  let fabric: FabricFixture;
  let busy: http.Server;
  let busyUrl: string;
  /** When each request reached the busy server, by the test's run key. */
  const arrivals = new Map<string, number[]>();

  const RETRY = { max_attempts: 3, initial_interval_ms: 20, backoff_coefficient: 2, max_interval_ms: 2_000 };

  const unreachable = defineAtomic({
    nodeType: {
      node_type_id: "net.unreachable",
      version: "1.0.0",
      description: "calls an upstream that refuses connections",
      input_schema: { type: "object", required: ["url"], properties: { url: { type: "string" } } },
      output_schema: { type: "object" },
      constraints: { gates: { side_effect_class: "read" } },
      extensions: { "nodefabric.retry": RETRY },
    },
    async handler(inputs: { url: string }, ctx) {
      const res = await ctx.request(inputs.url);
      return { status: res.statusCode };
    },
  });

  const rateLimited = defineAtomic({
    nodeType: {
      node_type_id: "net.rate-limited",
      version: "1.0.0",
      description: "calls an upstream that asks to retry after a second",
      input_schema: { type: "object", required: ["url"], properties: { url: { type: "string" } } },
      output_schema: { type: "object", required: ["attempt"] },
      constraints: { gates: { side_effect_class: "read" } },
      extensions: { "nodefabric.retry": { ...RETRY, max_attempts: 2 } },
    },
    async handler(inputs: { url: string }, ctx) {
      const res = await ctx.fetch(inputs.url);
      if (res.status === 503 || res.status === 429) {
        const wait = retryAfterMs(res.headers.get("retry-after"));
        throw new HandlerError("upstream_error", `answered ${res.status}`, { retryable: true, details: { status: res.status, ...(wait !== undefined ? { retry_after_ms: wait } : {}) } });
      }
      return { attempt: ctx.attempt };
    },
  });

  beforeAll(async () => {
    // The first request of each key answers 503 with Retry-After: 1, later ones 200.
    busy = http.createServer((req, res) => {
      const key = new URL(req.url!, "http://busy").searchParams.get("key")!;
      const seen = arrivals.get(key) ?? [];
      seen.push(Date.now());
      arrivals.set(key, seen);
      if (seen.length === 1) res.writeHead(503, { "retry-after": key === "long" ? "120" : "1" }).end("busy");
      else res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
    busyUrl = `http://127.0.0.1:${(busy.address() as AddressInfo).port}`;
    fabric = await fabricFixture({ definitions: [unreachable, rateLimited] });
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
    await new Promise((resolve) => busy?.close(resolve));
  });

  it("retries a refused connection max_attempts times, then fails the NodeRun with upstream_unavailable and its cause", async () => {
    const refused = await refusedPort();
    const run = await fabric.run("net.unreachable@1.0.0", { url: `http://127.0.0.1:${refused}/v1/things` });
    expect(run.state).toBe("failed");
    const expected = {
      code: "upstream_unavailable",
      message: `connection refused by 127.0.0.1:${refused} (ECONNREFUSED)`,
      retryable: true,
      details: { reason: "connection_refused", code: "ECONNREFUSED", host: "127.0.0.1", port: refused },
      cause: { code: "ECONNREFUSED", message: `connect ECONNREFUSED 127.0.0.1:${refused}`, details: { host: "127.0.0.1", port: refused, syscall: "connect" } },
    };
    expect(run.extensions?.["nodefabric.error"]).toMatchObject(expected);

    const [nodeRun] = await fabric.nodeRuns(run.run_id);
    expect(nodeRun).toMatchObject({ state: "failed", extensions: { "nodefabric.attempt": 3, "nodefabric.error": expected } });

    const events = await fabric.events(run.run_id);
    const executed = events.filter((e) => e.type === "atomic_executed");
    expect(executed.map((e) => e.data?.attempt)).toEqual([1, 2, 3]);
    for (const e of executed) expect(e.data).toMatchObject({ state: "failed", error: { code: "upstream_unavailable", cause: { code: "ECONNREFUSED" } } });
    const retrying = events.filter((e) => e.type === "node_run_retrying");
    expect(retrying.map((e) => e.data?.attempt)).toEqual([2, 3]);
    expect(retrying.map((e) => e.data?.delay_ms)).toEqual([20, 40]);
    for (const e of retrying) expect(e.data?.error).toMatchObject({ code: "upstream_unavailable", retryable: true, details: { host: "127.0.0.1", port: refused } });
    expect(events.find((e) => e.type === "node_run_completed")?.data).toMatchObject({ state: "failed", error: { code: "upstream_unavailable" } });
  }, 30_000);

  it("waits at least the upstream's Retry-After before the next attempt", async () => {
    const run = await fabric.run("net.rate-limited@1.0.0", { url: `${busyUrl}/?key=short` });
    expect(run).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { attempt: 2 } } });
    const [first, second] = arrivals.get("short")!;
    expect(second! - first!).toBeGreaterThanOrEqual(990);
    const retrying = (await fabric.events(run.run_id)).filter((e) => e.type === "node_run_retrying");
    expect(retrying).toHaveLength(1);
    expect(retrying[0]!.data).toMatchObject({ attempt: 2, delay_ms: 1_000, error: { code: "upstream_error", details: { status: 503, retry_after_ms: 1_000 } } });
  }, 30_000);

  it("never waits past the policy's max_interval_ms, whatever Retry-After asks", async () => {
    const started = Date.now();
    const run = await fabric.run("net.rate-limited@1.0.0", { url: `${busyUrl}/?key=long` });
    expect(run.state).toBe("completed");
    expect(Date.now() - started).toBeLessThan(15_000);
    const retrying = (await fabric.events(run.run_id)).filter((e) => e.type === "node_run_retrying");
    expect(retrying[0]!.data).toMatchObject({ delay_ms: 2_000, error: { details: { retry_after_ms: 120_000 } } });
    const [first, second] = arrivals.get("long")!;
    expect(second! - first!).toBeGreaterThanOrEqual(1_990);
  }, 30_000);
});
