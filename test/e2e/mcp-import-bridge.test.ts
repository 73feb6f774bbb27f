/**
 * server-memory and server-filesystem (from npm, stdio servers) over Streamable HTTP through a third-party bridge,
 * supergateway (a devDependency of handlers/mcp), on loopback: `fabric node-types import --from-mcp <bridge url>`
 * publishes node types equal to the bridged tools/list, schema for schema, and runs through a whole fabric give what a
 * direct tools/call through the bridge gives.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { nodeTypesImportMcp } from "../../core/src/cli/node-types-import-mcp.js";
import { toDraft2020 } from "../../handlers/mcp/src/schema-dialect.js";
import { CONTENT_OUTPUT_SCHEMA } from "../../handlers/mcp/src/index.js";
import { errorOf, freePort, openFabric, outputsOf, type TestFabric } from "../../handlers/mcp/test/mcp-fixtures.js";

const modules = fileURLToPath(new URL("../../node_modules/", import.meta.url));
const SUPERGATEWAY = path.join(modules, "supergateway/dist/index.js");
const MEMORY = path.join(modules, "@modelcontextprotocol/server-memory/dist/index.js");
const FILESYSTEM = path.join(modules, "@modelcontextprotocol/server-filesystem/dist/index.js");

interface Bridge {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** supergateway serving the stdio command `stdio` over stateful Streamable HTTP on a loopback port. */
async function startBridge(stdio: string, env: Record<string, string> = {}): Promise<Bridge> {
  const port = await freePort();
  const child = spawn(process.execPath, [SUPERGATEWAY, "--stdio", stdio, "--outputTransport", "streamableHttp", "--stateful", "--port", String(port), "--healthEndpoint", "/healthz", "--logLevel", "info"], {
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let log = "";
  child.stdout!.on("data", (d) => (log += d));
  child.stderr!.on("data", (d) => (log += d));
  const end = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`supergateway exited (${child.exitCode}): ${log}`);
    const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false);
    if (ok) break;
    if (Date.now() > end) throw new Error(`supergateway did not start: ${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    child,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      // supergateway's own child (the stdio server) is in its process group.
      process.kill(-child.pid!, "SIGKILL");
      await exited;
    },
  };
}

async function connect(url: string): Promise<Client> {
  const client = new Client({ name: "test-inspector", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

async function importFrom(f: TestFabric, url: string, prefix: string): Promise<string> {
  let stdout = "";
  let stderr = "";
  const code = await nodeTypesImportMcp(f.registry, { fromMcp: url, prefix }, { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) } });
  expect(code, stderr).toBe(0);
  return stdout;
}

/** The imported node types equal the bridged tools/list, schema for schema. */
async function expectSameTools(f: TestFabric, direct: Client, prefix: string): Promise<void> {
  const { tools } = await direct.listTools();
  expect(tools.length).toBeGreaterThan(2);
  for (const tool of tools) {
    const res = await fetch(`${f.registry}/v1/node-types/${encodeURIComponent(`${prefix}.${tool.name}`)}?version=1.0.0`);
    expect(res.status, `${prefix}.${tool.name}`).toBe(200);
    const t = (await res.json()) as any;
    expect(t.input_schema, tool.name).toEqual(toDraft2020(tool.inputSchema as never));
    expect(t.output_schema, tool.name).toEqual(tool.outputSchema ? toDraft2020(tool.outputSchema as never) : CONTENT_OUTPUT_SCHEMA);
    expect(t.description, tool.name).toBe(tool.description);
  }
}

/** What a direct tools/call gives, as the node type's outputs. */
function asOutputs(answer: any): unknown {
  return answer.structuredContent ?? { content: answer.content };
}

describe("stdio reference servers over Streamable HTTP through supergateway", () => {
  let dir: string;
  let memory: Bridge;
  let files: Bridge;
  let f: TestFabric;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-bridge-"));
    writeFileSync(path.join(dir, "hello.txt"), "hello through the bridge\n");
    [memory, files, f] = await Promise.all([
      startBridge(`"${process.execPath}" "${MEMORY}"`, { MEMORY_FILE_PATH: path.join(dir, "memory.jsonl") }),
      startBridge(`"${process.execPath}" "${FILESYSTEM}" "${dir}"`),
      openFabric(),
    ]);
  }, 45_000);
  afterAll(async () => {
    await f?.close();
    await memory?.stop();
    await files?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("server-memory: imported schema for schema, and its runs give what tools/call through the bridge gives", async () => {
    const out = await importFrom(f, memory.url, "memory");
    expect(out).toMatch(/published \d+ node types of the MCP server memory-server/);
    const direct = await connect(memory.url);
    try {
      await expectSameTools(f, direct, "memory");
      const created = await f.run("memory.create_entities", { entities: [{ name: "Ada", entityType: "person", observations: ["wrote the first program"] }] });
      expect(created.state, JSON.stringify(errorOf(created))).toBe("completed");
      expect(JSON.stringify(outputsOf(created))).toContain("wrote the first program");
      const graph = await f.run("memory.read_graph", {});
      expect(graph.state, JSON.stringify(errorOf(graph))).toBe("completed");
      expect(outputsOf(graph)).toEqual(asOutputs(await direct.callTool({ name: "read_graph", arguments: {} })));
      expect(JSON.stringify(outputsOf(graph))).toContain("Ada");
    } finally {
      await direct.close();
    }
  }, 30_000);

  it("server-filesystem: imported schema for schema; a read gives what tools/call gives, a path outside its folder is a tool_error", async () => {
    await importFrom(f, files.url, "files");
    const direct = await connect(files.url);
    try {
      await expectSameTools(f, direct, "files");
      const file = path.join(dir, "hello.txt");
      const read = await f.run("files.read_text_file", { path: file });
      expect(read.state, JSON.stringify(errorOf(read))).toBe("completed");
      expect(outputsOf(read)).toEqual(asOutputs(await direct.callTool({ name: "read_text_file", arguments: { path: file } })));
      expect(JSON.stringify(outputsOf(read))).toContain("hello through the bridge");
      const outside = await f.run("files.read_text_file", { path: "/etc/hostname" });
      expect(outside.state).toBe("failed");
      expect(errorOf(outside).code).toBe("tool_error");
    } finally {
      await direct.close();
    }
  }, 30_000);
});
