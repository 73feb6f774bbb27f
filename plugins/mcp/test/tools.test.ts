/**
 * /mcp with the official MCP client, in each protocol era: tools/list from the registry, tools/call as a run.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import type { Client } from "@modelcontextprotocol/client";
import { connect, startMcpFabric, type Era, type McpFabric } from "./support/mcp-fabric.js";

let f: McpFabric;
beforeAll(async () => {
  f = await startMcpFabric();
}, 30_000);
afterAll(async () => {
  await f?.close();
});

describe.each(["2025-06-18", "2025-11-25", "2026-07-28"] as Era[])("era %s", (era) => {
  let client: Client;
  beforeAll(async () => {
    client = await connect(f.mcpUrl, era);
  });
  afterAll(async () => {
    await client?.close();
  });

  it("speaks the era it was asked for", () => {
    expect(client.getNegotiatedProtocolVersion()).toBe(era);
    expect(client.getServerVersion()?.name).toBe("nodefabric");
  });

  it("lists the node types as tools, in node_type_id order, with their schemas and annotations", async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    expect(names).toEqual([...names].sort());
    expect(names).toEqual(expect.arrayContaining(["demo.echo", "demo.fail", "demo.sleep", "demo.upstream"]));
    const echo = tools.find((t) => t.name === "demo.echo")!;
    expect(echo.description).toBe("Echo: returns its inputs unchanged, as { echo: <inputs> }.");
    expect(echo.inputSchema).toEqual({ type: "object" });
    expect(echo.outputSchema).toEqual({ type: "object", properties: { echo: { type: "object" } }, required: ["echo"], additionalProperties: false });
    expect(echo.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false, openWorldHint: true });
  });

  it("runs demo.echo: structuredContent is the run's outputs, and the run is an ordinary run", async () => {
    const result = await client.callTool({ name: "demo.echo", arguments: { hello: era } });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toEqual({ echo: { hello: era } });
    expect(result.content).toEqual([{ type: "text", text: JSON.stringify({ echo: { hello: era } }) }]);
    const runId = (result._meta as Record<string, string>)["dev.nodefabric/run_id"];
    const run = (await (await fetch(`${f.gateway}/v1/runs/${runId}`)).json()) as { state: string; extensions: Record<string, unknown> };
    expect(run.state).toBe("completed");
    expect(run.extensions["nodefabric.outputs"]).toEqual(result.structuredContent);
  });

  it("a failed run is a tool error naming the code and message", async () => {
    const result = await client.callTool({ name: "demo.fail", arguments: { code: "boom", message: "it broke" } });
    expect(result.isError).toBe(true);
    expect(result.content).toEqual([{ type: "text", text: "boom: it broke" }]);
  });

  it("arguments that fail the input schema are a tool error, and start no run", async () => {
    const before = ((await (await fetch(`${f.gateway}/v1/runs?node_type_id=demo.sleep`)).json()) as unknown[]).length;
    const result = await client.callTool({ name: "demo.sleep", arguments: { ms: "soon" } });
    expect(result.isError).toBe(true);
    expect((result.content as { text: string }[])[0]!.text).toMatch(/^invalid_inputs: /);
    const after = ((await (await fetch(`${f.gateway}/v1/runs?node_type_id=demo.sleep`)).json()) as unknown[]).length;
    expect(after).toBe(before);
  });

  it("an unknown tool is a protocol error", async () => {
    await expect(client.callTool({ name: "no.such.tool", arguments: {} })).rejects.toMatchObject({ code: -32602 });
  });
});
