/**
 * Tasks with the official client: a task is the run. The 2025-11-25 experimental tasks (params.task, tasks/get,
 * tasks/result, tasks/cancel, tasks/list) and the 2026-07-28 tasks extension (the server answers resultType "task";
 * tasks/get carries the result; tasks/cancel). Task ids are bound to their caller; a forged one is not found.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { z } from "zod";
import type { Client } from "@modelcontextprotocol/client";
import { connect, startMcpFabric, type McpFabric } from "./support/mcp-fabric.js";

const TASKS = "io.modelcontextprotocol/tasks";
const any = z.any();
let f: McpFabric;
beforeAll(async () => {
  f = await startMcpFabric();
}, 30_000);
afterAll(async () => {
  await f?.close();
});

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const req = (c: Client, method: string, params: Obj): Promise<Obj> => c.request({ method, params } as never, any) as Promise<Obj>;
const runState = async (id: string) => ((await (await fetch(`${f.gateway}/v1/runs/${id}`)).json()) as { state: string }).state;

describe("2025-11-25 experimental tasks", () => {
  let c: Client;
  beforeAll(async () => {
    c = await connect(f.mcpUrl, "2025-11-25", undefined, { tasks: { requests: { tools: { call: {} } } } });
  });
  afterAll(async () => c?.close());

  it("advertises tasks and marks tools as task-capable", async () => {
    expect(c.getServerCapabilities()?.tasks).toMatchObject({ list: {}, cancel: {}, requests: { tools: { call: {} } } });
    const { tools } = await c.listTools();
    expect(tools.find((t) => t.name === "demo.sleep")?.execution).toEqual({ taskSupport: "optional" });
  });

  it("a tools/call with params.task answers a task at once; the task is the run; tasks/result waits for its end", async () => {
    const created = await req(c, "tools/call", { name: "demo.sleep", arguments: { ms: 400, value: "v" }, task: { ttl: 60_000 } });
    const task = created.task as Obj;
    expect(task.taskId).toMatch(/^mcp-[0-9a-f]{32}$/);
    expect(task.status).toBe("working");
    expect(task.pollInterval).toBe(1000);
    expect(["queued", "running"]).toContain(await runState(task.taskId));
    const got = await req(c, "tasks/get", { taskId: task.taskId });
    expect(got.taskId).toBe(task.taskId);
    const result = await req(c, "tasks/result", { taskId: task.taskId });
    expect(result.structuredContent).toEqual({ slept_ms: 400, value: "v" });
    expect(result._meta["io.modelcontextprotocol/related-task"]).toEqual({ taskId: task.taskId });
    expect((await req(c, "tasks/get", { taskId: task.taskId })).status).toBe("completed");
    const listed = await req(c, "tasks/list", {});
    expect((listed.tasks as Obj[]).map((t) => t.taskId)).toContain(task.taskId);
  });

  it("a failed run is a failed task whose result is a tool error", async () => {
    const { task } = await req(c, "tools/call", { name: "demo.fail", arguments: { code: "nope", message: "no" }, task: {} });
    const result = await req(c, "tasks/result", { taskId: task.taskId });
    expect(result.isError).toBe(true);
    expect(result.content).toEqual([{ type: "text", text: "nope: no" }]);
    expect((await req(c, "tasks/get", { taskId: task.taskId })).status).toBe("failed");
  });

  it("tasks/cancel cancels the run", async () => {
    const { task } = await req(c, "tools/call", { name: "demo.sleep", arguments: { ms: 30_000 }, task: {} });
    const cancelled = await req(c, "tasks/cancel", { taskId: task.taskId });
    expect(cancelled.status).toBe("cancelled");
    expect(await runState(task.taskId)).toBe("canceled");
  });

  it("a forged or unknown task id is not found, and a run not started as a task is no task", async () => {
    await expect(req(c, "tasks/get", { taskId: "mcp-00000000000000000000000000000000" })).rejects.toMatchObject({ code: -32602 });
    await expect(req(c, "tasks/get", { taskId: "../../v1/runs" })).rejects.toMatchObject({ code: -32602 });
    const plain = (await (await fetch(`${f.gateway}/v1/runs`, { method: "POST", headers: { "content-type": "application/json", prefer: "wait=10" }, body: JSON.stringify({ root_node_type_ref: { node_type_id: "demo.echo" }, input: {}, run_id: "mcp-11111111111111111111111111111111" }) })).json()) as { run_id: string };
    await expect(req(c, "tasks/get", { taskId: plain.run_id })).rejects.toMatchObject({ code: -32602 });
  });
});

/**
 * The official client (2.4.0) has no runtime for the 2026 tasks extension (it refuses resultType "task"), so these
 * requests are sent as a 2026-07-28 client sends them: the per-request envelope and the standard headers.
 */
let nextId = 100;
async function modern(method: string, params: Obj, withTasks = true): Promise<Obj> {
  const name = (params.name ?? params.taskId) as string | undefined;
  const res = await fetch(f.mcpUrl, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": method,
      ...(name ? { "mcp-name": name } : {}),
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: nextId++,
      method,
      params: {
        ...params,
        _meta: {
          "io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientInfo": { name: "raw", version: "1" },
          "io.modelcontextprotocol/clientCapabilities": withTasks ? { extensions: { [TASKS]: {} } } : {},
        },
      },
    }),
  });
  const text = await res.text();
  const json = res.headers.get("content-type")?.includes("text/event-stream") ? JSON.parse(/^data: (.*)$/m.exec(text)![1]!) : JSON.parse(text);
  return json as Obj;
}

describe("2026-07-28 tasks extension", () => {
  it("advertises the extension in server/discover", async () => {
    const c = await connect(f.mcpUrl, "2026-07-28");
    expect(c.getServerCapabilities()?.extensions).toMatchObject({ [TASKS]: {} });
    await c.close();
  });

  it("a call that ends quickly answers its result; a long one answers resultType task, and tasks/get carries the result", async () => {
    const quick = await modern("tools/call", { name: "demo.echo", arguments: { a: 1 } });
    expect(quick.result.structuredContent).toEqual({ echo: { a: 1 } });
    const created = (await modern("tools/call", { name: "demo.sleep", arguments: { ms: 1600 } })).result as Obj;
    expect(created.resultType).toBe("task");
    expect(created.status).toBe("working");
    expect(created.taskId).toMatch(/^mcp-[0-9a-f]{32}$/);
    expect(created.ttlMs).toBeNull();
    let got: Obj = {};
    for (let i = 0; i < 60 && got.status !== "completed"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      got = (await modern("tasks/get", { taskId: created.taskId })).result as Obj;
    }
    expect(got.status).toBe("completed");
    expect(got.resultType).toBe("complete");
    expect(got.result.structuredContent).toEqual({ slept_ms: 1600 });
  });

  it("tasks/cancel cancels the run with an empty acknowledgement, again too; tasks/update is acknowledged", async () => {
    const created = (await modern("tools/call", { name: "demo.sleep", arguments: { ms: 30_000 } })).result as Obj;
    expect(created.resultType).toBe("task");
    expect((await modern("tasks/update", { taskId: created.taskId, inputResponses: {} })).result).toBeDefined();
    const ack = (await modern("tasks/cancel", { taskId: created.taskId })).result as Obj;
    expect(ack.taskId).toBeUndefined();
    expect(ack.status).toBeUndefined();
    expect(await runState(created.taskId)).toBe("canceled");
    expect(((await modern("tasks/get", { taskId: created.taskId })).result as Obj).status).toBe("cancelled");
    const again = (await modern("tasks/cancel", { taskId: created.taskId })).result as Obj;
    expect(again.status).toBeUndefined();
  });

  it("a request that does not declare the extension gets -32021 from the task methods", async () => {
    const created = (await modern("tools/call", { name: "demo.sleep", arguments: { ms: 2000 } })).result as Obj;
    for (const [method, params] of [["tasks/get", {}], ["tasks/cancel", {}], ["tasks/update", { inputResponses: {} }]] as const) {
      const res = await modern(method, { taskId: created.taskId, ...params }, false);
      expect(res.error.code).toBe(-32021);
      expect(res.error.data.requiredCapabilities).toEqual({ extensions: { [TASKS]: {} } });
    }
    expect(await runState(created.taskId)).not.toBe("canceled");
  });

  it("a forged task id is an error, never a 500", async () => {
    const res = await modern("tasks/get", { taskId: "mcp-0123456789abcdef0123456789abcdef" });
    expect(res.error.code).toBe(-32602);
  });

  it("without the extension declared, a long call answers its result", async () => {
    const plain = await connect(f.mcpUrl, "2026-07-28");
    const r = await plain.callTool({ name: "demo.sleep", arguments: { ms: 1200 } });
    expect(r.structuredContent).toEqual({ slept_ms: 1200 });
    await plain.close();
  });
});
