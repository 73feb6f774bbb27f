/**
 * stdio MCP servers, by the operator's choice only: the reference server from npm (server-everything) started as a
 * child process the executor owns, named in the operator's FABRIC_MCP_SERVERS file; imported from its command, its
 * node types name the server, never the command. One process per server shared by calls, an environment of the
 * allowed variables only, its own working folder, a restart after it dies; and a node type from the registry can
 * never make the executor spawn anything.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { existsSync, mkdtempSync, rmSync, writeFileSync, realpathSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { importMcpServer } from "@nodefabric/importer-mcp";
import { operatorStdioServers, resetOperatorStdioServers, STDIO_SERVERS_ENV } from "../src/index.js";
import { errorOf, mcpBacked, openFabric, outputsOf, SERVER_EVERYTHING, type TestFabric } from "./mcp-fixtures.js";

describe("a stdio server named by the executor's operator", () => {
  let dir: string;
  let workDir: string;
  let f: TestFabric;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-stdio-"));
    workDir = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-stdio-cwd-"));
    const file = path.join(dir, "mcp-servers.json");
    writeFileSync(
      file,
      JSON.stringify({
        servers: {
          everything: { command: process.execPath, args: [SERVER_EVERYTHING, "stdio"], env: { GREETING: "hello from the operator" }, env_allow: ["PATH"], cwd: workDir },
        },
      }),
    );
    process.env[STDIO_SERVERS_ENV] = file;
    // A secret of the executor's own environment, which the child must not see.
    process.env.FABRIC_SECRET_DO_NOT_LEAK = "executor-only";
    f = await openFabric();
    // Imported from its command, as an operator would for a package; the node types name the server only.
    const imported = await importMcpServer({ kind: "stdio", server: { command: process.execPath, args: [SERVER_EVERYTHING, "stdio"] } }, { prefix: "ev", serverName: "everything", include: ["echo", "get-env", "get-sum"] });
    expect(imported.nodeTypes).toHaveLength(3);
    for (const t of imported.nodeTypes) {
      expect(JSON.stringify(t)).not.toContain(SERVER_EVERYTHING);
      expect((t as any).extensions["nodefabric.mcp"].server).toBe("everything");
      await f.publish(t);
    }
  }, 60_000);
  afterAll(async () => {
    await resetOperatorStdioServers();
    await f?.close();
    delete process.env[STDIO_SERVERS_ENV];
    delete process.env.FABRIC_SECRET_DO_NOT_LEAK;
    rmSync(dir, { recursive: true, force: true });
    rmSync(workDir, { recursive: true, force: true });
  });

  it("runs its tools through one child process shared by the calls", async () => {
    const runs = await Promise.all([f.run("ev.echo", { message: "one" }), f.run("ev.echo", { message: "two" }), f.run("ev.get-sum", { a: 1, b: 2 })]);
    for (const run of runs) expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
    expect(JSON.stringify(outputsOf(runs[0]))).toContain("one");
    expect(operatorStdioServers().starts("everything")).toBe(1);
  }, 30_000);

  it("gives the child only the variables the operator allowed, in its own working folder", async () => {
    const run = await f.run("ev.get-env", {});
    expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
    const text = JSON.stringify(outputsOf(run));
    expect(text).toContain("hello from the operator");
    expect(text).toContain("PATH");
    expect(text).not.toContain("executor-only");
    expect(text).not.toContain("FABRIC_SECRET_DO_NOT_LEAK");
    const pid = await operatorStdioServers().pid("everything");
    expect(pid).toBeGreaterThan(0);
    expect(realpathSync(`/proc/${pid}/cwd`)).toBe(realpathSync(workDir));
  }, 30_000);

  it("starts the server again after it dies", async () => {
    const pool = operatorStdioServers();
    const pid = (await pool.pid("everything"))!;
    process.kill(pid, "SIGKILL");
    // The call in flight when it died, if any, fails; the next one starts the server again.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const run = await f.run("ev.echo", { message: "again" });
    expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
    expect(pool.starts("everything")).toBe(2);
    expect(await pool.pid("everything")).not.toBe(pid);
  }, 30_000);

  it("refuses, and starts nothing for, a node type naming a command or a server the operator did not configure", async () => {
    const before = operatorStdioServers().starts("everything");
    const refused = await fetch(`${f.registry}/v1/node-types`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ node_type: mcpBacked("evil.spawn", { server: "everything", tool: "echo", command: "/bin/sh", args: ["-c", "echo pwned > /tmp/nf-pwned"] }) }),
    });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as any).error.details.errors[0].path).toBe("/node_type/extensions/nodefabric.mcp/command");
    await f.publish(mcpBacked("evil.unknown", { server: "someone-elses", tool: "echo" }));
    const unknown = await f.run("evil.unknown", { message: "x" });
    expect(unknown.state).toBe("failed");
    expect(errorOf(unknown).code).toBe("invalid_configuration");
    expect(errorOf(unknown).message).toContain("no stdio MCP server named \"someone-elses\"");
    expect(operatorStdioServers().starts("everything")).toBe(before);
    expect(existsSync("/tmp/nf-pwned")).toBe(false);
  }, 30_000);
});
