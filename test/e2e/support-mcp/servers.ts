/**
 * The MCP servers the end-to-end tests point the official tools at: a real `fabric dev` serving /mcp (plugin-mcp,
 * loaded by default when installed), and a reference, `@modelcontextprotocol/server-everything` in its Streamable HTTP
 * mode, which proves the harness reads the tools' verdicts right whatever the fabric does.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startFabricProcess, type FabricProcess } from "../fabric-cli.js";

export const repo = fileURLToPath(new URL("../../..", import.meta.url));
/** The node types the conformance suite calls by name (test_simple_text, …), as a handler package. */
export const CONFORMANCE_HANDLERS = path.join(repo, "test/e2e/support-mcp/conformance-handlers");

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export interface McpFabric {
  fabric: FabricProcess;
  /** The gateway (Run API). */
  gateway: string;
  /** Where MCP is served: the address the start banner printed, else the gateway's /mcp. */
  mcp: string;
  dataDir: string;
  stop(): Promise<void>;
}

/**
 * Starts `fabric dev` as a user would, on free ports, with the demo handlers and the conformance fixtures (or the
 * handlers given), and answers where its MCP endpoint is.
 */
export async function startMcpFabric(options: { handlers?: string[]; args?: string[]; env?: NodeJS.ProcessEnv } = {}): Promise<McpFabric> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-e2e-"));
  const handlers = options.handlers ?? ["@nodefabric/handler-demo", CONFORMANCE_HANDLERS];
  const args = ["dev", "--port-base", "0", "--data-dir", dataDir, "--handlers", ...handlers, ...(options.args ?? [])];
  const env = options.env ?? {};
  const fabric = await startFabricProcess(args, { cwd: repo, env });
  const gateway = fabric.urls["run-gateway"];
  // The banner's MCP line may follow the service list by a moment.
  let mcp: string | undefined;
  for (let i = 0; i < 20 && !mcp; i++) {
    mcp = /(http:\/\/[^\s"]+\/mcp)\b/.exec(fabric.output())?.[1];
    if (!mcp) await new Promise((r) => setTimeout(r, 100));
  }
  return {
    fabric,
    gateway,
    mcp: mcp ?? `${gateway}/mcp`,
    dataDir,
    async stop() {
      await fabric.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Waits until every id is a node type the registry serves and an executor runs. */
export async function waitForNodeTypes(registry: string, ids: string[], timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (const id of ids) {
    for (;;) {
      const r = await fetch(`${registry}/v1/executors?node_type_id=${encodeURIComponent(id)}`).catch(() => undefined);
      if (r?.ok && ((await r.json()) as unknown[]).length > 0) break;
      if (Date.now() > until) throw new Error(`node type ${id} was not registered in time`);
      await new Promise((res) => setTimeout(res, 100));
    }
  }
}

export interface ReferenceServer {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** Starts `mcp-server-everything streamableHttp` on a free loopback port and answers its /mcp URL. */
export async function startServerEverything(): Promise<ReferenceServer> {
  const require = createRequire(path.join(repo, "handlers/mcp/package.json"));
  const pkg = require.resolve("@modelcontextprotocol/server-everything/package.json");
  const entry = path.join(path.dirname(pkg), "dist/index.js");
  const port = await freePort();
  const child = spawn(process.execPath, [entry, "streamableHttp"], { env: { ...process.env, PORT: String(port) }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server-everything did not start:\n${out}`)), 15_000);
    const check = () => {
      if (/listening on port/i.test(out)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on("data", check);
    child.stderr!.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server-everything exited with ${code}:\n${out}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    child,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

export interface RecordedRequest {
  method: string;
  /** The JSON-RPC method(s) of the body, when it is JSON-RPC. */
  rpc: string[];
  /** `params.protocolVersion` of an initialize, or `_meta` protocol version of a 2026 request, when present. */
  bodyProtocolVersion?: string;
  headers: Record<string, string | string[] | undefined>;
  status?: number;
}

export interface RecordingProxy {
  url: string;
  requests: RecordedRequest[];
  stop(): Promise<void>;
}

/**
 * A loopback HTTP proxy in front of an MCP endpoint that records each request (HTTP method, JSON-RPC methods, protocol
 * version headers) and passes bodies through unchanged, streams included, so a test can see which era a client spoke.
 */
export async function startRecordingProxy(target: string): Promise<RecordingProxy> {
  const http = await import("node:http");
  const to = new URL(target);
  const requests: RecordedRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const rec: RecordedRequest = { method: req.method ?? "", rpc: [], headers: { ...req.headers } };
      try {
        const msg = JSON.parse(body.toString("utf8"));
        for (const m of Array.isArray(msg) ? msg : [msg]) {
          if (typeof m?.method === "string") rec.rpc.push(m.method);
          const v = m?.params?.protocolVersion ?? m?.params?._meta?.["io.modelcontextprotocol/protocolVersion"];
          if (typeof v === "string") rec.bodyProtocolVersion = v;
        }
      } catch {
        // not JSON: recorded by its HTTP method alone
      }
      requests.push(rec);
      const headers = { ...req.headers, host: to.host };
      const up = http.request({ host: to.hostname, port: to.port, path: to.pathname + to.search, method: req.method, headers }, (upRes) => {
        rec.status = upRes.statusCode;
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
      });
      up.on("error", (err) => {
        res.writeHead(502, { "content-type": "text/plain" });
        res.end(String(err));
      });
      up.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}${to.pathname}`,
    requests,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
