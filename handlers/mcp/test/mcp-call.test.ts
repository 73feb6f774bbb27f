/**
 * mcp.call through a whole fabric, against a real MCP server built with the official server SDK on loopback: node
 * types published in the registry, run through the gateway, executed by the atomic executor. What a user sees: the
 * Run's state, outputs and error (code, retryable), and what reached the MCP server.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { fromJsonSchema, type McpServer } from "@modelcontextprotocol/server";
import { existsSync } from "node:fs";
import { defineAtomic } from "@nodefabric/sdk";
import { runHandler } from "@nodefabric/sdk/testing";
import { forgetProtocolEras, mcpToolHandler, toolDefinitionHash } from "../src/index.js";
import { errorOf, mcpBacked, openFabric, outputsOf, startMcpServer, type McpTestServer, type TestFabric } from "./mcp-fixtures.js";

const ADD_TOOL = {
  name: "add",
  description: "Adds two numbers",
  inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
  outputSchema: { type: "object", properties: { sum: { type: "number" } }, required: ["sum"] },
  annotations: { readOnlyHint: true },
};

/** Calls of the `slow` tool that ended because the client canceled them. */
const aborted: string[] = [];

function registerTools(server: McpServer): void {
  server.registerTool(
    "add",
    { description: ADD_TOOL.description, inputSchema: fromJsonSchema(ADD_TOOL.inputSchema as never), outputSchema: fromJsonSchema(ADD_TOOL.outputSchema as never), annotations: ADD_TOOL.annotations },
    async (args: any) => ({ content: [{ type: "text", text: String(args.a + args.b) }], structuredContent: { sum: args.a + args.b } }),
  );
  server.registerTool("echo", { description: "Echoes its text", inputSchema: fromJsonSchema({ type: "object", properties: { text: { type: "string" } }, required: ["text"] } as never) }, async (args: any) => ({
    content: [{ type: "text", text: `echo: ${args.text}` }],
  }));
  server.registerTool("refuse", { description: "Always reports an error", inputSchema: fromJsonSchema({ type: "object" } as never) }, async () => ({
    isError: true,
    content: [{ type: "text", text: "the account is locked" }],
  }));
  server.registerTool("slow", { description: "Answers after ms milliseconds", inputSchema: fromJsonSchema({ type: "object", properties: { ms: { type: "number" } } } as never) }, async (args: any, ctx: any) => {
    await new Promise((resolve, reject) => {
      const t = setTimeout(resolve, args.ms ?? 5_000);
      ctx?.mcpReq?.signal?.addEventListener?.("abort", () => {
        clearTimeout(t);
        aborted.push(String(args.tag ?? ""));
        reject(new Error("aborted"));
      });
    });
    return { content: [{ type: "text", text: "done" }] };
  });
}

describe("mcp.call over Streamable HTTP", () => {
  let server: McpTestServer;
  let f: TestFabric;

  beforeAll(async () => {
    server = await startMcpServer(registerTools);
    f = await openFabric({ flags: { executor: { egress: { allow_cidrs: ["127.0.0.1/32"] }, secret_hosts: { MCP_TOKEN: [new URL(server.url).host], OTHER_TOKEN: ["api.example.com"] } } }, secrets: { MCP_TOKEN: "s3cret", OTHER_TOKEN: "elsewhere" } });
  }, 60_000);
  afterAll(async () => {
    await f?.close();
    await server?.close();
  });

  it("runs a tool with an outputSchema: its structuredContent is the outputs", async () => {
    await f.publish(
      mcpBacked("t.add", { url: server.url, tool: "add", tool_hash: toolDefinitionHash(ADD_TOOL as never), output: "structured", retry_safe: true }, {
        input_schema: ADD_TOOL.inputSchema,
        output_schema: ADD_TOOL.outputSchema,
      }),
    );
    const run = await f.run("t.add", { a: 2, b: 3 });
    expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
    expect(outputsOf(run)).toEqual({ sum: 5 });
  });

  it("checks the outputs against the node type's output_schema", async () => {
    await f.publish(
      mcpBacked("t.add-strict", { url: server.url, tool: "add", output: "structured" }, {
        input_schema: ADD_TOOL.inputSchema,
        output_schema: { type: "object", properties: { sum: { type: "string" } }, required: ["sum"] },
      }),
    );
    const run = await f.run("t.add-strict", { a: 2, b: 3 });
    expect(run.state).toBe("failed");
    expect(errorOf(run)).toMatchObject({ code: "invalid_outputs", retryable: false });
    expect(JSON.stringify(errorOf(run))).toContain("sum");
  });

  it("runs a tool without an outputSchema: the outputs are its content blocks", async () => {
    await f.publish(mcpBacked("t.echo", { url: server.url, tool: "echo" }));
    const run = await f.run("t.echo", { text: "hi" });
    expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
    expect(outputsOf(run)).toEqual({ content: [{ type: "text", text: "echo: hi" }] });
  });

  it("negotiates the protocol: auto speaks 2026-07-28 to a server that offers it, legacy the 2025 handshake, with the same result", async () => {
    await f.publish(mcpBacked("t.echo-auto", { url: server.url, tool: "echo", protocol: "auto" }));
    await f.publish(mcpBacked("t.echo-legacy", { url: server.url, tool: "echo", protocol: "legacy" }));
    forgetProtocolEras();
    const before = server.methods.length;
    const modern = await f.run("t.echo-auto", { text: "a" });
    const modernMethods = server.methods.slice(before);
    const mid = server.methods.length;
    const legacy = await f.run("t.echo-legacy", { text: "a" });
    const legacyMethods = server.methods.slice(mid);
    expect(outputsOf(modern)).toEqual(outputsOf(legacy));
    expect(modernMethods).toContain("server/discover");
    expect(modernMethods).not.toContain("initialize");
    expect(legacyMethods).toContain("initialize");
    expect(legacyMethods).not.toContain("server/discover");

    // The era is remembered: the next call adopts the discover result and sends the tool call at once.
    const again = server.methods.length;
    expect(outputsOf(await f.run("t.echo-auto", { text: "a" }))).toEqual(outputsOf(modern));
    expect(server.methods.slice(again)).toEqual(["tools/call"]);
  });

  it("fails with tool_error, not retried, when the tool reports isError", async () => {
    await f.publish(mcpBacked("t.refuse", { url: server.url, tool: "refuse" }));
    const run = await f.run("t.refuse", {});
    expect(run.state).toBe("failed");
    expect(errorOf(run).code).toBe("tool_error");
    expect(errorOf(run).retryable).toBe(false);
    expect(errorOf(run).message).toContain("the account is locked");
  });

  it("fails with upstream_protocol_error when the server answers with a JSON-RPC error", async () => {
    await f.publish(mcpBacked("t.missing", { url: server.url, tool: "no-such-tool" }));
    const run = await f.run("t.missing", {});
    expect(run.state).toBe("failed");
    expect(errorOf(run).code).toBe("upstream_protocol_error");
    expect(errorOf(run).retryable).toBe(false);
  });

  it("fails with tool_definition_changed, without calling the tool, when the tool is not the one pinned", async () => {
    const reviewed = { ...ADD_TOOL, description: "Adds two numbers (as reviewed)" };
    await f.publish(mcpBacked("t.add-pinned", { url: server.url, tool: "add", tool_hash: toolDefinitionHash(reviewed as never), output: "structured" }));
    const before = server.methods.length;
    const run = await f.run("t.add-pinned", { a: 1, b: 1 });
    expect(run.state).toBe("failed");
    expect(errorOf(run).code).toBe("tool_definition_changed");
    expect(errorOf(run).retryable).toBe(false);
    expect(server.methods.slice(before)).not.toContain("tools/call");
  });

  it("stops waiting at the node type's time-out, not the SDK's 60 seconds", async () => {
    await f.publish(mcpBacked("t.slow", { url: server.url, tool: "slow" }, { extensions: { "nodefabric.implementation": { node_type_id: "mcp.call", version: "1.0.0" }, "nodefabric.mcp": { url: server.url, tool: "slow" }, "nodefabric.timeout_ms": 500, "nodefabric.retry": { max_attempts: 1 } } }));
    const started = Date.now();
    const run = await f.run("t.slow", { ms: 10_000 });
    expect(run.state).toBe("failed");
    // The handler's own time-out (upstream_unavailable, reason timeout) or the executor's, whichever fires first.
    if (errorOf(run).code === "upstream_unavailable") expect(errorOf(run).details.reason).toBe("timeout");
    else expect(errorOf(run).code).toBe("timeout");
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  for (const protocol of ["auto", "legacy"] as const) {
    // The tool's request stream is closed (2026-07-28's cancel; a stateless 2025 server takes it the same way), and on
    // the 2025 era notifications/cancelled follows, sent as a final egress request after the execution stopped.
    it(`cancels the upstream call when the run is canceled (${protocol})`, async () => {
      const id = `t.slow-cancel-${protocol}`;
      await f.publish(mcpBacked(id, { url: server.url, tool: "slow", protocol }));
      const before = server.methods.length;
      const started = await f.start(id, { ms: 20_000, tag: protocol });
      const until = Date.now() + 10_000;
      while (!server.methods.slice(before).includes("tools/call") && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 100));
      const r = await fetch(`${f.gateway}/v1/runs/${started.run_id}:cancel`, { method: "POST" });
      expect(r.status).toBeLessThan(300);
      const end = Date.now() + 10_000;
      while (!aborted.includes(protocol) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      expect(aborted).toContain(protocol);
      expect((await f.get(started.run_id)).state).toBe("canceled");
      if (protocol === "legacy") {
        const sent = Date.now() + 5_000;
        while (!server.methods.slice(before).includes("notifications/cancelled") && Date.now() < sent) await new Promise((r) => setTimeout(r, 20));
        expect(server.methods.slice(before)).toContain("notifications/cancelled");
      }
    });
  }

  it("sends the executor's secret, bound to the server's host, and never the caller's own token", async () => {
    await f.publish(mcpBacked("t.echo-auth", { url: server.url, tool: "echo", secret_headers: { authorization: { secret: "MCP_TOKEN", prefix: "Bearer " } } }));
    const before = server.seen.length;
    const r = await fetch(`${f.gateway}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json", prefer: "wait=20", authorization: "Bearer caller-token" },
      body: JSON.stringify({ root_node_type_ref: { node_type_id: "t.echo-auth", version: "1.0.0" }, input: { text: "x" } }),
    });
    const run = (await r.json()) as any;
    expect(run.state, JSON.stringify(run)).toBe("completed");
    const auths = server.seen.slice(before).map((h) => h.authorization);
    expect(auths.length).toBeGreaterThan(0);
    expect(new Set(auths)).toEqual(new Set(["Bearer s3cret"]));
  });

  it("refuses to send a secret to a server whose host the operator did not bind it to", async () => {
    await f.publish(mcpBacked("t.echo-other", { url: server.url, tool: "echo", secret_headers: { authorization: { secret: "OTHER_TOKEN", prefix: "Bearer " } } }));
    const before = server.seen.length;
    const run = await f.run("t.echo-other", { text: "x" });
    expect(run.state).toBe("failed");
    expect(errorOf(run).code).toBe("egress_denied");
    expect(server.seen.length).toBe(before);
  });

  it("refuses a node type that would make the executor start a command: the registry at publish, mcp.call at run time", async () => {
    const r = await fetch(`${f.registry}/v1/node-types`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ node_type: mcpBacked("t.spawn", { server: "x", tool: "y", command: "/bin/sh", args: ["-c", "touch /tmp/nf-pwned-http"] }) }),
    });
    expect(r.status).toBe(400);
    const body = (await r.json()) as any;
    expect(body.error.code).toBe("invalid_request");
    expect(body.error.details.errors.map((e: any) => e.path)).toEqual(["/node_type/extensions/nodefabric.mcp/command", "/node_type/extensions/nodefabric.mcp/args"]);
    expect((await fetch(`${f.registry}/v1/node-types/t.spawn`)).status).toBe(404);

    // A node type that reached an executor some other way is refused by mcp.call itself, and nothing is started.
    const definition = defineAtomic({ nodeType: { ...mcpBacked("t.spawn", { server: "x", tool: "y", command: "/bin/sh", args: ["-c", "touch /tmp/nf-pwned-http"] }), kind: undefined }, handler: mcpToolHandler() });
    const result = await runHandler(definition, {});
    expect(result.state).toBe("failed");
    expect(result.error).toMatchObject({ code: "stdio_not_allowed", retryable: false });
    expect(existsSync("/tmp/nf-pwned-http")).toBe(false);
  });
});

describe("mcp.call when the server is away, or not allowed", () => {
  it("fails with the retryable upstream_unavailable when nothing listens", async () => {
    const gone = await startMcpServer(registerTools);
    const url = gone.url;
    await gone.close();
    const f = await openFabric();
    try {
      await f.publish(mcpBacked("t.gone", { url, tool: "echo" }, { extensions: { "nodefabric.implementation": { node_type_id: "mcp.call", version: "1.0.0" }, "nodefabric.mcp": { url, tool: "echo" }, "nodefabric.retry": { max_attempts: 2, initial_interval_ms: 10 } } }));
      const run = await f.run("t.gone", { text: "x" });
      expect(run.state).toBe("failed");
      expect(errorOf(run).code).toBe("upstream_unavailable");
      expect(errorOf(run).retryable).toBe(true);
    } finally {
      await f.close();
    }
  }, 30_000);

  it("retries a failed call that may have reached the tool only when the tool is read-only or idempotent", async () => {
    // The server takes the tool call and fails it with a 502 (2026-07-28 names the method in a header).
    const server = await startMcpServer(registerTools, {
      route: (req, res) => {
        if (req.headers["mcp-method"] !== "tools/call") return false;
        res.writeHead(502, { "content-type": "text/plain" }).end("bad gateway");
        return true;
      },
    });
    const f = await openFabric();
    try {
      const ext = (id: string, retrySafe: boolean) => ({
        "nodefabric.implementation": { node_type_id: "mcp.call", version: "1.0.0" },
        "nodefabric.mcp": { url: server.url, tool: "echo", retry_safe: retrySafe },
        "nodefabric.retry": { max_attempts: 3, initial_interval_ms: 10 },
      });
      await f.publish(mcpBacked("t.502-safe", {}, { extensions: ext("t.502-safe", true) }));
      await f.publish(mcpBacked("t.502-unsafe", {}, { extensions: ext("t.502-unsafe", false) }));
      const calls = () => server.seen.filter((h) => h["mcp-method"] === "tools/call").length;

      const safe = await f.run("t.502-safe", { text: "x" });
      expect(safe.state).toBe("failed");
      expect(errorOf(safe)).toMatchObject({ code: "upstream_unavailable", retryable: true, details: { status: 502 } });
      expect(calls()).toBe(3);

      const unsafe = await f.run("t.502-unsafe", { text: "x" });
      expect(unsafe.state).toBe("failed");
      expect(errorOf(unsafe)).toMatchObject({ code: "upstream_unavailable", retryable: false, details: { status: 502 } });
      expect(calls()).toBe(4);
    } finally {
      await f.close();
      await server.close();
    }
  }, 30_000);

  it("fails with upstream_protocol_error when the server answers something that is not MCP", async () => {
    const garbage = await startMcpServer(registerTools, {
      route: (_req, res) => {
        res.writeHead(200, { "content-type": "text/html" }).end("<html>hello</html>");
        return true;
      },
    });
    const f = await openFabric();
    try {
      await f.publish(mcpBacked("t.garbage", { url: garbage.url, tool: "echo", protocol: "legacy" }));
      const run = await f.run("t.garbage", { text: "x" });
      expect(run.state).toBe("failed");
      expect(errorOf(run)).toMatchObject({ code: "upstream_protocol_error", retryable: false });
    } finally {
      await f.close();
      await garbage.close();
    }
  }, 30_000);

  it("refuses a loopback server unless the operator's egress policy allows it", async () => {
    const server = await startMcpServer(registerTools);
    const f = await openFabric({ flags: { executor: { egress: {} } } });
    try {
      await f.publish(mcpBacked("t.private", { url: server.url, tool: "echo" }));
      const run = await f.run("t.private", { text: "x" });
      expect(run.state).toBe("failed");
      expect(errorOf(run).code).toBe("egress_denied");
      expect(server.methods).toEqual([]);
    } finally {
      await f.close();
      await server.close();
    }
  }, 30_000);
});
