/**
 * Credentials to the upstream, as executor secrets bound to hosts: OAuth 2 client credentials against a token
 * endpoint on loopback, the token then sent to the MCP server; a server refusing the credentials fails the NodeRun
 * with upstream_unauthorized; two imports of one server with their own secrets each send their own.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer, type Server } from "node:http";
import { fromJsonSchema } from "@modelcontextprotocol/server";
import { errorOf, mcpBacked, openFabric, outputsOf, startMcpServer, type McpTestServer, type TestFabric } from "./mcp-fixtures.js";

describe("credentials of mcp.call", () => {
  let token: Server;
  let tokenUrl: string;
  const tokenRequests: string[] = [];
  let server: McpTestServer;
  let f: TestFabric;

  beforeAll(async () => {
    token = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        tokenRequests.push(`${req.headers.authorization ?? ""} ${body}`);
        const basic = Buffer.from("tenant-a:secret-a").toString("base64");
        const ok = req.headers.authorization === `Basic ${basic}` || (body.includes("client_id=tenant-a") && body.includes("client_secret=secret-a"));
        res.writeHead(ok ? 200 : 401, { "content-type": "application/json" }).end(JSON.stringify(ok ? { access_token: "tok-a", token_type: "Bearer", expires_in: 3600 } : { error: "invalid_client" }));
      });
    });
    await new Promise<void>((r) => token.listen(0, "127.0.0.1", r));
    tokenUrl = `http://127.0.0.1:${(token.address() as { port: number }).port}/oauth/token`;
    server = await startMcpServer(
      (s) =>
        s.registerTool("whoami", { description: "Says who called", inputSchema: fromJsonSchema({ type: "object" } as never) }, async () => ({ content: [{ type: "text", text: "hello" }] })),
      {
        route: (req, res) => {
          const auth = req.headers.authorization;
          if (auth === "Bearer tok-a" || auth === "Bearer key-b") return false;
          res.writeHead(401, { "www-authenticate": 'Bearer error="invalid_token"', "content-type": "application/json" }).end(JSON.stringify({ error: "unauthorized" }));
          return true;
        },
      },
    );
    const mcpHost = new URL(server.url).host;
    const tokenHost = new URL(tokenUrl).host;
    f = await openFabric({
      secrets: { A_CLIENT_ID: "tenant-a", A_CLIENT_SECRET: "secret-a", B_KEY: "key-b", WRONG_KEY: "nope", MCP_TOKEN_acme: "key-b", MCP_TOKEN_globex: "tok-a", MCP_TOKEN_initech: "key-b" },
      flags: {
        executor: {
          egress: { allow_cidrs: ["127.0.0.1/32"] },
          secret_hosts: { A_CLIENT_ID: [tokenHost], A_CLIENT_SECRET: [tokenHost], B_KEY: [mcpHost], WRONG_KEY: [mcpHost], MCP_TOKEN_acme: [mcpHost], MCP_TOKEN_globex: [mcpHost], MCP_TOKEN_initech: ["api.example.com"] },
        },
      },
    });
  }, 60_000);
  afterAll(async () => {
    await f?.close();
    await server?.close();
    token?.close();
  });

  it("gets a token with OAuth 2 client credentials and sends it to the MCP server", async () => {
    await f.publish(mcpBacked("tenant-a.whoami", { url: server.url, tool: "whoami", oauth2: { token_url: tokenUrl, client_id_secret: "A_CLIENT_ID", client_secret_secret: "A_CLIENT_SECRET" } }));
    const before = server.seen.length;
    const run = await f.run("tenant-a.whoami", {});
    expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
    expect(outputsOf(run)).toEqual({ content: [{ type: "text", text: "hello" }] });
    expect(tokenRequests.length).toBe(1);
    expect(new Set(server.seen.slice(before).map((h) => h.authorization))).toEqual(new Set(["Bearer tok-a"]));
  });

  it("lets each import of one server send its own secret", async () => {
    await f.publish(mcpBacked("tenant-b.whoami", { url: server.url, tool: "whoami", secret_headers: { authorization: { secret: "B_KEY", prefix: "Bearer " } } }));
    const before = server.seen.length;
    const run = await f.run("tenant-b.whoami", {});
    expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
    expect(new Set(server.seen.slice(before).map((h) => h.authorization))).toEqual(new Set(["Bearer key-b"]));
  });

  /** Runs `id` for `tenant` (run_context.tenant_id: with authentication on, the caller's token's tenant). */
  async function runAs(id: string, tenant: string | undefined) {
    const res = await fetch(`${f.gateway}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json", prefer: "wait=20" },
      body: JSON.stringify({ root_node_type_ref: { node_type_id: id, version: "1.0.0" }, input: {}, ...(tenant === undefined ? {} : { run_context: { tenant_id: tenant } }) }),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as any;
  }

  it("sends each tenant's own secret, named with {tenant}, from one node type", async () => {
    await f.publish(mcpBacked("shared.whoami", { url: server.url, tool: "whoami", secret_headers: { authorization: { secret: "MCP_TOKEN_{tenant}", prefix: "Bearer " } } }));
    for (const [tenant, sent] of [["acme", "Bearer key-b"], ["globex", "Bearer tok-a"]] as const) {
      const before = server.seen.length;
      const run = await runAs("shared.whoami", tenant);
      expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
      expect(new Set(server.seen.slice(before).map((h) => h.authorization))).toEqual(new Set([sent]));
    }
  });

  it("refuses a per-tenant secret for a run without a tenant, a tenant without credentials, or an id that cannot name one, sending nothing", async () => {
    const cases: Array<[string | undefined, RegExp]> = [
      [undefined, /this run has no tenant/],
      ["umbrella", /tenant umbrella has no credentials for this MCP server.*MCP_TOKEN_umbrella/],
      ["acme-x", /cannot be part of a secret's name/],
    ];
    for (const [tenant, message] of cases) {
      const before = server.seen.length;
      const run = await runAs("shared.whoami", tenant);
      expect(run.state).toBe("failed");
      expect(errorOf(run)).toMatchObject({ code: "upstream_unauthorized", retryable: false });
      expect(errorOf(run).message).toMatch(message);
      expect(server.seen.length).toBe(before);
    }
  });

  it("keeps a tenant's secret to the hosts it is bound to", async () => {
    const before = server.seen.length;
    const run = await runAs("shared.whoami", "initech");
    expect(run.state).toBe("failed");
    expect(errorOf(run).code).toBe("egress_denied");
    expect(server.seen.length).toBe(before);
  });

  it("refuses a secret name with a placeholder other than {tenant}", async () => {
    await f.publish(mcpBacked("shared.bad-placeholder", { url: server.url, tool: "whoami", secret_headers: { authorization: { secret: "MCP_TOKEN_{user}", prefix: "Bearer " } } }));
    const run = await runAs("shared.bad-placeholder", "acme");
    expect(run.state).toBe("failed");
    expect(errorOf(run)).toMatchObject({ code: "invalid_configuration" });
    expect(errorOf(run).message).toContain("{tenant} stands for the run's tenant");
  });

  it("fails with upstream_unauthorized, not retried, when the server refuses the credentials", async () => {
    await f.publish(mcpBacked("tenant-c.whoami", { url: server.url, tool: "whoami", secret_headers: { authorization: { secret: "WRONG_KEY", prefix: "Bearer " } } }));
    const run = await f.run("tenant-c.whoami", {});
    expect(run.state).toBe("failed");
    expect(errorOf(run).code).toBe("upstream_unauthorized");
    expect(errorOf(run).retryable).toBe(false);
  });
});
