/**
 * /mcp with authentication required, with real JWTs from a test identity provider: a bearer token for the gateway,
 * scopes and tenants exactly as on the Run API, 401 with the protected-resource metadata's address, RFC 9728
 * metadata, and 403 insufficient_scope for a call the token may not make.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { startTestIssuer, type TestIssuer } from "../../../core/test/support/test-issuer.js";
import { connect, startMcpFabric, type McpFabric } from "./support/mcp-fabric.js";

const GW = "nodefabric-run-gateway";
let idp: TestIssuer;
let f: McpFabric;

beforeAll(async () => {
  idp = await startTestIssuer();
  const keyDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-mcp-keys-"));
  const keyFile = path.join(keyDir, "signing-key.json");
  fs.writeFileSync(keyFile, JSON.stringify(idp.keys[0]!.privateJwk));
  f = await startMcpFabric({
    auth: { mode: "required", issuer: idp.issuer, jwks_url: idp.jwksUrl, signing_key_file: keyFile },
    registryToken: await idp.mint({ aud: "nodefabric-node-registry", scope: "node-types:read" }),
  });
}, 30_000);
afterAll(async () => {
  await f?.close();
  await idp?.close();
});

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers }, body: JSON.stringify(body) });

const initialize = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } } };

describe("/mcp with --auth", () => {
  it("answers 401 without a token, naming the protected-resource metadata", async () => {
    const res = await post(f.mcpUrl, initialize);
    expect(res.status).toBe(401);
    const challenge = res.headers.get("www-authenticate")!;
    expect(challenge).toMatch(/^Bearer /);
    expect(challenge).toContain(`resource_metadata="${f.gateway}/.well-known/oauth-protected-resource/mcp"`);
    const body = (await res.json()) as { error: { code: string } };
    expect(body.error.code).toBe("unauthenticated");
  });

  it("serves RFC 9728 metadata naming the resource and the authorization server", async () => {
    const res = await fetch(`${f.gateway}/.well-known/oauth-protected-resource/mcp`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      resource: `${f.gateway}/mcp`,
      authorization_servers: [idp.issuer],
      scopes_supported: ["runs:read", "runs:write"],
      bearer_methods_supported: ["header"],
      resource_name: "NodeFabric MCP server",
    });
  });

  it("refuses a token meant for another service", async () => {
    const token = await idp.mint({ aud: "nodefabric-node-registry", scope: "runs:read runs:write" });
    const res = await post(f.mcpUrl, initialize, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(401);
  });

  it("with runs:write, lists and calls tools; the run belongs to the token's tenant only", async () => {
    const token = await idp.mint({ aud: GW, scope: "runs:read runs:write", tenant_id: "acme", sub: "alice" });
    for (const era of ["2025-11-25", "2026-07-28"] as const) {
      const client = await connect(f.mcpUrl, era, token);
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toContain("demo.echo");
      const result = await client.callTool({ name: "demo.echo", arguments: { who: "alice" } });
      expect(result.structuredContent).toEqual({ echo: { who: "alice" } });
      const runId = (result._meta as Record<string, string>)["dev.nodefabric/run_id"];
      const own = await fetch(`${f.gateway}/v1/runs/${runId}`, { headers: { authorization: `Bearer ${token}` } });
      expect(own.status).toBe(200);
      const other = await idp.mint({ aud: GW, scope: "runs:read", tenant_id: "globex" });
      expect((await fetch(`${f.gateway}/v1/runs/${runId}`, { headers: { authorization: `Bearer ${other}` } })).status).toBe(404);
      await client.close();
    }
  });

  it("a task is bound to its caller: another tenant, or another caller of the same tenant, does not find it", async () => {
    const caps = { tasks: { requests: { tools: { call: {} } } } };
    const alice = await connect(f.mcpUrl, "2025-11-25", await idp.mint({ aud: GW, scope: "runs:read runs:write", tenant_id: "acme", sub: "alice" }), caps);
    const { task } = (await alice.request({ method: "tools/call", params: { name: "demo.sleep", arguments: { ms: 50 }, task: {} } } as never, z.any())) as { task: { taskId: string } };
    expect(((await alice.request({ method: "tasks/get", params: { taskId: task.taskId } } as never, z.any())) as { taskId: string }).taskId).toBe(task.taskId);
    for (const [tenant, sub] of [["globex", "alice"], ["acme", "bob"]]) {
      const other = await connect(f.mcpUrl, "2025-11-25", await idp.mint({ aud: GW, scope: "runs:read runs:write", tenant_id: tenant, sub }), caps);
      await expect(other.request({ method: "tasks/get", params: { taskId: task.taskId } } as never, z.any())).rejects.toMatchObject({ code: -32602 });
      await expect(other.request({ method: "tasks/cancel", params: { taskId: task.taskId } } as never, z.any())).rejects.toMatchObject({ code: -32602 });
      const listed = (await other.request({ method: "tasks/list", params: {} } as never, z.any())) as { tasks: { taskId: string }[] };
      expect(listed.tasks.map((t) => t.taskId)).not.toContain(task.taskId);
      await other.close();
    }
    await alice.close();
  });

  it("with runs:read only, lists no tools, and a call is 403 insufficient_scope", async () => {
    const token = await idp.mint({ aud: GW, scope: "runs:read" });
    const client = await connect(f.mcpUrl, "2025-11-25", token);
    expect((await client.listTools()).tools).toEqual([]);
    await client.close();
    await post(f.mcpUrl, initialize, { authorization: `Bearer ${token}` });
    const res = await post(f.mcpUrl, { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "demo.echo", arguments: {} } }, { authorization: `Bearer ${token}`, "mcp-protocol-version": "2025-11-25" });
    expect(res.status).toBe(403);
    const challenge = res.headers.get("www-authenticate")!;
    expect(challenge).toContain('error="insufficient_scope"');
    expect(challenge).toContain('scope="runs:write"');
    expect(challenge).toContain("resource_metadata=");
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("permission_denied");
  });

  it("a token without any scope for /mcp gets 403", async () => {
    const token = await idp.mint({ aud: GW, scope: "approvals:write" });
    const res = await post(f.mcpUrl, initialize, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(403);
    expect(res.headers.get("www-authenticate")).toContain('error="insufficient_scope"');
  });
});
