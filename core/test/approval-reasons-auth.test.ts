/**
 * A reason with an approval's decision, with authentication on and real JWTs: the reason and the decider's subject
 * are kept in the coordinator's store (read here from its SQLite file), tenants stay confined whatever the body, and
 * the scope comes before the body.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadConfig } from "../src/config.js";
import { startFabric, type RunningFabric } from "../src/fabric.js";
import { openSqliteDatabase } from "../src/store/sqlite-driver.js";
import { startTestIssuer, type TestIssuer } from "./support/test-issuer.js";
import { call, expectEnvelope, until } from "./support/gateway-http.js";
import { SLEEP_NEEDS_APPROVAL } from "./support/listing-fabric.js";

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const sleepRef = { node_type_id: "demo.sleep", version: "1.0.0" };

describe("a reason with an approval's decision (auth on)", () => {
  let idp: TestIssuer;
  let fabric: RunningFabric;
  let dataDir: string;
  let gw: string;
  const tokens: Record<string, string> = {};
  const bearer = (who: string) => ({ authorization: `Bearer ${tokens[who]}` });

  beforeAll(async () => {
    idp = await startTestIssuer();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-approval-reasons-"));
    const keyFile = path.join(dataDir, "signing-key.json");
    fs.writeFileSync(keyFile, JSON.stringify(idp.keys[0]!.privateJwk));
    const policy = path.join(dataDir, "policy.cedar");
    fs.writeFileSync(policy, SLEEP_NEEDS_APPROVAL);
    const flags = {
      port_base: 0,
      data_dir: path.join(dataDir, "data"),
      log_level: "silent",
      handlers: ["@nodefabric/handler-demo"],
      policy,
      auth: { mode: "required", issuer: idp.issuer, jwks_url: idp.jwksUrl, signing_key_file: keyFile },
    };
    fabric = await startFabric(loadConfig({ cwd: repoRoot, env: {}, flags: flags as never }), ["node-registry", "pdp", "selection", "atomic-executor", "run-coordinator", "run-gateway"]);
    gw = fabric.urls["run-gateway"]!;
    const aud = "nodefabric-run-gateway";
    tokens.acme = await idp.mint({ aud, scope: "runs:write approvals:write", tenant_id: "acme", sub: "acme-approver", expiresIn: 600 });
    tokens.globex = await idp.mint({ aud, scope: "runs:write approvals:write", tenant_id: "globex", sub: "globex-approver", expiresIn: 600 });
    tokens.reader = await idp.mint({ aud, scope: "runs:read", tenant_id: "acme", sub: "acme-auditor", expiresIn: 600 });
  }, 60_000);

  afterAll(async () => {
    await fabric?.close();
    await idp?.close();
  });

  async function parked(who: string): Promise<{ runId: string; approvalId: string }> {
    const runId = await until("demo.sleep can be started", async () => {
      const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: sleepRef, input: { ms: 10, value: who } }, bearer(who));
      return r.status === 200 ? (r.body.run_id as string) : undefined;
    });
    const approvalId = await until("the approval is pending", async () => {
      const a = await call("GET", `${gw}/v1/approvals?run_id=${encodeURIComponent(runId)}&state=pending`, undefined, bearer(who));
      return a.body?.[0]?.approval_id as string | undefined;
    });
    return { runId, approvalId };
  }

  /** The approval's stored document, straight from the coordinator's database. */
  function storedDoc(approvalId: string): Record<string, unknown> {
    const db = openSqliteDatabase(path.join(dataDir, "data", "run-coordinator.db"));
    try {
      const row = db.prepare("SELECT doc FROM approvals WHERE approval_id = ?").get(approvalId) as { doc: string };
      return JSON.parse(row.doc);
    } finally {
      db.close();
    }
  }

  it("keeps the reason and who decided; another tenant cannot decide, with or without a reason", async () => {
    const { runId, approvalId } = await parked("acme");
    const url = `${gw}/v1/approvals/${approvalId}:reject`;
    expectEnvelope(await call("POST", url, { reason: "not mine to judge" }, bearer("globex")), 404, "approval_not_found");
    expectEnvelope(await call("POST", url, { reason: "read-only" }, bearer("reader")), 403, "permission_denied");
    // Without a token, the body is never looked at.
    expectEnvelope(await call("POST", url, { reason: 7 }), 401, "unauthenticated");

    const reason = "Duplicate of an order already paid.";
    expect((await call("POST", url, { reason }, bearer("acme"))).status).toBe(204);
    const listed = (await call("GET", `${gw}/v1/approvals?run_id=${encodeURIComponent(runId)}`, undefined, bearer("acme"))).body;
    expect(listed[0]).toMatchObject({ state: "rejected", decision_reason: reason, tenant_id: "acme" });
    const doc = storedDoc(approvalId);
    expect(doc["nodefabric.decision_reason"]).toBe(reason);
    expect(doc["nodefabric.decided_by"]).toEqual({ sub: "acme-approver", iss: idp.issuer });
    // What the PDP asked is still there.
    expect(doc["nodefabric.checkpoint"]).toBe("node.run.execute");
    expect(doc.decision).toBe("require_approval");
  });

  it("keeps who decided without a reason too", async () => {
    const { approvalId } = await parked("acme");
    expect((await call("POST", `${gw}/v1/approvals/${approvalId}:approve`, undefined, bearer("acme"))).status).toBe(204);
    const doc = storedDoc(approvalId);
    expect(doc["nodefabric.decided_by"]).toEqual({ sub: "acme-approver", iss: idp.issuer });
    expect(doc).not.toHaveProperty(["nodefabric.decision_reason"]);
  });
});
