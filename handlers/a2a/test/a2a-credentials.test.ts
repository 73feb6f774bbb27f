/**
 * Credentials and egress of a2a.send: executor secrets sent only to the hosts the operator bound them to (per tenant
 * where the name says {tenant}), the caller's own token never forwarded, an agent refusing the credentials, and an
 * executor whose egress policy refuses the agent's address.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { startA2aAgent } from "./a2a-agent.mjs";
import { a2aBacked, errorOf, openFabric, outputsOf, type TestFabric } from "./a2a-fixtures.js";

let agent: Awaited<ReturnType<typeof startA2aAgent>>;
let f: TestFabric;

beforeAll(async () => {
  agent = await startA2aAgent({ auth: (h: Record<string, unknown>) => h.authorization === "Bearer agent-key" || h.authorization === "Bearer acme-key" });
  const host = new URL(agent.url).host;
  f = await openFabric({
    secrets: { AGENT_KEY: "agent-key", ELSEWHERE_KEY: "agent-key", WRONG_KEY: "nope", AGENT_TOKEN_acme: "acme-key", AGENT_TOKEN_globex: "agent-key" },
    flags: {
      executor: {
        egress: { allow_cidrs: ["127.0.0.1/32"] },
        secret_hosts: { AGENT_KEY: [host], ELSEWHERE_KEY: ["api.example.com"], WRONG_KEY: [host], AGENT_TOKEN_acme: [host], AGENT_TOKEN_globex: ["api.example.com"] },
      },
    },
  });
}, 60_000);
afterAll(async () => {
  await f?.close();
  await agent?.close();
});

async function runAs(id: string, tenant: string | undefined, headers: Record<string, string> = {}) {
  const res = await fetch(`${f.gateway}/v1/runs`, {
    method: "POST",
    headers: { "content-type": "application/json", prefer: "wait=20", ...headers },
    body: JSON.stringify({ root_node_type_ref: { node_type_id: id, version: "1.0.0" }, input: { word: "hi" }, ...(tenant === undefined ? {} : { run_context: { tenant_id: tenant } }) }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as any;
}

describe("credentials of a2a.send", () => {
  it("sends the executor's secret to the agent's host on every request, and never the caller's token", async () => {
    await f.publish(a2aBacked("keyed.echo", { card_url: agent.cardUrl, skill: "echo", secret_headers: { authorization: { secret: "AGENT_KEY", prefix: "Bearer " } } }));
    const before = agent.state.headers.length;
    const run = await runAs("keyed.echo", undefined, { authorization: "Bearer caller-token" });
    expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
    expect(outputsOf(run)).toMatchObject({ echo: { word: "hi" } });
    const seen = agent.state.headers.slice(before);
    expect(seen.map((h: any) => h.path)).toEqual(expect.arrayContaining(["/.well-known/agent-card.json", "/a2a/jsonrpc"]));
    expect(new Set(seen.map((h: any) => h.authorization))).toEqual(new Set(["Bearer agent-key"]));
    expect(JSON.stringify(seen)).not.toContain("caller-token");
  });

  it("refuses a secret bound to another host, sending nothing", async () => {
    await f.publish(a2aBacked("elsewhere.echo", { card_url: agent.cardUrl, skill: "echo", secret_headers: { authorization: { secret: "ELSEWHERE_KEY", prefix: "Bearer " } } }));
    const before = agent.state.headers.length;
    const run = await runAs("elsewhere.echo", undefined);
    expect(run.state).toBe("failed");
    expect(errorOf(run)).toMatchObject({ code: "egress_denied", details: { field: "nodefabric.a2a.secret_headers.authorization" } });
    expect(agent.state.headers.length).toBe(before);
  });

  it("sends each tenant's own secret, named with {tenant}, and refuses a tenant without one", async () => {
    await f.publish(a2aBacked("tenanted.echo", { card_url: agent.cardUrl, skill: "echo", secret_headers: { authorization: { secret: "AGENT_TOKEN_{tenant}", prefix: "Bearer " } } }));
    const before = agent.state.headers.length;
    const run = await runAs("tenanted.echo", "acme");
    expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
    expect(new Set(agent.state.headers.slice(before).map((h: any) => h.authorization))).toEqual(new Set(["Bearer acme-key"]));

    for (const [tenant, code, message] of [
      [undefined, "upstream_unauthorized", /this run has no tenant/],
      ["umbrella", "upstream_unauthorized", /tenant umbrella has no credentials for this agent.*AGENT_TOKEN_umbrella/],
      ["globex", "egress_denied", /AGENT_TOKEN_globex/],
    ] as const) {
      const at = agent.state.headers.length;
      const failed = await runAs("tenanted.echo", tenant);
      expect(failed.state).toBe("failed");
      expect(errorOf(failed).code).toBe(code);
      expect(errorOf(failed).message).toMatch(message);
      expect(agent.state.headers.length).toBe(at);
    }
  });

  it("fails with upstream_unauthorized, not retried, when the agent refuses the credentials", async () => {
    await f.publish(a2aBacked("wrong.echo", { card_url: agent.cardUrl, skill: "echo", secret_headers: { authorization: { secret: "WRONG_KEY", prefix: "Bearer " } } }));
    const before = agent.state.messages.length;
    const run = await runAs("wrong.echo", undefined);
    expect(run.state).toBe("failed");
    expect(errorOf(run)).toMatchObject({ code: "upstream_unauthorized", retryable: false });
    expect(agent.state.messages.length).toBe(before);
  });
});

describe("egress of a2a.send", () => {
  it("fails with egress_denied, reaching nothing, when the executor's policy refuses the agent's address", async () => {
    const strict = await openFabric({ flags: { executor: { egress: {} } } });
    try {
      await strict.publish(a2aBacked("open.echo", { card_url: agent.cardUrl, skill: "echo" }));
      const before = agent.state.headers.length;
      const r = await fetch(`${strict.gateway}/v1/runs`, {
        method: "POST",
        headers: { "content-type": "application/json", prefer: "wait=20" },
        body: JSON.stringify({ root_node_type_ref: { node_type_id: "open.echo", version: "1.0.0" }, input: {} }),
      });
      const run = (await r.json()) as any;
      expect(run.state).toBe("failed");
      expect(errorOf(run).code).toBe("egress_denied");
      expect(errorOf(run).message).toContain("127.0.0.1");
      expect(agent.state.headers.length).toBe(before);
    } finally {
      await strict.close();
    }
  }, 30_000);
});
