/**
 * A tool call that streams its answer for longer than the executor's per-request time-out still completes within the
 * node type's time-out: mcp.call asks ctx.egress.fetch for the execution's remaining time. Run with the executor's
 * own egress fetch (the SDK runtime's), its per-request time-out made short.
 */
import { describe, it, expect, afterAll, beforeAll } from "vitest";
import { Agent } from "undici";
import { fromJsonSchema } from "@modelcontextprotocol/server";
import { HandlerError, type AtomicContext } from "@nodefabric/sdk";
import { createHandlerEgress, SecretBindings, silentLogger } from "@nodefabric/sdk/runtime";
import { callMcpTool, compileMcpConfig } from "../src/index.js";
import { startMcpServer, type McpTestServer } from "./mcp-fixtures.js";

let server: McpTestServer;
const agent = new Agent();

beforeAll(async () => {
  server = await startMcpServer((s) =>
    s.registerTool("slow", { description: "Answers after ms milliseconds", inputSchema: fromJsonSchema({ type: "object", properties: { ms: { type: "number" } } } as never) }, async (args: any) => {
      await new Promise((r) => setTimeout(r, args.ms));
      return { content: [{ type: "text", text: `done after ${args.ms} ms` }] };
    }),
  );
});
afterAll(async () => {
  await server?.close();
  await agent.close();
});

function contextFor(deadlineMs: number, perRequestTimeoutMs: number): AtomicContext {
  const controller = new AbortController();
  const nodeType = { node_type_id: "t.slow", version: "1.0.0", kind: "atomic" as const };
  return {
    run_id: "run_1",
    node_run_id: "nr_1",
    node_type_ref: nodeType,
    attempt: 1,
    signal: controller.signal,
    deadline: Date.now() + deadlineMs,
    log: silentLogger as never,
    fetch: globalThis.fetch,
    request: (() => Promise.reject(new Error("unused"))) as never,
    secrets: { get: () => undefined },
    nodeType,
    reportCost: () => undefined,
    egress: createHandlerEgress(controller.signal, perRequestTimeoutMs, agent, { get: () => undefined }, new SecretBindings()),
  } as AtomicContext;
}

describe("a long tool call", () => {
  for (const protocol of ["auto", "legacy"] as const) {
    it(`outlasts the executor's per-request time-out, within the node type's (${protocol})`, async () => {
      const config = compileMcpConfig({ node_type_id: "t.slow", version: "1.0.0" }, { url: server.url, tool: "slow", protocol });
      const outputs = await callMcpTool(config, { ms: 1_200 }, contextFor(10_000, 300));
      expect(outputs).toEqual({ content: [{ type: "text", text: "done after 1200 ms" }] });
    });
  }

  it("still ends at the node type's time-out", async () => {
    const config = compileMcpConfig({ node_type_id: "t.slow", version: "1.0.0" }, { url: server.url, tool: "slow", protocol: "legacy" });
    const started = Date.now();
    const failure = await callMcpTool(config, { ms: 5_000 }, contextFor(800, 300)).catch((e: unknown) => e);
    expect(HandlerError.is(failure)).toBe(true);
    expect(failure).toMatchObject({ code: "upstream_unavailable", details: { reason: "timeout" } });
    expect(Date.now() - started).toBeLessThan(3_000);
  });
});
