import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import { validatorFor } from "@nodefabric/schemas";
import {
  AssignmentTokens,
  CALLER_HEADER,
  ROUTE_ACCESS,
  SCOPES,
  SERVICE_NAMES,
  SignedServiceTokens,
  TokenVerifier,
  audienceOf,
  buildRunGateway,
  loadConfig,
  loadOrCreateAssignmentSecret,
  startFabric,
  type RunningFabric,
  type ServiceName,
} from "@nodefabric/core";
import { call, eventually, readNdjson } from "./run-client.js";
import { startTestIssuer, type TestIssuer } from "../core/test/support/test-issuer.js";

// The whole fabric with authentication required on every service: the services call each other with tokens of
// their own, a composite executor acts with its assignment token, tenants see only their runs, and the caller's
// identity reaches the PDP.
const repo = fileURLToPath(new URL("..", import.meta.url));
const isEnvelope = validatorFor("error_envelope");
const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };
const SLEEP = { node_type_id: "demo.sleep", version: "1.0.0" };
const FANOUT = { node_type_id: "examples.fanout", version: "1.0.0" };
const CLIENT_SCOPES = "runs:read runs:write approvals:write";

const POLICY = `
@id("allow-all")
permit(principal, action, resource);

@id("forbid-mallory")
forbid(principal == NodeFabric::User::"mallory", action == NodeFabric::Action::"run.start", resource);

@id("approve-sleep")
@require_approval("true")
permit(principal, action == NodeFabric::Action::"node.run.execute", resource == NodeFabric::NodeType::"demo.sleep");
`;

describe("a fabric with authentication required on every service", () => {
  let idp: TestIssuer;
  let fabric: RunningFabric;
  let dataDir: string;
  let gw: string;
  let coord: string;
  const url = (s: ServiceName) => fabric.urls[s]!;
  const token = (service: ServiceName, scope: string, o: { tenant_id?: string; sub?: string } = {}) => idp.mint({ aud: audienceOf(service), scope, ...o });
  const bearer = async (service: ServiceName, scope: string, o: { tenant_id?: string; sub?: string } = {}) => ({ authorization: `Bearer ${await token(service, scope, o)}` });
  const as = (tenant: string, sub = `user-of-${tenant}`) => bearer("run-gateway", CLIENT_SCOPES, { tenant_id: tenant, sub });

  /** Starts a run through the gateway and waits for its end. */
  async function runToEnd(ref: { node_type_id: string; version: string }, input: unknown, headers: Record<string, string>, extra: Record<string, unknown> = {}) {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: ref, input, ...extra }, { ...headers, prefer: "wait=20" });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body;
  }

  beforeAll(async () => {
    idp = await startTestIssuer();
    dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-auth-"));
    const keyFile = path.join(dataDir, "signing-key.json");
    writeFileSync(keyFile, JSON.stringify(idp.keys[0]!.privateJwk));
    const policyFile = path.join(dataDir, "policy.cedar");
    writeFileSync(policyFile, POLICY);
    fabric = await startFabric(
      loadConfig({
        cwd: repo,
        env: {},
        flags: {
          port_base: 0,
          data_dir: dataDir,
          log_level: "silent",
          handlers: ["@nodefabric/handler-demo", "@nodefabric/handler-examples"],
          policy: policyFile,
          auth: { mode: "required", issuer: idp.issuer, jwks_url: idp.jwksUrl, signing_key_file: keyFile },
        } as never,
      }),
    );
    gw = url("run-gateway");
    coord = url("run-coordinator");
    // Executors register with their own tokens; the directory itself needs node-types:read.
    const reg = await bearer("node-registry", "node-types:read");
    await eventually(async () => {
      const r = await call("GET", `${url("node-registry")}/v1/executors?node_type_id=demo.echo`, undefined, reg);
      return r.status === 200 && r.body.length > 0 ? true : undefined;
    }, 20_000, "executor registration with a service token");
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
    await idp?.close();
  });

  it("completes an atomic run and a composite run, and stamps the caller's identity on the run", async () => {
    const headers = await as("acme", "alice");
    const run = await runToEnd(ECHO, { city: "Oslo" }, headers, { run_context: { tenant_id: "someone-else", actor: { type: "admin", id: "root" } } });
    expect(run.state).toBe("completed");
    expect(run.extensions["nodefabric.outputs"]).toEqual({ echo: { city: "Oslo" } });
    // The token decides the tenant and the identity, not what the request claims.
    expect(run.run_context).toMatchObject({ tenant_id: "acme", actor: { type: "user", id: "alice" }, identity: { sub: "alice", iss: idp.issuer, tenant_id: "acme" } });

    const composite = await runToEnd(FANOUT, { items: ["a", "b", "c"] }, headers);
    expect(composite.state, JSON.stringify(composite.extensions)).toBe("completed");
    expect(composite.extensions["nodefabric.outputs"]).toBeDefined();
    const nodeRuns = await call("GET", `${gw}/v1/runs/${composite.run_id}/node-runs`, undefined, headers);
    expect(nodeRuns.status).toBe(200);
    expect(nodeRuns.body).toHaveLength(4);
    expect(nodeRuns.body.every((n: { state: string }) => n.state === "completed")).toBe(true);
  });

  it("carries the caller to the PDP as the principal", async () => {
    const denied = await runToEnd(ECHO, { x: 1 }, await as("acme", "mallory"));
    expect(denied.state).toBe("failed");
    expect(denied.extensions["nodefabric.error"].code).toBe("policy_denied");
    const ev = await readNdjson(`${gw}/v1/runs/${denied.run_id}/events`, await as("acme", "mallory"));
    const decided = ev.lines.find((e) => e.type === "policy_decided");
    expect(decided.data).toMatchObject({ action: "run.start", decision: "deny", reason_code: "denied_by:forbid-mallory" });
  });

  it("refuses a client without a token, with a token for another service, or without the scope", async () => {
    const body = { root_node_type_ref: ECHO, input: {} };
    const none = await call("POST", `${gw}/v1/runs`, body);
    expect(none.status).toBe(401);
    expect(none.headers["www-authenticate"]).toMatch(/^Bearer realm="nodefabric-run-gateway", error="invalid_token"/);
    const replayed = await call("POST", `${gw}/v1/runs`, body, await bearer("run-coordinator", CLIENT_SCOPES));
    expect(replayed.status).toBe(401);
    const readOnly = await call("POST", `${gw}/v1/runs`, body, await bearer("run-gateway", "runs:read"));
    expect(readOnly.status).toBe(403);
    expect(readOnly.body.error).toMatchObject({ code: "permission_denied", details: { required_scope: "runs:write" } });
  });

  describe("tenants", () => {
    let run: { run_id: string; root_node_run_id: string };
    beforeAll(async () => {
      run = await runToEnd(ECHO, { secret: "acme's" }, await as("acme"));
    });

    /** Every way of reaching a run, on a base URL (gateway or coordinator). */
    const reads = (base: string, r: { run_id: string; root_node_run_id: string }) => [
      ["GET", `${base}/v1/runs/${r.run_id}`],
      ["GET", `${base}/v1/runs/${r.run_id}/node-runs`],
      ["GET", `${base}/v1/runs/${r.run_id}/events?follow=false`],
      ["GET", `${base}/v1/node-runs/${r.root_node_run_id}`],
      ["POST", `${base}/v1/runs/${r.run_id}:cancel`],
    ] as const;

    it("answers another tenant 404 everywhere on the gateway, the event stream included", async () => {
      const beta = await as("beta");
      for (const [method, u] of reads(gw, run)) {
        const res = await call(method, u, undefined, beta);
        expect(res.status, `${method} ${u}`).toBe(404);
        expect(isEnvelope(res.body)).toBe(true);
        expect(["run_not_found", "node_run_not_found"]).toContain(res.body.error.code);
      }
      const list = await call("GET", `${gw}/v1/runs?limit=1000`, undefined, beta);
      expect(list.body.map((r: { run_id: string }) => r.run_id)).not.toContain(run.run_id);
      const own = await call("GET", `${gw}/v1/runs?limit=1000`, undefined, await as("acme"));
      expect(own.body.map((r: { run_id: string }) => r.run_id)).toContain(run.run_id);
      expect(own.body.every((r: { run_context?: { tenant_id?: string } }) => r.run_context?.tenant_id === "acme")).toBe(true);
      for (const [method, u] of reads(gw, run).filter(([m, u]) => m === "GET" && !u.includes("/events"))) {
        expect((await call(method, u, undefined, await as("acme"))).status, `${method} ${u}`).toBe(200);
      }
      const events = await readNdjson(`${gw}/v1/runs/${run.run_id}/events`, await as("acme"));
      expect(events.status).toBe(200);
      expect(events.lines.at(-1).type).toBe("run_completed");
    });

    it("answers another tenant 404 on the coordinator too", async () => {
      const beta = await bearer("run-coordinator", "runs:read runs:write", { tenant_id: "beta" });
      for (const [method, u] of reads(coord, run)) expect((await call(method, u, undefined, beta)).status, `${method} ${u}`).toBe(404);
      const follow = await readNdjson(`${coord}/v1/node-runs/${run.root_node_run_id}/events`, beta);
      expect(follow.status).toBe(404);
      const acme = await bearer("run-coordinator", "runs:read", { tenant_id: "acme" });
      expect((await readNdjson(`${coord}/v1/node-runs/${run.root_node_run_id}/events`, acme)).status).toBe(200);
    });

    it("keeps tenants apart through a gateway that forwards over HTTP, passing the caller on", async () => {
      const remote: FastifyInstance = await buildRunGateway({
        logger: false,
        coordinatorUrl: coord,
        auth: { mode: "required", verifier: new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer }) },
        tokens: new SignedServiceTokens({ jwk: idp.keys[0]!.privateJwk, issuer: idp.issuer, service: "run-gateway" }),
      });
      await remote.listen({ host: "127.0.0.1", port: 0 });
      const rgw = `http://127.0.0.1:${(remote.server.address() as { port: number }).port}`;
      try {
        const started = await call("POST", `${rgw}/v1/runs`, { root_node_type_ref: ECHO, input: { via: "http" } }, { ...(await as("gamma", "grace")), prefer: "wait=20" });
        expect(started.status).toBe(200);
        expect(started.body).toMatchObject({ state: "completed", run_context: { tenant_id: "gamma", identity: { sub: "grace" } } });
        for (const [method, u] of reads(rgw, run)) expect((await call(method, u, undefined, await as("gamma"))).status, `${method} ${u}`).toBe(404);
        const events = await readNdjson(`${rgw}/v1/runs/${started.body.run_id}/events`, await as("gamma"));
        expect(events.status).toBe(200);
        expect(events.lines.at(-1).type).toBe("run_completed");
        expect((await readNdjson(`${rgw}/v1/runs/${started.body.run_id}/events`, await as("acme"))).status).toBe(404);
      } finally {
        await remote.close();
      }
    });

    it("lets only a token with identity:delegate pass a caller on", async () => {
      const forged = Buffer.from(JSON.stringify({ sub: "x", tenant_id: "acme", scope: "runs:read" })).toString("base64url");
      const res = await call("GET", `${coord}/v1/runs/${run.run_id}`, undefined, { ...(await bearer("run-coordinator", "runs:read", { tenant_id: "beta" })), [CALLER_HEADER]: forged });
      expect(res.status).toBe(403);
      expect(res.body.error.message).toMatch(/identity:delegate/);
    });

    it("approvals: another tenant gets 404, the run's tenant needs approvals:write", async () => {
      const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms: 1 } }, await as("acme"));
      expect(r.status).toBe(200);
      const approvalId = await eventually(async () => {
        const ev = await readNdjson(`${gw}/v1/runs/${r.body.run_id}/events?follow=false`, await as("acme"));
        return ev.lines.find((e) => e.type === "approval_requested")?.data.approval_id as string | undefined;
      });
      const other = await call("POST", `${gw}/v1/approvals/${approvalId}:approve`, undefined, await as("beta"));
      expect(other.status).toBe(404);
      expect(other.body.error.code).toBe("approval_not_found");
      const noScope = await call("POST", `${gw}/v1/approvals/${approvalId}:approve`, undefined, await bearer("run-gateway", "runs:write runs:read", { tenant_id: "acme" }));
      expect(noScope.status).toBe(403);
      expect((await call("POST", `${gw}/v1/approvals/${approvalId}:approve`, undefined, await as("acme"))).status).toBe(204);
      const done = await eventually(async () => {
        const g = await call("GET", `${gw}/v1/runs/${r.body.run_id}`, undefined, await as("acme"));
        return g.body.state === "completed" ? g.body : undefined;
      });
      expect(done.state).toBe("completed");
    });
  });

  describe("assignment tokens", () => {
    let assignments: AssignmentTokens;
    let mine: { run_id: string; root_node_run_id: string };
    let theirs: { run_id: string; root_node_run_id: string };
    beforeAll(async () => {
      // The coordinator's own secret, from its data directory: the tokens are exactly the ones it mints.
      assignments = new AssignmentTokens(loadOrCreateAssignmentSecret(path.join(dataDir, "assignment-secret")), 900);
      mine = await runToEnd(ECHO, { n: 1 }, await as("acme"));
      theirs = await runToEnd(ECHO, { n: 2 }, await as("acme"));
    });
    const withToken = async (t?: string) => ({ authorization: `Bearer ${t ?? (await assignments.mint({ run_id: mine.run_id, node_run_id: mine.root_node_run_id }))}` });

    it("reads the NodeRun it is bound to", async () => {
      const res = await call("GET", `${coord}/v1/node-runs/${mine.root_node_run_id}`, undefined, await withToken());
      expect(res.status).toBe(200);
      expect(res.body.node_run_id).toBe(mine.root_node_run_id);
    });

    it("is refused (403) for another NodeRun, another run, and anything outside its NodeRun", async () => {
      const h = await withToken();
      const attempts: Array<[string, string, unknown?]> = [
        ["GET", `${coord}/v1/node-runs/${theirs.root_node_run_id}`],
        ["GET", `${coord}/v1/node-runs/${theirs.root_node_run_id}/events?follow=false`],
        ["POST", `${coord}/v1/node-runs`, { run_id: theirs.run_id, parent_node_run_id: theirs.root_node_run_id, node_runs: [{ node_type_ref: ECHO, inputs: {} }] }],
        ["POST", `${coord}/v1/node-runs/${theirs.root_node_run_id}:complete`, { state: "completed", outputs: {} }],
        ["POST", `${coord}/v1/node-runs/${theirs.root_node_run_id}:evaluation`, { evaluation_result: { status: "success" } }],
        ["GET", `${coord}/v1/runs/${mine.run_id}`],
        ["GET", `${coord}/v1/runs`],
        ["POST", `${coord}/v1/runs`, { root_node_type_ref: ECHO, input: {} }],
        ["POST", `${coord}/v1/runs/${mine.run_id}:cancel`],
      ];
      for (const [method, u, body] of attempts) {
        const res = await call(method, u, body, h);
        expect(res.status, `${method} ${u}`).toBe(403);
        expect(res.body.error.code).toBe("permission_denied");
      }
    });

    it("is no token at all for any other service, and an expired or forged one is refused", async () => {
      const h = await withToken();
      expect((await call("GET", `${gw}/v1/runs/${mine.run_id}`, undefined, h)).status).toBe(401);
      const forged = new AssignmentTokens(undefined, 900);
      const f = await call("GET", `${coord}/v1/node-runs/${mine.root_node_run_id}`, undefined, await withToken(await forged.mint({ run_id: mine.run_id, node_run_id: mine.root_node_run_id })));
      expect(f.status).toBe(401);
      const shortLived = new AssignmentTokens(loadOrCreateAssignmentSecret(path.join(dataDir, "assignment-secret")), 1);
      const expiring = await shortLived.mint({ run_id: mine.run_id, node_run_id: mine.root_node_run_id });
      await new Promise((r) => setTimeout(r, 2100));
      const e = await call("GET", `${coord}/v1/node-runs/${mine.root_node_run_id}`, undefined, await withToken(expiring));
      expect(e.status).toBe(401);
      expect(e.body.error.message).toMatch(/expired/);
    });
  });

  describe("every endpoint's scope", () => {
    const fill = (p: string) => p.replace(/\{[a-z_]+\}/g, "nf-scope-probe");
    for (const service of SERVICE_NAMES) {
      for (const access of ROUTE_ACCESS[service]) {
        it(`${service}: ${access.method} ${access.path} needs ${access.scope}`, async () => {
          // Every scope but the one needed (and the write scope that would grant a needed read).
          const others = SCOPES.filter((s) => s !== access.scope && s !== access.scope.replace(/:read$/, ":write")).join(" ");
          const u = `${url(service)}${fill(access.path)}${access.path.endsWith("/events") ? "?follow=false" : ""}`;
          const body = access.method === "GET" ? undefined : {};
          const refused = await call(access.method, u, body, await bearer(service, others));
          expect(refused.status).toBe(403);
          expect(refused.body.error).toMatchObject({ code: "permission_denied", details: { required_scope: access.scope } });
          expect(refused.headers["www-authenticate"]).toContain(`scope="${access.scope}"`);
          const allowed = await call(access.method, u, body, await bearer(service, access.scope));
          expect([401, 403], `${access.method} ${u}: ${JSON.stringify(allowed.body)}`).not.toContain(allowed.status);
          expect((await call(access.method, u, body)).status).toBe(401);
        });
      }
    }
  });
});
