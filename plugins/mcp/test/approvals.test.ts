/**
 * A run that waits for an approval, seen through a task: input_required on 2025-11-25 (the protocol has it without
 * requests to carry), working on the 2026 extension, each with a status message naming the approval; approved
 * through the Run API, the task completes.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { connect, startMcpFabric, type McpFabric } from "./support/mcp-fabric.js";

const POLICY = `
@id("allow-the-rest")
permit(principal, action, resource);

@id("no-upstream")
forbid(principal, action == NodeFabric::Action::"run.start", resource == NodeFabric::NodeType::"demo.upstream");

@id("approve-sleep-execute")
@require_approval("true")
permit(principal, action == NodeFabric::Action::"node.run.execute", resource == NodeFabric::NodeType::"demo.sleep");
`;

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
let f: McpFabric;
beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-mcp-policy-"));
  fs.writeFileSync(path.join(dir, "policy.cedar"), POLICY);
  f = await startMcpFabric({ policy: path.join(dir, "policy.cedar") });
}, 30_000);
afterAll(async () => f?.close());

async function approvalOf(runId: string): Promise<string> {
  for (let i = 0; i < 100; i++) {
    const list = (await (await fetch(`${f.gateway}/v1/approvals?run_id=${runId}&state=pending`)).json()) as { approval_id: string }[];
    if (list.length > 0) return list[0]!.approval_id;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no approval appeared for ${runId}`);
}

describe("the PDP", () => {
  it("leaves out of tools/list what it would not let the caller start, and still decides each call", async () => {
    const c = await connect(f.mcpUrl, "2026-07-28");
    const names = (await c.listTools()).tools.map((t) => t.name);
    expect(names).toContain("demo.echo");
    expect(names).toContain("demo.sleep");
    expect(names).not.toContain("demo.upstream");
    const refused = await c.callTool({ name: "demo.upstream", arguments: { url: "http://127.0.0.1:9/" } });
    expect(refused.isError).toBe(true);
    expect((refused.content as { text: string }[])[0]!.text).toMatch(/^policy_denied: /);
    await c.close();
  });
});

describe("approvals during a task", () => {
  it("2025-11-25: input_required naming the approval, then completed once approved", async () => {
    const c = await connect(f.mcpUrl, "2025-11-25", undefined, { tasks: { requests: { tools: { call: {} } } } });
    const { task } = (await c.request({ method: "tools/call", params: { name: "demo.sleep", arguments: { ms: 10 }, task: {} } } as never, z.any())) as Obj;
    const approval = await approvalOf(task.taskId);
    const waiting = (await c.request({ method: "tasks/get", params: { taskId: task.taskId } } as never, z.any())) as Obj;
    expect(waiting.status).toBe("input_required");
    expect(waiting.statusMessage).toContain(`waiting for approval ${approval}`);
    expect((await fetch(`${f.gateway}/v1/approvals/${approval}:approve`, { method: "POST" })).status).toBe(204);
    const result = (await c.request({ method: "tasks/result", params: { taskId: task.taskId } } as never, z.any())) as Obj;
    expect(result.structuredContent).toEqual({ slept_ms: 10 });
    await c.close();
  });

  it("2026-07-28: working with a status message naming the approval", async () => {
    const meta = {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientInfo": { name: "raw", version: "1" },
      "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } },
    };
    const send = async (id: number, method: string, params: Obj) => {
      const name = params.name ?? params.taskId;
      const res = await fetch(f.mcpUrl, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": method, "mcp-name": name },
        body: JSON.stringify({ jsonrpc: "2.0", id, method, params: { ...params, _meta: meta } }),
      });
      return ((await res.json()) as Obj).result as Obj;
    };
    const created = await send(1, "tools/call", { name: "demo.sleep", arguments: { ms: 10 } });
    expect(created.resultType).toBe("task");
    const approval = await approvalOf(created.taskId);
    const waiting = await send(2, "tasks/get", { taskId: created.taskId });
    expect(waiting.status).toBe("working");
    expect(waiting.statusMessage).toContain(`waiting for approval ${approval}`);
    await fetch(`${f.gateway}/v1/approvals/${approval}:approve`, { method: "POST" });
    let got: Obj = {};
    for (let i = 0; i < 100 && got.status !== "completed"; i++) {
      await new Promise((r) => setTimeout(r, 50));
      got = await send(3 + i, "tasks/get", { taskId: created.taskId });
    }
    expect(got.result.structuredContent).toEqual({ slept_ms: 10 });
  });
});
