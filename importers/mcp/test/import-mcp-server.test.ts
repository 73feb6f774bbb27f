/**
 * The MCP importer and `fabric node-types import --from-mcp`: a real MCP server in, NodeTypes as data out (one per
 * tool, schema for schema as tools/list gives them), what was left out and why; bad servers get clear errors.
 * Published node types run through a whole fabric and give what a direct tools/call gives.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer } from "node:http";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { nodeTypesImportMcp } from "../../../core/src/cli/node-types-import-mcp.js";
import { CONTENT_OUTPUT_SCHEMA, toDraft2020, toolDefinitionHash } from "@nodefabric/handler-mcp";
import { importMcpServer, nodeTypeOfTool, parseHeader, parseSource, McpImportError } from "../src/index.js";
import { errorOf, openFabric, outputsOf, startRawMcpServer, startServerEverything, type ChildServer, type McpTestServer, type TestFabric } from "../../../handlers/mcp/test/mcp-fixtures.js";

const DRAFT07_WITH_REF = {
  $schema: "http://json-schema.org/draft-07/schema#",
  type: "object",
  definitions: { point: { type: "object", properties: { x: { type: "number" }, y: { type: "number" } }, required: ["x", "y"] } },
  properties: { from: { $ref: "#/definitions/point" }, to: { $ref: "#/definitions/point" } },
  required: ["from", "to"],
};
const DRAFT2020_WITH_REF = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  $defs: { name: { type: "string", minLength: 1 } },
  properties: { name: { $ref: "#/$defs/name" } },
  required: ["name"],
};
const TOOLS = [
  { name: "distance", description: "Distance between two points", inputSchema: DRAFT07_WITH_REF, outputSchema: { type: "object", properties: { d: { type: "number" } }, required: ["d"] }, annotations: { readOnlyHint: true } },
  { name: "greet", description: "Greets someone", inputSchema: DRAFT2020_WITH_REF, annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true } },
  { name: "delete_everything", description: "Deletes everything", inputSchema: { type: "object" } },
  { name: "broken", description: "Its schema does not compile", inputSchema: { type: "object", properties: { a: { type: "no-such-type" } } } },
  { name: "bad name!", description: "Not a valid id", inputSchema: { type: "object" } },
];

describe("importing an MCP server over Streamable HTTP", () => {
  let server: McpTestServer;
  beforeAll(async () => {
    server = await startRawMcpServer(() => TOOLS);
  });
  afterAll(async () => server?.close());

  it("makes one node type per tool, schema for schema, with gates from the annotations and the definition's hash", async () => {
    const result = await importMcpServer(parseSource(server.url), { prefix: "geo" });
    expect(result.server.name).toBe("raw-server");
    const byId = Object.fromEntries(result.nodeTypes.map((t: any) => [t.node_type_id, t]));
    expect(Object.keys(byId).sort()).toEqual(["geo.delete_everything", "geo.distance", "geo.greet"]);
    const distance = byId["geo.distance"];
    expect(distance.version).toBe("1.0.0");
    expect(distance.description).toBe("Distance between two points");
    // draft-07 becomes the same constraints in 2020-12, the fabric's dialect: $schema goes, $ref and definitions stay.
    const { $schema: _draft, ...draft07Body } = DRAFT07_WITH_REF;
    expect(distance.input_schema).toEqual(draft07Body);
    expect(distance.extensions["nodefabric.mcp_tool"].schema_dialect).toBe("draft-07, rewritten as 2020-12");
    expect(distance.output_schema).toEqual(TOOLS[0]!.outputSchema);
    expect(distance.constraints).toEqual({ gates: { side_effect_class: "read" } });
    expect(distance.extensions["nodefabric.implementation"]).toEqual({ node_type_id: "mcp.call", version: "1.0.0" });
    expect(distance.extensions["nodefabric.trust_tier"]).toBe("external");
    expect(distance.extensions["nodefabric.mcp"]).toEqual({ url: server.url, tool: "distance", tool_hash: toolDefinitionHash(TOOLS[0] as never), output: "structured", retry_safe: true });
    expect(distance.extensions["nodefabric.retry"]).toBeUndefined();

    const greet = byId["geo.greet"];
    expect(greet.input_schema).toEqual(DRAFT2020_WITH_REF);
    expect(greet.output_schema).toEqual(CONTENT_OUTPUT_SCHEMA);
    expect(greet.extensions["nodefabric.mcp"].output).toBe("content");
    expect(greet.constraints.gates.side_effect_class).toBe("write");

    // No annotations: MCP's defaults, a destructive tool that is not idempotent, called once.
    const del = byId["geo.delete_everything"];
    expect(del.constraints.gates.side_effect_class).toBe("irreversible");
    expect(del.extensions["nodefabric.retry"]).toEqual({ max_attempts: 1 });
    expect(del.extensions["nodefabric.mcp"].retry_safe).toBe(false);

    expect(result.leftOut.map((l) => l.tool).sort()).toEqual(["bad name!", "broken"]);
    expect(result.leftOut.find((l) => l.tool === "broken")!.reason).toMatch(/inputSchema does not compile/);
    expect(result.leftOut.find((l) => l.tool === "bad name!")!.reason).toMatch(/not a valid node_type_id/);
  });

  it("keeps only --include, leaves out --exclude, and uses --version", async () => {
    const only = await importMcpServer(parseSource(server.url), { prefix: "geo", include: ["greet", "nope"], version: "2.1.0" });
    expect(only.nodeTypes.map((t: any) => `${t.node_type_id}@${t.version}`)).toEqual(["geo.greet@2.1.0"]);
    expect(only.notes).toContain("--include nope: the server has no such tool");
    const without = await importMcpServer(parseSource(server.url), { prefix: "geo", exclude: ["greet"] });
    expect(without.nodeTypes.map((t: any) => t.node_type_id).sort()).toEqual(["geo.delete_everything", "geo.distance"]);
  });

  it("turns a secret header into a secret reference, and sends its value only at import time", async () => {
    process.env.FABRIC_SECRET_GEO_TOKEN = "import-time-token";
    try {
      const before = server.seen.length;
      const result = await importMcpServer(parseSource(server.url), { prefix: "geo", include: ["greet"], headers: [parseHeader("Authorization: Bearer {secret:GEO_TOKEN}"), parseHeader("X-Team: maps")] });
      expect(server.seen.slice(before).every((h) => h.authorization === "Bearer import-time-token" && h["x-team"] === "maps")).toBe(true);
      const mcp = (result.nodeTypes[0] as any).extensions["nodefabric.mcp"];
      expect(mcp.secret_headers).toEqual({ authorization: { secret: "GEO_TOKEN", prefix: "Bearer " } });
      expect(mcp.headers).toEqual({ "x-team": "maps" });
      expect(JSON.stringify(result.nodeTypes)).not.toContain("import-time-token");
      expect(result.secrets).toEqual(["GEO_TOKEN"]);
    } finally {
      delete process.env.FABRIC_SECRET_GEO_TOKEN;
    }
    expect(() => parseHeader("Authorization: Bearer abc")).toThrow(McpImportError);
  });
});

describe("importing servers that misbehave", () => {
  it("reads a server of 5,000 tools page by page", async () => {
    const many = Array.from({ length: 5_000 }, (_, i) => ({ name: `tool_${i}`, description: `Tool ${i}`, inputSchema: { type: "object", properties: { n: { type: "integer" } } }, annotations: { readOnlyHint: true } }));
    const server = await startRawMcpServer(() => many, undefined, { pageSize: 500 });
    try {
      const result = await importMcpServer(parseSource(server.url), { prefix: "many" });
      expect(result.nodeTypes).toHaveLength(5_000);
      expect(result.leftOut).toEqual([]);
      expect(server.methods.filter((m) => m === "tools/list").length).toBe(10);
    } finally {
      await server.close();
    }
  }, 30_000);

  it("says what is wrong with a server that answers garbage, or hangs", async () => {
    const garbage = createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end("<html>not MCP</html>"));
    const hang = createServer(() => undefined);
    await new Promise<void>((r) => garbage.listen(0, "127.0.0.1", r));
    await new Promise<void>((r) => hang.listen(0, "127.0.0.1", r));
    try {
      const g = `http://127.0.0.1:${(garbage.address() as any).port}/mcp`;
      await expect(importMcpServer(parseSource(g), { timeoutMs: 3_000 })).rejects.toThrow(/could not connect to the MCP server at .*\/mcp: /);
      const h = `http://127.0.0.1:${(hang.address() as any).port}/mcp`;
      const started = Date.now();
      await expect(importMcpServer(parseSource(h), { timeoutMs: 500 })).rejects.toThrow(/could not connect to the MCP server .*(time|Timed out)/i);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      hang.closeAllConnections();
      garbage.close();
      hang.close();
    }
  }, 20_000);

  it("refuses a source that is neither an http(s) URL nor a command", () => {
    expect(() => parseSource("ftp://example.com/mcp")).toThrow(/http\(s\) URL or a command/);
    expect(() => parseSource("  ")).toThrow(McpImportError);
  });

  it("imports a task-required tool pinned over Streamable HTTP, and leaves it out, with the reason, where mcp.call cannot run a task", () => {
    const task = { name: "research", description: "A long task", inputSchema: { type: "object" }, execution: { taskSupport: "required" as const } };
    const made = nodeTypeOfTool(task, { url: "http://127.0.0.1:9/mcp" }, { prefix: "t", version: "1.0.0" }) as { nodeType: any };
    expect(made.nodeType.extensions["nodefabric.mcp"]).toMatchObject({ url: "http://127.0.0.1:9/mcp", tool: "research", tool_hash: toolDefinitionHash(task) });
    expect(nodeTypeOfTool(task, { url: "http://127.0.0.1:9/mcp" }, { prefix: "t", version: "1.0.0", protocol: { pin: "2025-11-25" } })).toHaveProperty("nodeType");
    expect(nodeTypeOfTool(task, { server: "memory" }, { prefix: "t", version: "1.0.0" })).toEqual({ reason: expect.stringMatching(/only be called as an MCP task, which mcp\.call runs over Streamable HTTP only/) });
    expect(nodeTypeOfTool(task, { url: "http://127.0.0.1:9/mcp" }, { prefix: "t", version: "1.0.0", protocol: { pin: "2026-07-28" } })).toEqual({ reason: expect.stringMatching(/on protocol 2025-11-25 only \(the import pins 2026-07-28\)/) });
    expect(parseSource('node "my server.js" --flag')).toEqual({ kind: "stdio", server: { command: "node", args: ["my server.js", "--flag"] } });
  });
});

describe("server-everything (the reference server from npm) imported and run through a fabric", () => {
  let everything: ChildServer;
  let f: TestFabric;
  let direct: Client;
  beforeAll(async () => {
    everything = await startServerEverything();
    f = await openFabric();
    direct = new Client({ name: "test-inspector", version: "1.0.0" });
    await direct.connect(new StreamableHTTPClientTransport(new URL(everything.url)));
  }, 60_000);
  afterAll(async () => {
    await direct?.close();
    await f?.close();
    await everything?.stop();
  });

  it("publishes its tools with `fabric node-types import --from-mcp`: node types equal tools/list, schema for schema", async () => {
    let stdout = "";
    let stderr = "";
    const code = await nodeTypesImportMcp(f.registry, { fromMcp: everything.url, prefix: "ev" }, { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) } });
    expect(code, stderr).toBe(0);
    expect(stdout).toMatch(/published \d+ node types of the MCP server mcp-servers\/everything/);
    // The run to try first is a read-only tool, with sample inputs that fit its schema.
    expect(stdout).toMatch(/Try it:\n  npx fabric run ev\.[a-z-]+@1\.0\.0 --input '\{.*\}'/);
    expect(stdout).not.toContain("{…}");
    const { tools } = await direct.listTools();
    expect(tools.length).toBeGreaterThan(5);
    for (const tool of tools) {
      const res = await fetch(`${f.registry}/v1/node-types/${encodeURIComponent(`ev.${tool.name}`)}?version=1.0.0`);
      expect(res.status, `ev.${tool.name}`).toBe(200);
      const t = (await res.json()) as any;
      // Every tool is imported pinned, a task-required one too: mcp.call reads from the listing that it needs a task.
      expect(t.extensions["nodefabric.mcp"].tool_hash).toBe(toolDefinitionHash(tool as never));
      expect(t.input_schema).toEqual(toDraft2020(tool.inputSchema as never));
      expect(t.output_schema).toEqual(tool.outputSchema ? toDraft2020(tool.outputSchema as never) : CONTENT_OUTPUT_SCHEMA);
      expect(t.description).toBe(tool.description);
    }
  }, 30_000);

  it("runs the imported task-required tool (simulate-research-query) as an MCP task to completion", async () => {
    const research = await f.run("ev.simulate-research-query", { topic: "imported tasks" });
    expect(research.state, JSON.stringify(errorOf(research))).toBe("completed");
    expect(JSON.stringify(outputsOf(research))).toContain("imported tasks");
    const nodeRun = await fetch(`${f.gateway}/v1/node-runs/${research.root_node_run_id}`).then((r) => r.json() as Promise<any>);
    expect(nodeRun.extensions["nodefabric.checkpoint"].data.mcp_task).toMatchObject({ url: everything.url, tool: "simulate-research-query", task_id: expect.any(String) });
  }, 40_000);

  it("runs its tools as runs, giving what a direct tools/call gives", async () => {
    const echo = await f.run("ev.echo", { message: "hello" });
    expect(echo.state, JSON.stringify(errorOf(echo))).toBe("completed");
    const directEcho = await direct.callTool({ name: "echo", arguments: { message: "hello" } });
    expect(outputsOf(echo)).toEqual({ content: directEcho.content });

    const sum = await f.run("ev.get-sum", { a: 2, b: 40 });
    expect(sum.state, JSON.stringify(errorOf(sum))).toBe("completed");
    const directSum = await direct.callTool({ name: "get-sum", arguments: { a: 2, b: 40 } });
    expect(outputsOf(sum)).toEqual(directSum.structuredContent ?? { content: directSum.content });

    const structured = await f.run("ev.get-structured-content", { location: "New York" });
    expect(structured.state, JSON.stringify(errorOf(structured))).toBe("completed");
    const directStructured = await direct.callTool({ name: "get-structured-content", arguments: { location: "New York" } });
    expect(outputsOf(structured)).toEqual(directStructured.structuredContent);
  }, 30_000);
});
