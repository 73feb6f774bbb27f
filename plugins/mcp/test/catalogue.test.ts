/**
 * A catalogue of 1,000 node types (an imported API's operations): tools/list pages through them in order; search
 * mode exposes a search tool backed by Selection and a tool that runs any exposed node type; include and exclude
 * patterns choose what is exposed; a registry change is announced (tools/list_changed) to listening 2026 clients.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { connect, startMcpFabric, type McpFabric } from "./support/mcp-fabric.js";

const N = 1000;
const ops = Array.from({ length: N }, (_, i) => {
  const n = String(i).padStart(4, "0");
  const topic = i === 421 ? "refund a customer's card payment" : `read ledger page ${n} of the accounting books`;
  return {
    node_type_id: `bigapi.op${n}`,
    version: "1.0.0",
    kind: "atomic",
    description: `Operation ${n}: ${topic}`,
    input_schema: { type: "object", properties: { id: { type: "string" } } },
    constraints: { gates: { side_effect_class: i === 421 ? "irreversible" : "read" } },
  };
});

async function publish(registry: string): Promise<void> {
  for (let i = 0; i < ops.length; i += 500) {
    const res = await fetch(`${registry}/v1/node-types:batch`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ node_types: ops.slice(i, i + 500) }) });
    expect(res.status).toBe(200);
  }
}

describe("a catalogue of 1,000 node types, every one a tool", () => {
  let f: McpFabric;
  beforeAll(async () => {
    f = await startMcpFabric({ mcp: { exclude: ["demo.upstream"], refreshMs: 200 } });
    await publish(f.fabric.services.find((s) => s.name === "node-registry")!.url);
  }, 30_000);
  afterAll(async () => f?.close());

  it("pages through every tool in node_type_id order, 100 a page, each once", async () => {
    const client = await connect(f.mcpUrl, "2025-11-25");
    // Without a cursor the client walks every page itself.
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names.length).toBe(new Set(names).size);
    expect(names).toEqual([...names].sort());
    expect(names.filter((n) => n.startsWith("bigapi.")).length).toBe(N);
    expect(names).toContain("demo.echo");
    expect(names).not.toContain("demo.upstream");
    const page = await client.listTools({ cursor: Buffer.from(JSON.stringify({ after: "bigapi.op0420" })).toString("base64url") });
    expect(page.tools.length).toBe(100);
    expect(page.nextCursor).toBeDefined();
    const refund = page.tools[0]!;
    expect(refund.name).toBe("bigapi.op0421");
    expect(refund.annotations).toMatchObject({ destructiveHint: true, readOnlyHint: false });
    const next = await client.listTools({ cursor: page.nextCursor! });
    expect(next.tools[0]!.name).toBe("bigapi.op0521");
    await expect(client.listTools({ cursor: "not-a-cursor" })).rejects.toMatchObject({ code: -32602 });
    await client.close();
  });

  it("announces a registry change to a listening 2026-07-28 client", async () => {
    const client = await connect(f.mcpUrl, "2026-07-28");
    let changed = 0;
    client.setNotificationHandler("notifications/tools/list_changed" as never, (() => {
      changed++;
    }) as never);
    const listen = (client as unknown as { listen?: (o: unknown) => Promise<unknown> }).listen;
    if (typeof listen !== "function") {
      await client.close();
      throw new Error("the client has no listen(): see the SDK for subscriptions/listen");
    }
    const sub = (await listen.call(client, { toolsListChanged: true })) as { honoredFilter: unknown; close(): Promise<void> };
    expect(sub.honoredFilter).toMatchObject({ toolsListChanged: true });
    await client.listTools();
    const registry = f.fabric.services.find((s) => s.name === "node-registry")!.url;
    await fetch(`${registry}/v1/node-types`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ node_type: { ...ops[0], node_type_id: "bigapi.zzz-new", version: "1.0.0" } }) });
    for (let i = 0; i < 60 && changed === 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(changed).toBeGreaterThanOrEqual(1);
    expect((await client.listTools()).tools.map((t) => t.name)).toContain("bigapi.zzz-new");
    await sub.close();
    await client.close();
  });
});

describe("search mode", () => {
  let f: McpFabric;
  beforeAll(async () => {
    f = await startMcpFabric({ mcp: { mode: "search" } });
    await publish(f.fabric.services.find((s) => s.name === "node-registry")!.url);
  }, 30_000);
  afterAll(async () => f?.close());

  it("lists two tools, finds the node type that fits a goal with its schema, and runs one", async () => {
    for (const era of ["2025-11-25", "2026-07-28"] as const) {
      const client = await connect(f.mcpUrl, era);
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toEqual(["nodefabric.search", "nodefabric.run"]);
      const found = await client.callTool({ name: "nodefabric.search", arguments: { goal: "refund a card payment", limit: 3 } });
      expect(found.isError).toBeFalsy();
      const list = (found.structuredContent as { node_types: { node_type_id: string; input_schema: unknown }[] }).node_types;
      expect(list.length).toBeGreaterThanOrEqual(1);
      expect(list.length).toBeLessThanOrEqual(3);
      expect(list[0]!.node_type_id).toBe("bigapi.op0421");
      expect(list[0]!.input_schema).toEqual({ type: "object", properties: { id: { type: "string" } } });
      const ran = await client.callTool({ name: "nodefabric.run", arguments: { node_type_id: "demo.echo", input: { x: 1 } } });
      expect(ran.structuredContent).toEqual({ echo: { x: 1 } });
      const bad = await client.callTool({ name: "nodefabric.run", arguments: { node_type_id: "nope", input: {} } });
      expect(bad.isError).toBe(true);
      await expect(client.callTool({ name: "demo.echo", arguments: {} })).rejects.toMatchObject({ code: -32602 });
      await client.close();
    }
  });
});
