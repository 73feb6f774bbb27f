/**
 * The operator's FABRIC_MCP_SERVERS file is checked when the package is loaded: a bad one fails the load with a message
 * naming the file and the field (an executor that names the package then does not start), and a good one loads.
 */
import { describe, it, expect, afterAll, afterEach, vi } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

const dir = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-servers-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => {
  delete process.env.FABRIC_MCP_SERVERS;
  vi.resetModules();
});

async function loadWith(content: string | undefined): Promise<unknown> {
  const file = path.join(dir, `servers-${Math.random().toString(36).slice(2)}.json`);
  if (content !== undefined) writeFileSync(file, content);
  process.env.FABRIC_MCP_SERVERS = file;
  vi.resetModules();
  return import("../src/index.js");
}

describe("FABRIC_MCP_SERVERS", () => {
  it("refuses a file that is missing, not JSON, or names a server badly, naming what is wrong", async () => {
    await expect(loadWith(undefined)).rejects.toThrow(/FABRIC_MCP_SERVERS=.*servers-.*\.json: ENOENT/);
    await expect(loadWith("{ not json")).rejects.toThrow(/FABRIC_MCP_SERVERS=.*JSON/);
    await expect(loadWith(JSON.stringify({ memory: { command: "x" } }))).rejects.toThrow(/must hold \{ "servers"/);
    await expect(loadWith(JSON.stringify({ servers: { memory: { args: ["x"] } } }))).rejects.toThrow(/stdio server "memory": command must be a non-empty string/);
    await expect(loadWith(JSON.stringify({ servers: { memory: { command: "x", cwd: "relative/dir" } } }))).rejects.toThrow(/cwd must be an absolute path/);
    await expect(loadWith(JSON.stringify({ servers: { memory: { command: "x", shell: true } } }))).rejects.toThrow(/shell is not an option/);
  });

  it("loads with a good file", async () => {
    const mod = (await loadWith(JSON.stringify({ servers: { memory: { command: "npx", args: ["-y", "@modelcontextprotocol/server-memory"], env_allow: ["PATH", "HOME"] } } }))) as { mcpCall: { nodeType: { node_type_id: string } } };
    expect(mod.mcpCall.nodeType.node_type_id).toBe("mcp.call");
  });
});
