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
 * Starts `fabric dev` as a user would, on free ports, with the demo handlers and the conformance fixtures, and answers
 * where its MCP endpoint is.
 */
export async function startMcpFabric(extraArgs: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<McpFabric> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-e2e-"));
  const args = ["dev", "--port-base", "0", "--data-dir", dataDir, "--handlers", "@nodefabric/handler-demo", CONFORMANCE_HANDLERS, ...extraArgs];
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
