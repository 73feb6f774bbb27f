/**
 * What the tests of mcp.call share: real MCP servers on loopback (built with the official server SDK, served over
 * node:http through its web-standard handler, recording the headers each request carried), and a whole fabric
 * serving mcp.call whose egress policy allows loopback, as an operator running MCP servers beside it would set.
 */
import { createServer, type IncomingHttpHeaders, type Server as HttpServer } from "node:http";
import { Readable } from "node:stream";
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "vitest";
import { createMcpHandler, McpServer, Server } from "@modelcontextprotocol/server";
import { loadConfig, SERVICE_NAMES, startFabric, type RunningFabric } from "@nodefabric/core";
import type { AtomicDefinition } from "@nodefabric/sdk";
import { mcpCall } from "../src/index.js";

export type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface McpTestServer {
  /** The MCP endpoint, http://127.0.0.1:PORT/mcp */
  url: string;
  /** Headers of every HTTP request received, in order. */
  seen: IncomingHttpHeaders[];
  /** JSON-RPC methods of the POSTed messages, in order. */
  methods: string[];
  close(): Promise<void>;
}

/**
 * An MCP server on loopback: `register` adds its tools to a fresh McpServer per request (the SDK's handler serves
 * both protocol eras from one factory: 2026-07-28 per request, 2025 statelessly).
 */
export async function startMcpServer(register: (server: McpServer) => void, options: StartOptions = {}): Promise<McpTestServer> {
  return serveOverHttp(() => {
    const server = new McpServer({ name: "test-server", version: "1.0.0" });
    register(server);
    return server;
  }, options);
}

type StartOptions = { route?: (req: import("node:http").IncomingMessage, res: import("node:http").ServerResponse) => boolean };

/**
 * An MCP server on loopback whose tools/list answers `tools` exactly as given (paged by `pageSize`), built on the
 * SDK's low-level Server, so a test can offer any definition, bad ones included; tools/call answers with `call`.
 */
export async function startRawMcpServer(
  tools: () => Array<Record<string, unknown>>,
  call: (name: string, args: unknown) => Record<string, unknown> = (name) => ({ content: [{ type: "text", text: `called ${name}` }] }),
  options: StartOptions & { pageSize?: number; name?: string } = {},
): Promise<McpTestServer> {
  return serveOverHttp(() => {
    const server = new Server({ name: options.name ?? "raw-server", version: "2.0.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler("tools/list", async (request: any) => {
      const all = tools();
      const size = options.pageSize ?? all.length;
      const start = Number(request.params?.cursor ?? 0);
      const page = all.slice(start, start + size);
      return { tools: page as never, ...(start + size < all.length ? { nextCursor: String(start + size) } : {}) };
    });
    server.setRequestHandler("tools/call", async (request: any) => call(request.params.name, request.params.arguments) as never);
    return server;
  }, options);
}

async function serveOverHttp(factory: () => McpServer | Server, options: StartOptions = {}): Promise<McpTestServer> {
  const handler = createMcpHandler(factory);
  const seen: IncomingHttpHeaders[] = [];
  const methods: string[] = [];
  const http: HttpServer = createServer(async (req, res) => {
    seen.push(req.headers);
    if (options.route?.(req, res)) return;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    if (body.length > 0) {
      try {
        const msg = JSON.parse(body.toString("utf8"));
        for (const m of Array.isArray(msg) ? msg : [msg]) if (m.method) methods.push(m.method);
      } catch {
        // not JSON: the handler answers it
      }
    }
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
    const controller = new AbortController();
    res.on("close", () => controller.abort());
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers,
      body: req.method === "GET" || req.method === "HEAD" || body.length === 0 ? undefined : body,
      signal: controller.signal,
    });
    try {
      const response = await handler.fetch(request);
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (response.body) Readable.fromWeb(response.body as never).on("error", () => res.destroy()).pipe(res);
      else res.end();
    } catch (err) {
      res.writeHead(500).end(String(err));
    }
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const port = (http.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    seen,
    methods,
    close: async () => {
      http.closeAllConnections();
      await handler.close().catch(() => undefined);
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

export async function call(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Json }> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

export interface TestFabric {
  fabric: RunningFabric;
  registry: string;
  gateway: string;
  publish(nodeType: Json): Promise<void>;
  /** Runs a node type through the gateway (waiting up to 20 s) and answers the Run. */
  run(id: string, input?: Record<string, unknown>, version?: string): Promise<Json>;
  /** Starts a run without waiting. */
  start(id: string, input?: Record<string, unknown>, version?: string): Promise<Json>;
  get(runId: string): Promise<Json>;
  close(): Promise<void>;
}

/** A whole fabric serving `definitions` (default mcp.call), loopback egress allowed, secrets as FABRIC_SECRET_*. */
export async function openFabric(options: { flags?: Record<string, unknown>; secrets?: Record<string, string>; definitions?: AtomicDefinition[] } = {}): Promise<TestFabric> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-"));
  const config = loadConfig({
    cwd: dataDir,
    env: {},
    flags: { port_base: 0, data_dir: dataDir, log_level: "silent", executor: { egress: { allow_cidrs: ["127.0.0.1/32"] } }, ...options.flags } as never,
  });
  for (const [name, value] of Object.entries(options.secrets ?? {})) process.env[`FABRIC_SECRET_${name}`] = value;
  let fabric: RunningFabric;
  try {
    fabric = await startFabric(config, SERVICE_NAMES, { definitions: options.definitions ?? [mcpCall] });
  } finally {
    for (const name of Object.keys(options.secrets ?? {})) delete process.env[`FABRIC_SECRET_${name}`];
  }
  const registry = fabric.urls["node-registry"]!;
  const gateway = fabric.urls["run-gateway"]!;
  const end = Date.now() + 15_000;
  for (;;) {
    const r = await call("GET", `${registry}/v1/executors?node_type_id=mcp.call`);
    if (r.status === 200 && r.body.length > 0) break;
    if (Date.now() > end) throw new Error("the executor did not register mcp.call");
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return {
    fabric,
    registry,
    gateway,
    async publish(nodeType) {
      const r = await call("POST", `${registry}/v1/node-types`, { node_type: nodeType });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    },
    async run(id, input = {}, version = "1.0.0") {
      const r = await call("POST", `${gateway}/v1/runs`, { root_node_type_ref: { node_type_id: id, version }, input }, { prefer: "wait=20" });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(["completed", "failed"]).toContain(r.body.state);
      return r.body;
    },
    async start(id, input = {}, version = "1.0.0") {
      const r = await call("POST", `${gateway}/v1/runs`, { root_node_type_ref: { node_type_id: id, version }, input });
      expect([200, 201, 202], JSON.stringify(r.body)).toContain(r.status);
      return r.body;
    },
    async get(runId) {
      return (await call("GET", `${gateway}/v1/runs/${runId}`)).body;
    },
    async close() {
      await fabric.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A NodeType implemented by mcp.call@1.0.0 with `mcp` as its nodefabric.mcp. */
export function mcpBacked(id: string, mcp: Record<string, unknown>, extra: Record<string, unknown> = {}): Json {
  return {
    node_type_id: id,
    version: "1.0.0",
    kind: "atomic",
    description: `${id}, an MCP tool`,
    input_schema: { type: "object" },
    output_schema: { type: "object" },
    extensions: { "nodefabric.implementation": { node_type_id: "mcp.call", version: "1.0.0" }, "nodefabric.mcp": mcp },
    ...extra,
  };
}

export const errorOf = (run: Json) => run.extensions?.["nodefabric.error"];
export const outputsOf = (run: Json) => run.extensions?.["nodefabric.outputs"];

/** A free TCP port on loopback. */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** The reference server from npm, @modelcontextprotocol/server-everything: its entry point. */
export const SERVER_EVERYTHING = fileURLToPath(new URL("../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js", import.meta.url));

export interface ChildServer {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** server-everything in its Streamable HTTP mode, a child process on a loopback port. */
export async function startServerEverything(): Promise<ChildServer> {
  const port = await freePort();
  const child = spawn(process.execPath, [SERVER_EVERYTHING, "streamableHttp"], { env: { PATH: process.env.PATH ?? "", PORT: String(port) }, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stdout!.on("data", (d) => (log += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server-everything did not start: ${log}`)), 15_000);
    child.stderr!.on("data", (d) => {
      log += d;
      if (/listening on port/.test(log)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server-everything exited (${code}): ${log}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    child,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    },
  };
}
