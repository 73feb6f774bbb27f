/**
 * A task outlives a crash of the fabric, because the task is the run: `fabric dev` (the built CLI, a child process)
 * is killed with SIGKILL while a task's run sleeps, started again on the same data folder, and the same task id,
 * asked of the new process, reads the run, which recovery finishes.
 */
import { describe, it, expect, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { startFabricProcess, type FabricProcess } from "../../../test/e2e/fabric-cli.js";
import { connect } from "./support/mcp-fabric.js";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const repo = fileURLToPath(new URL("../../..", import.meta.url));
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-mcp-restart-"));
let fabric: FabricProcess | undefined;

afterAll(async () => {
  await fabric?.stop("SIGKILL");
  fs.rmSync(dataDir, { recursive: true, force: true });
});

async function mcpUrlOf(p: FabricProcess): Promise<string> {
  for (let i = 0; i < 100; i++) {
    const m = /^mcp: (http:\/\/\S+)$/m.exec(p.output());
    if (m) return m[1]!;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no mcp line in the banner:\n${p.output()}`);
}

async function registered(gateway: string, registry: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await fetch(`${registry}/v1/node-types/demo.sleep`).catch(() => undefined))?.status === 200) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`demo.sleep never reached the registry behind ${gateway}`);
}

describe("a task across kill -9", () => {
  it("is read, and finishes, after the fabric is killed and started again", async () => {
    const args = ["dev", "--port-base", "0", "--data-dir", dataDir, "--handlers", "@nodefabric/handler-demo"];
    fabric = await startFabricProcess(args, { cwd: repo });
    await registered(fabric.urls["run-gateway"]!, fabric.urls["node-registry"]!);
    const first = await connect(await mcpUrlOf(fabric), "2025-11-25", undefined, { tasks: { requests: { tools: { call: {} } } } });
    const { task } = (await first.request({ method: "tools/call", params: { name: "demo.sleep", arguments: { ms: 1500, value: "kept" }, task: {} } } as never, z.any())) as Obj;
    expect(task.status).toBe("working");
    await new Promise((r) => setTimeout(r, 200));
    await fabric.stop("SIGKILL");
    await first.close().catch(() => undefined);

    fabric = await startFabricProcess(args, { cwd: repo });
    const second = await connect(await mcpUrlOf(fabric), "2025-11-25", undefined, { tasks: { requests: { tools: { call: {} } } } });
    const seen = (await second.request({ method: "tasks/get", params: { taskId: task.taskId } } as never, z.any())) as Obj;
    expect(seen.taskId).toBe(task.taskId);
    expect(["working", "completed"]).toContain(seen.status);
    const result = (await second.request({ method: "tasks/result", params: { taskId: task.taskId } } as never, z.any(), { timeout: 30_000 } as never)) as Obj;
    expect(result.structuredContent).toEqual({ slept_ms: 1500, value: "kept" });
    await second.close();
  }, 60_000);
});
