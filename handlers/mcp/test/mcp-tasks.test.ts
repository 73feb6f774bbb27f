/**
 * A task-required tool (simulate-research-query of server-everything, from npm, over Streamable HTTP on loopback) is
 * called as an MCP task; its ids are saved with the NodeRun, and an execution that has them resumes polling the
 * same task instead of calling the tool again.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { HandlerError, type AtomicContext, type JsonObject } from "@nodefabric/sdk";
import { createHandlerEgress, SecretBindings } from "@nodefabric/sdk/runtime";
import { Agent } from "undici";
import { callMcpTool, compileMcpConfig, toolDefinitionHash } from "../src/index.js";
import { errorOf, mcpBacked, openFabric, outputsOf, startServerEverything, type ChildServer, type TestFabric } from "./mcp-fixtures.js";

let everything: ChildServer;
let f: TestFabric;
let toolHash: string;
const agent = new Agent();

beforeAll(async () => {
  [f, everything] = await Promise.all([openFabric(), startServerEverything()]);
  const client = new Client({ name: "t", version: "1" }, { versionNegotiation: { mode: "legacy" } as never });
  await client.connect(new StreamableHTTPClientTransport(new URL(everything.url)));
  const tool = (await client.listTools()).tools.find((t) => t.name === "simulate-research-query")!;
  expect((tool as any).execution?.taskSupport).toBe("required");
  toolHash = toolDefinitionHash(tool as never);
  await client.close();
}, 60_000);
afterAll(async () => {
  await f?.close();
  await everything?.stop();
  await agent.close();
});

/** A context whose upstream requests are counted by JSON-RPC method, and whose fetch can be made to fail. */
function contextFor(checkpoint: JsonObject | undefined, saved: JsonObject[], methods: string[], failAfterCheckpoint = false): AtomicContext {
  const controller = new AbortController();
  const nodeType = { node_type_id: "t.research", version: "1.0.0", kind: "atomic" as const };
  const egress = createHandlerEgress(controller.signal, 30_000, agent, { get: () => undefined }, new SecretBindings());
  const fetch = (async (input: any, init?: any) => {
    const body = typeof init?.body === "string" ? init.body : "";
    const method = /"method":"([^"]+)"/.exec(body)?.[1];
    if (method) methods.push(method);
    if (failAfterCheckpoint && saved.length > 0 && method === "tasks/get") throw new HandlerError("upstream_unavailable", "the executor died", { retryable: true, details: { reason: "connection_reset" } });
    return egress.fetch(input, init);
  }) as typeof globalThis.fetch;
  return {
    run_id: "run_1",
    node_run_id: "nr_1",
    node_type_ref: nodeType,
    attempt: checkpoint ? 2 : 1,
    signal: controller.signal,
    deadline: Date.now() + 60_000,
    log: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
    fetch: globalThis.fetch,
    request: (() => Promise.reject(new Error("unused"))) as never,
    secrets: { get: () => undefined },
    nodeType,
    reportCost: () => undefined,
    reportProgress: () => undefined,
    ...(checkpoint ? { checkpoint } : {}),
    saveCheckpoint: async (data: JsonObject) => {
      saved.push(data);
    },
    egress: { fetch, secretFor: egress.secretFor },
  } as AtomicContext;
}

describe("MCP tasks", () => {
  it("runs a task-required tool as a task through the fabric", async () => {
    await f.publish(mcpBacked("everything.research", { url: everything.url, tool: "simulate-research-query", tool_hash: toolHash }));
    const run = await f.run("everything.research", { topic: "durable calls" });
    expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
    expect(JSON.stringify(outputsOf(run))).toContain("durable calls");
    const nodeRun = await fetch(`${f.gateway}/v1/node-runs/${run.root_node_run_id}`).then((r) => r.json() as Promise<any>);
    expect(nodeRun.extensions["nodefabric.checkpoint"].data.mcp_task).toMatchObject({ url: everything.url, tool: "simulate-research-query", task_id: expect.any(String) });
  }, 40_000);

  it("cancels the upstream task with tasks/cancel when the run is canceled", async () => {
    const started = await f.start("everything.research", { topic: "canceled research" });
    let task: any;
    const until = Date.now() + 15_000;
    while (!task && Date.now() < until) {
      const nodeRun = await fetch(`${f.gateway}/v1/node-runs/${started.root_node_run_id}`).then((r) => r.json() as Promise<any>);
      task = nodeRun.extensions?.["nodefabric.checkpoint"]?.data?.mcp_task;
      if (!task) await new Promise((r) => setTimeout(r, 50));
    }
    expect(task).toBeDefined();
    expect((await fetch(`${f.gateway}/v1/runs/${started.run_id}:cancel`, { method: "POST" })).status).toBeLessThan(300);
    // The task, asked in the session that created it, ends cancelled.
    const statusOf = async () => {
      const res = await fetch(everything.url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": task.session_id, "mcp-protocol-version": "2025-11-25" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tasks/get", params: { taskId: task.task_id } }),
      });
      return /"status":"([a-z_]+)"/.exec(await res.text())?.[1];
    };
    const end = Date.now() + 5_000;
    let status = await statusOf();
    while (status !== "cancelled" && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 100));
      status = await statusOf();
    }
    expect(status).toBe("cancelled");
    expect((await f.get(started.run_id)).state).toBe("canceled");
  }, 40_000);

  it("resumes the saved task after the execution that started it was lost, calling the tool once", async () => {
    const config = compileMcpConfig({ node_type_id: "t.research", version: "1.0.0" }, { url: everything.url, tool: "simulate-research-query", tool_hash: toolHash });
    const saved: JsonObject[] = [];
    const methods: string[] = [];
    const lost = await callMcpTool(config, { topic: "resumption" }, contextFor(undefined, saved, methods, true)).catch((e: unknown) => e);
    expect(HandlerError.is(lost)).toBe(true);
    expect(saved).toHaveLength(1);
    const taskId = (saved[0]!.mcp_task as any).task_id;
    expect(methods.filter((m) => m === "tools/call")).toHaveLength(1);

    const resumedMethods: string[] = [];
    const outputs = await callMcpTool(config, { topic: "resumption" }, contextFor(saved[0], [], resumedMethods));
    expect(JSON.stringify(outputs)).toContain("resumption");
    expect(resumedMethods).not.toContain("tools/call");
    expect(resumedMethods).toContain("tasks/get");
    expect(resumedMethods).toContain("tasks/result");
    expect(taskId).toBeTruthy();
  }, 40_000);
});
