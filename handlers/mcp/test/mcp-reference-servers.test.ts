/**
 * The reference servers from npm that keep state, over stdio as an operator runs them: server-memory (a knowledge
 * graph in a file) and server-filesystem (one allowed folder). Imported from their commands: node types equal their
 * tools/list, schema for schema; runs give what a direct tools/call gives.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, realpathSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { importMcpServer } from "@nodefabric/importer-mcp";
import { CONTENT_OUTPUT_SCHEMA, resetOperatorStdioServers, STDIO_SERVERS_ENV } from "../src/index.js";
import { toDraft2020 } from "../src/schema-dialect.js";
import { errorOf, openFabric, outputsOf, type TestFabric } from "./mcp-fixtures.js";

const MEMORY = fileURLToPath(new URL("../../../node_modules/@modelcontextprotocol/server-memory/dist/index.js", import.meta.url));
const FILESYSTEM = fileURLToPath(new URL("../../../node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", import.meta.url));

let dir: string;
let files: string;
let memoryFile: string;
let f: TestFabric;
const servers = () => ({
  memory: { command: process.execPath, args: [MEMORY], env: { MEMORY_FILE_PATH: memoryFile } },
  files: { command: process.execPath, args: [FILESYSTEM, files] },
});

/** A direct client of one of the servers, as the inspector would be. */
async function direct(name: "memory" | "files"): Promise<Client> {
  const s = servers()[name];
  const client = new Client({ name: "test-inspector", version: "1.0.0" });
  await client.connect(new StdioClientTransport({ command: s.command, args: s.args, env: { PATH: process.env.PATH ?? "", ...("env" in s ? s.env : {}) }, stderr: "ignore" }));
  return client;
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-ref-"));
  files = realpathSync(mkdtempSync(path.join(os.tmpdir(), "nf-mcp-files-")));
  memoryFile = path.join(dir, "memory.jsonl");
  writeFileSync(path.join(files, "hello.txt"), "hello from a file\n");
  const config = path.join(dir, "servers.json");
  writeFileSync(config, JSON.stringify({ servers: servers() }));
  process.env[STDIO_SERVERS_ENV] = config;
  f = await openFabric();
}, 60_000);
afterAll(async () => {
  await resetOperatorStdioServers();
  await f?.close();
  delete process.env[STDIO_SERVERS_ENV];
  rmSync(dir, { recursive: true, force: true });
  rmSync(files, { recursive: true, force: true });
});

describe("server-memory over stdio", () => {
  it("imports its tools schema for schema, and its runs build the graph a direct client then reads", async () => {
    const imported = await importMcpServer({ kind: "stdio", server: servers().memory }, { prefix: "memory", serverName: "memory" });
    const client = await direct("memory");
    try {
      const { tools } = await client.listTools();
      expect(imported.nodeTypes.map((t: any) => t.node_type_id).sort()).toEqual(tools.map((t) => `memory.${t.name}`).sort());
      for (const tool of tools) {
        const t = imported.nodeTypes.find((n: any) => n.node_type_id === `memory.${tool.name}`) as any;
        expect(t.input_schema).toEqual(toDraft2020(tool.inputSchema as never));
        expect(t.output_schema).toEqual(tool.outputSchema ? toDraft2020(tool.outputSchema as never) : CONTENT_OUTPUT_SCHEMA);
      }
    } finally {
      await client.close();
    }
    for (const t of imported.nodeTypes) await f.publish(t);

    const created = await f.run("memory.create_entities", { entities: [{ name: "Ada", entityType: "person", observations: ["wrote the first program"] }] });
    expect(created.state, JSON.stringify(errorOf(created))).toBe("completed");
    const read = await f.run("memory.read_graph", {});
    expect(read.state, JSON.stringify(errorOf(read))).toBe("completed");
    expect(JSON.stringify(outputsOf(read))).toContain("wrote the first program");

    // The same file, read by a direct client: the same graph.
    await resetOperatorStdioServers();
    const again = await direct("memory");
    try {
      const answer = await again.callTool({ name: "read_graph", arguments: {} });
      const fromFabric = await f.run("memory.read_graph", {});
      expect(outputsOf(fromFabric)).toEqual(answer.structuredContent ?? { content: answer.content });
    } finally {
      await again.close();
    }
  }, 60_000);
});

describe("server-filesystem over stdio", () => {
  it("reads and writes only its allowed folder, as a direct client sees", async () => {
    const imported = await importMcpServer({ kind: "stdio", server: servers().files }, { prefix: "files", serverName: "files", include: ["read_text_file", "write_file", "list_directory"] });
    expect(imported.nodeTypes).toHaveLength(3);
    for (const t of imported.nodeTypes) await f.publish(t);
    const read = await f.run("files.read_text_file", { path: path.join(files, "hello.txt") });
    expect(read.state, JSON.stringify(errorOf(read))).toBe("completed");
    const client = await direct("files");
    try {
      const answer = await client.callTool({ name: "read_text_file", arguments: { path: path.join(files, "hello.txt") } });
      expect(outputsOf(read)).toEqual(answer.structuredContent ?? { content: answer.content });
      const written = await f.run("files.write_file", { path: path.join(files, "out.txt"), content: "written by a run" });
      expect(written.state, JSON.stringify(errorOf(written))).toBe("completed");
      expect(readFileSync(path.join(files, "out.txt"), "utf8")).toBe("written by a run");
      // Outside the allowed folder: the tool says no, and the run fails with tool_error, not retried.
      const outside = await f.run("files.read_text_file", { path: "/etc/hostname" });
      expect(outside.state).toBe("failed");
      expect(errorOf(outside)).toMatchObject({ code: "tool_error", retryable: false });
    } finally {
      await client.close();
    }
  }, 60_000);
});
