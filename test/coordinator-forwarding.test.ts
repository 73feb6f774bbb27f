/**
 * Two whole fabrics on one PostgreSQL schema, authentication required everywhere, with real JWTs from a test issuer.
 * A write for a run that the other fabric's coordinator holds is forwarded to that coordinator with the caller's
 * identity: approvals and cancels through the other gateway (in-process), and over HTTP straight to the other
 * coordinator. Assignment tokens are signed with the secret the coordinators share in the database.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { AssignmentTokens, audienceOf, loadConfig, startFabric, type RunningFabric, type ServiceName } from "@nodefabric/core";
import { call, eventually, readNdjson } from "./run-client.js";
import { startTestIssuer, type TestIssuer } from "../core/test/support/test-issuer.js";
import { dropSchemas, newSchema, pgQuery, storeUrl } from "./e2e/pg-fabric.js";

const repo = fileURLToPath(new URL("..", import.meta.url));
const SLEEP = { node_type_id: "demo.sleep", version: "1.0.0" };
const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };
const CLIENT_SCOPES = "runs:read runs:write approvals:write";
const POLICY = `
@id("allow-all")
permit(principal, action, resource);

@id("approve-sleep")
@require_approval("true")
permit(principal, action == NodeFabric::Action::"node.run.execute", resource == NodeFabric::NodeType::"demo.sleep");
`;

describe("coordinators of one database forward writes to the coordinator holding the run", () => {
  let idp: TestIssuer;
  const fabrics: RunningFabric[] = [];
  let schema: string;
  const url = (i: number, s: ServiceName) => fabrics[i]!.urls[s]!;
  const as = async (service: ServiceName, tenant: string, scope = CLIENT_SCOPES) => ({
    authorization: `Bearer ${await idp.mint({ aud: audienceOf(service), scope, tenant_id: tenant, sub: `user-of-${tenant}` })}`,
  });

  beforeAll(async () => {
    idp = await startTestIssuer();
    schema = newSchema("nf_fwd");
    const shared = mkdtempSync(path.join(os.tmpdir(), "nf-fwd-"));
    const keyFile = path.join(shared, "signing-key.json");
    writeFileSync(keyFile, JSON.stringify(idp.keys[0]!.privateJwk));
    const policyFile = path.join(shared, "policy.cedar");
    writeFileSync(policyFile, POLICY);
    for (let i = 0; i < 2; i++) {
      const config = loadConfig({
        cwd: repo,
        env: {},
        flags: {
          port_base: 0,
          data_dir: mkdtempSync(path.join(os.tmpdir(), `nf-fwd-${i}-`)),
          log_level: "silent",
          handlers: ["@nodefabric/handler-demo"],
          plugins: [path.join(repo, "plugins/postgres")],
          store: { url: storeUrl(schema) },
          policy: policyFile,
          auth: { mode: "required", issuer: idp.issuer, jwks_url: idp.jwksUrl, signing_key_file: keyFile },
        } as never,
      });
      fabrics.push(await startFabric(config));
    }
    const reg = { authorization: `Bearer ${await idp.mint({ aud: audienceOf("node-registry"), scope: "node-types:read" })}` };
    await eventually(async () => {
      const r = await call("GET", `${url(0, "node-registry")}/v1/executors?node_type_id=demo.sleep`, undefined, reg);
      return r.status === 200 && r.body.length === 2 ? true : undefined;
    }, 20_000, "both fabrics' executors in the shared directory");
  }, 90_000);
  afterAll(async () => {
    for (const f of fabrics) await f.close();
    await idp?.close();
    await dropSchemas();
  });

  /** Starts a demo.sleep run on fabric 0 and waits for its approval request. */
  async function parked(tenant: string, ms = 1): Promise<{ runId: string; approvalId: string }> {
    const r = await call("POST", `${url(0, "run-gateway")}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms } }, await as("run-gateway", tenant));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const approvalId = await eventually(async () => {
      const ev = await readNdjson(`${url(0, "run-gateway")}/v1/runs/${r.body.run_id}/events?follow=false`, await as("run-gateway", tenant));
      return ev.lines.find((e) => e.type === "approval_requested")?.data.approval_id as string | undefined;
    }, 10_000, "the approval request");
    return { runId: r.body.run_id, approvalId };
  }

  it("approves, through the other fabric's gateway, a run the first fabric's coordinator holds", async () => {
    const { runId, approvalId } = await parked("acme");
    const gw1 = url(1, "run-gateway");
    // Another tenant, and a token without approvals:write, are refused as they would be by the holder itself.
    const other = await call("POST", `${gw1}/v1/approvals/${approvalId}:approve`, undefined, await as("run-gateway", "beta"));
    expect(other.status).toBe(404);
    expect(other.body.error.code).toBe("approval_not_found");
    const noScope = await call("POST", `${gw1}/v1/approvals/${approvalId}:approve`, undefined, await as("run-gateway", "acme", "runs:read runs:write"));
    expect(noScope.status).toBe(403);
    const ok = await call("POST", `${gw1}/v1/approvals/${approvalId}:approve`, undefined, await as("run-gateway", "acme"));
    expect(ok.status, JSON.stringify(ok.body)).toBe(204);
    const done = await eventually(async () => {
      const g = await call("GET", `${gw1}/v1/runs/${runId}`, undefined, await as("run-gateway", "acme"));
      return g.body.state === "completed" ? g.body : undefined;
    }, 15_000, "the run completed");
    expect(done.extensions["nodefabric.outputs"]).toMatchObject({ slept_ms: 1 });
    // Still held by the coordinator that started it: the approval was forwarded, not taken over.
    const [row] = await pgQuery<{ lease_epoch: string }>(`SELECT lease_epoch FROM ${schema}.runs WHERE run_id = $1`, [runId]);
    expect(row.lease_epoch).toBe("1");
    // A repeated decision answers the same; the opposite one is refused with 409, both through the other gateway.
    expect((await call("POST", `${gw1}/v1/approvals/${approvalId}:approve`, undefined, await as("run-gateway", "acme"))).status).toBe(204);
    const late = await call("POST", `${gw1}/v1/approvals/${approvalId}:reject`, undefined, await as("run-gateway", "acme"));
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe("node_run_terminal");
  });

  it("makes a decision sent through both gateways at once once; opposite decisions at once: one wins, the other is a 409", async () => {
    const same = await parked("acme");
    const both = await Promise.all([0, 1].map(async (i) => call("POST", `${url(i, "run-gateway")}/v1/approvals/${same.approvalId}:approve`, undefined, await as("run-gateway", "acme"))));
    expect(both.map((r) => r.status)).toEqual([204, 204]);
    const opposite = await parked("acme");
    const [approve, reject] = await Promise.all([
      call("POST", `${url(0, "run-gateway")}/v1/approvals/${opposite.approvalId}:approve`, undefined, await as("run-gateway", "acme")),
      call("POST", `${url(1, "run-gateway")}/v1/approvals/${opposite.approvalId}:reject`, undefined, await as("run-gateway", "acme")),
    ]);
    expect([approve.status, reject.status].sort()).toEqual([204, 409]);
    const winner = approve.status === 204 ? "approved" : "rejected";
    for (const [{ runId }, decision] of [[same, "approved"], [opposite, winner]] as const) {
      const ended = await eventually(async () => {
        const g = await call("GET", `${url(1, "run-gateway")}/v1/runs/${runId}`, undefined, await as("run-gateway", "acme"));
        return g.body.state === "completed" || g.body.state === "failed" ? g.body : undefined;
      }, 15_000, "the run ended");
      expect(ended.state).toBe(decision === "approved" ? "completed" : "failed");
      const ev = await readNdjson(`${url(0, "run-gateway")}/v1/runs/${runId}/events?follow=false`, await as("run-gateway", "acme"));
      const resolved = ev.lines.filter((e) => e.type === "approval_resolved");
      expect(resolved).toHaveLength(1);
      expect(resolved[0].data.decision).toBe(decision);
      expect(ev.lines.filter((e) => e.type === "node_run_started")).toHaveLength(decision === "approved" ? 1 : 0);
    }
  });

  it("passes a decision's reason on to the holder, through the other gateway and straight to the other coordinator", async () => {
    const viaGateway = await parked("acme");
    const viaCoordinator = await parked("acme");
    const gw1 = url(1, "run-gateway");
    const co1 = url(1, "run-coordinator");
    const bad = await call("POST", `${co1}/v1/approvals/${viaCoordinator.approvalId}:reject`, { reason: "" }, await as("run-coordinator", "acme"));
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_request");
    const reasons = { [viaGateway.approvalId]: "Rejected at the second desk.", [viaCoordinator.approvalId]: "Approved over the wire." };
    expect((await call("POST", `${gw1}/v1/approvals/${viaGateway.approvalId}:reject`, { reason: reasons[viaGateway.approvalId] }, await as("run-gateway", "acme"))).status).toBe(204);
    const ok = await call("POST", `${co1}/v1/approvals/${viaCoordinator.approvalId}:approve`, { reason: reasons[viaCoordinator.approvalId] }, await as("run-coordinator", "acme"));
    expect(ok.status, JSON.stringify(ok.body)).toBe(204);
    for (const { runId, approvalId } of [viaGateway, viaCoordinator]) {
      const ev = await readNdjson(`${gw1}/v1/runs/${runId}/events?follow=false`, await as("run-gateway", "acme"));
      expect(ev.lines.find((e) => e.type === "approval_resolved")?.data.reason).toBe(reasons[approvalId]);
      const listed = await call("GET", `${gw1}/v1/approvals?run_id=${encodeURIComponent(runId)}`, undefined, await as("run-gateway", "acme"));
      expect(listed.body[0].decision_reason).toBe(reasons[approvalId]);
      // PostgreSQL keeps it in the approval's JSON document, with who decided.
      const [row] = await pgQuery<{ doc: Record<string, unknown> }>(`SELECT doc FROM ${schema}.approvals WHERE approval_id = $1`, [approvalId]);
      expect(row.doc["nodefabric.decision_reason"]).toBe(reasons[approvalId]);
      expect(row.doc["nodefabric.decided_by"]).toEqual({ sub: "user-of-acme", iss: idp.issuer });
    }
  });

  it("cancels over HTTP on the other coordinator, and through the other gateway, runs the first one holds", async () => {
    const a = await parked("acme");
    const viaCoordinator = await call("POST", `${url(1, "run-coordinator")}/v1/runs/${a.runId}:cancel`, undefined, await as("run-coordinator", "acme"));
    expect(viaCoordinator.status, JSON.stringify(viaCoordinator.body)).toBe(200);
    expect(viaCoordinator.body.state).toBe("canceled");
    const elsewhere = await call("POST", `${url(1, "run-coordinator")}/v1/runs/${a.runId}:cancel`, undefined, await as("run-coordinator", "beta"));
    expect(elsewhere.status).toBe(404);

    const b = await parked("acme");
    const viaGateway = await call("POST", `${url(1, "run-gateway")}/v1/runs/${b.runId}:cancel`, undefined, await as("run-gateway", "acme"));
    expect(viaGateway.status, JSON.stringify(viaGateway.body)).toBe(200);
    expect(viaGateway.body.state).toBe("canceled");
    for (const id of [a.runId, b.runId]) {
      const ev = await readNdjson(`${url(1, "run-gateway")}/v1/runs/${id}/events?follow=false`, await as("run-gateway", "acme"));
      expect(ev.lines.map((e) => e.seq)).toEqual(ev.lines.map((_, i) => i));
      expect(ev.lines.at(-1)).toMatchObject({ type: "run_completed", data: { state: "canceled" } });
    }
  });

  it("accepts on one coordinator the assignment tokens another minted, with the secret they share", async () => {
    const r = await call("POST", `${url(0, "run-gateway")}/v1/runs`, { root_node_type_ref: ECHO, input: { x: 1 } }, { ...(await as("run-gateway", "acme")), prefer: "wait=10" });
    expect(r.body.state).toBe("completed");
    const [setting] = await pgQuery<{ value: string }>(`SELECT value FROM ${schema}.nodefabric_settings WHERE name = 'secret:assignment-tokens'`);
    const tokens = new AssignmentTokens(new Uint8Array(Buffer.from(setting.value, "base64")));
    const token = await tokens.mint({ run_id: r.body.run_id, node_run_id: r.body.root_node_run_id });
    for (const i of [0, 1]) {
      const nr = await call("GET", `${url(i, "run-coordinator")}/v1/node-runs/${r.body.root_node_run_id}`, undefined, { authorization: `Bearer ${token}` });
      expect(nr.status, `coordinator ${i}`).toBe(200);
      expect(nr.body.state).toBe("completed");
    }
    const forged = await new AssignmentTokens().mint({ run_id: r.body.run_id, node_run_id: r.body.root_node_run_id });
    expect((await call("GET", `${url(1, "run-coordinator")}/v1/node-runs/${r.body.root_node_run_id}`, undefined, { authorization: `Bearer ${forged}` })).status).toBe(401);
  });
});
