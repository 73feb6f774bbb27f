/**
 * Round trip with the MCP server plugin: the memory server from npm (stdio, named by the operator in
 * FABRIC_MCP_SERVERS) imported from its command with `fabric node-types import --from-mcp`, then served again through
 * the fabric's own `/mcp`. A client of `/mcp` sees the same tools (named `memory.<tool>`, schemas in 2020-12) and
 * gets the same results as a client of the server itself.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { runFabric, startFabricProcess, type FabricProcess } from "./fabric-cli.js";
import { call, eventually } from "../run-client.js";
import { repo } from "./local-registry.mjs";

const MEMORY = path.join(repo, "node_modules/@modelcontextprotocol/server-memory/dist/index.js");

let dir: string;
let memoryFile: string;
let fabric: FabricProcess;

/** The memory server itself, on the same file, as the inspector would connect to it. */
async function directClient(): Promise<Client> {
  const client = new Client({ name: "inspector", version: "1.0.0" });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [MEMORY], env: { PATH: process.env.PATH ?? "", MEMORY_FILE_PATH: memoryFile }, stderr: "ignore" }));
  return client;
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-roundtrip-"));
  memoryFile = path.join(dir, "memory.jsonl");
  const servers = path.join(dir, "mcp-servers.json");
  writeFileSync(servers, JSON.stringify({ servers: { memory: { command: process.execPath, args: [MEMORY], env: { MEMORY_FILE_PATH: memoryFile } } } }));
  fabric = await startFabricProcess(["dev", "--port-base", "0", "--data-dir", path.join(dir, ".fabric")], {
    cwd: repo,
    env: { FABRIC_MCP_SERVERS: servers, FABRIC_MCP_INCLUDE: "memory.*" },
  });
  await eventually(async () => ((await call("GET", `${fabric.urls["node-registry"]}/v1/node-types/mcp.call`)).status === 200 ? true : undefined), 30_000, "mcp.call published");
}, 90_000);

afterAll(async () => {
  await fabric?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("import the memory server, serve it again through /mcp", () => {
  it("shows the same tools and gives the same results as the server itself", async () => {
    const imported = await runFabric(["node-types", "import", "--from-mcp", `"${process.execPath}" ${MEMORY}`, "--prefix", "memory", "--server-name", "memory", "--registry", fabric.urls["node-registry"]!]);
    expect(imported.code, imported.stderr).toBe(0);
    expect(imported.stdout).toContain('The node types name the stdio server "memory"');
    // What the operator writes in the FABRIC_MCP_SERVERS file to have the executor start it.
    expect(imported.stdout).toContain(JSON.stringify({ servers: { memory: { command: process.execPath, args: [MEMORY], env_allow: ["PATH", "HOME"] } } }));

    const direct = await directClient();
    const served = new Client({ name: "inspector", version: "1.0.0" });
    try {
      const upstream = (await direct.listTools()).tools;
      await served.connect(new StreamableHTTPClientTransport(new URL(`${fabric.urls["run-gateway"]}/mcp`)));
      const ours = await eventually(async () => {
        const { tools } = await served.listTools(undefined, { cacheMode: "refresh" } as never);
        return tools.length >= upstream.length ? tools : undefined;
      }, 10_000, "the imported tools on /mcp");
      expect(ours.map((t) => t.name).sort()).toEqual(upstream.map((t) => `memory.${t.name}`).sort());
      for (const tool of upstream) {
        const mine = ours.find((t) => t.name === `memory.${tool.name}`)!;
        expect(mine.description).toBe(tool.description);
        const { $schema: _a, ...input } = tool.inputSchema as Record<string, unknown>;
        expect(mine.inputSchema).toEqual(input);
        expect(mine.annotations?.readOnlyHint ?? false).toBe(tool.annotations?.readOnlyHint ?? false);
      }

      const created = await served.callTool({ name: "memory.create_entities", arguments: { entities: [{ name: "Ada", entityType: "person", observations: ["wrote the first program"] }] } });
      expect(created.isError ?? false, JSON.stringify(created)).toBe(false);
      const viaFabric = await served.callTool({ name: "memory.read_graph", arguments: {} });
      const viaServer = await direct.callTool({ name: "read_graph", arguments: {} });
      expect(viaFabric.structuredContent).toEqual(viaServer.structuredContent);
      expect(JSON.stringify(viaFabric.structuredContent)).toContain("wrote the first program");
    } finally {
      await served.close();
      await direct.close();
    }
  }, 90_000);
});
