/**
 * The official Tasks requester (@modelcontextprotocol/ext-tasks) over the official client on 2025-11-25: a tool call
 * that runs as a task settles with the run's outputs.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { z } from "zod";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";
import { connect, startMcpFabric, type McpFabric } from "./support/mcp-fabric.js";

let f: McpFabric;
beforeAll(async () => {
  f = await startMcpFabric();
}, 30_000);
afterAll(async () => f?.close());

describe("@modelcontextprotocol/ext-tasks against /mcp", () => {
  it("calls demo.sleep through a task session and settles with its outputs", async () => {
    const client = await connect(f.mcpUrl, "2025-11-25", undefined, { tasks: { requests: { tools: { call: {} } } } });
    const session = createTaskSessionFromClient(client as never, { endpointId: "nodefabric-test" } as never);
    try {
      const execution = await session.callTool("demo.sleep", { ms: 300, value: "t" }, { task: { preference: "require" } } as never);
      const { outcome } = await execution.settle();
      const result = resultFromTaskOutcome(outcome) as { structuredContent?: unknown; isError?: boolean };
      expect(result.isError).toBeFalsy();
      expect(result.structuredContent).toEqual({ slept_ms: 300, value: "t" });
      // It ran as a task: the caller's task list holds its run.
      const runId = (result as { _meta?: Record<string, string> })._meta?.["dev.nodefabric/run_id"];
      const listed = (await client.request({ method: "tasks/list", params: {} } as never, z.any())) as { tasks: { taskId: string }[] };
      expect(listed.tasks.map((t) => t.taskId)).toContain(runId);
    } finally {
      await session.close();
      await client.close();
    }
  });
});
