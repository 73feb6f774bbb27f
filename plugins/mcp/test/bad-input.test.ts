/**
 * Bad input on /mcp, sent as raw HTTP: malformed JSON-RPC, wrong headers, unknown methods, huge or deep arguments,
 * a forged task id, a foreign Origin or Host. Each gets a protocol error or a tool error, never a 500, and starts no
 * run.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import http from "node:http";
import { startMcpFabric, type McpFabric } from "./support/mcp-fabric.js";

let f: McpFabric;
beforeAll(async () => {
  f = await startMcpFabric();
}, 30_000);
afterAll(async () => f?.close());

const INIT = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } } };
const H = { "content-type": "application/json", accept: "application/json, text/event-stream" };
const legacy = { ...H, "mcp-protocol-version": "2025-11-25" };

async function send(body: string | object, headers: Record<string, string> = H, method = "POST"): Promise<{ status: number; json: any; text: string }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const res = await fetch(f.mcpUrl, { method, headers, ...(method === "POST" ? { body: typeof body === "string" ? body : JSON.stringify(body) } : {}) });
  const text = await res.text();
  let json: unknown;
  const data = /^data: (.*)$/m.exec(text);
  try {
    json = JSON.parse(data ? data[1]! : text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

const runCount = async () => ((await (await fetch(`${f.gateway}/v1/runs?limit=1000`)).json()) as unknown[]).length;

describe("bad input on /mcp", () => {
  it("malformed JSON is a parse error, not a 500", async () => {
    const r = await send("{not json");
    expect(r.status).toBeLessThan(500);
    expect(r.json.error.code).toBe(-32700);
  });

  it("a body that is not JSON-RPC is an invalid request", async () => {
    const r = await send({ hello: "world" });
    expect(r.status).toBeLessThan(500);
    expect(r.json.error.code).toBeLessThan(0);
  });

  it("a wrong Content-Type is 415", async () => {
    const r = await send(JSON.stringify(INIT), { "content-type": "text/plain", accept: H.accept });
    expect(r.status).toBe(415);
  });

  it("an Accept without JSON and SSE is refused", async () => {
    const r = await send(INIT, { "content-type": "application/json", accept: "text/html" });
    expect(r.status).toBe(406);
  });

  it("an unknown method is -32601", async () => {
    const r = await send({ jsonrpc: "2.0", id: 3, method: "no/such/method", params: {} }, legacy);
    expect(r.status).toBeLessThan(500);
    expect(r.json.error.code).toBe(-32601);
  });

  it("2026 headers that disagree with the body are refused", async () => {
    const r = await send(
      { jsonrpc: "2.0", id: 4, method: "tools/list", params: { _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": { name: "t", version: "1" }, "io.modelcontextprotocol/clientCapabilities": {} } } },
      { ...H, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call" },
    );
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBeLessThan(0);
  });

  it("GET and DELETE (2025 sessions) answer 405: the server is stateless", async () => {
    expect((await send("", { accept: "text/event-stream" }, "GET")).status).toBe(405);
    expect((await send("", {}, "DELETE")).status).toBe(405);
  });

  it("deep or huge arguments get an error, never a 500, and start no run", async () => {
    const before = await runCount();
    const deep = `${'{"d":'.repeat(5000)}{}${"}".repeat(5000)}`;
    const r1 = await send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"demo.echo","arguments":${deep}}}`, legacy);
    expect(r1.status).toBeLessThan(500);
    const huge = { blob: "x".repeat(8 * 1024 * 1024) };
    const r2 = await send({ jsonrpc: "2.0", id: 6, method: "tools/call", params: { name: "demo.echo", arguments: huge } }, legacy);
    expect(r2.status).toBeLessThan(500);
    expect(r2.status).toBeGreaterThanOrEqual(400);
    expect(await runCount()).toBe(before);
  });

  it("arguments that are not an object are an error", async () => {
    const r = await send({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "demo.echo", arguments: [1, 2] } }, legacy);
    expect(r.status).toBeLessThan(500);
    expect(r.json.error?.code ?? (r.json.result?.isError ? 1 : 0)).not.toBe(0);
  });

  it("a forged task id is an error", async () => {
    const r = await send({ jsonrpc: "2.0", id: 8, method: "tasks/get", params: { taskId: "mcp-ffffffffffffffffffffffffffffffff" } }, legacy);
    expect(r.json.error.code).toBe(-32602);
  });

  it("a Host that is not the gateway's is refused (DNS rebinding)", async () => {
    const u = new URL(f.mcpUrl);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: "POST", headers: { ...H, host: `evil.example:${u.port}` } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      req.end(JSON.stringify(INIT));
    });
    expect(status).toBe(403);
  });

  it("a foreign Origin or Host is refused (DNS rebinding)", async () => {
    const o = await send(INIT, { ...H, origin: "http://evil.example" });
    expect(o.status).toBe(403);
    const local = await send(INIT, { ...H, origin: new URL(f.gateway).origin });
    expect(local.status).toBe(200);
  });
});
