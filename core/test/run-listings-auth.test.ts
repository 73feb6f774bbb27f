/**
 * The listings with authentication on, with real JWTs from a test identity provider: a caller confined to a tenant
 * sees only its tenant's runs and approvals and may not ask for another's; a caller confined to none sees all and may
 * pick one; the scope is runs:read.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { RunningFabric } from "../src/fabric.js";
import { startTestIssuer, type TestIssuer } from "./support/test-issuer.js";
import { call, expectEnvelope, expectValid, until } from "./support/gateway-http.js";
import { startListingFabric } from "./support/listing-fabric.js";

const sleepRef = { node_type_id: "demo.sleep", version: "1.0.0" };

describe("GET /v1/approvals and GET /v1/runs with auth on", () => {
  let idp: TestIssuer;
  let fabric: RunningFabric;
  let gw: string;
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const tokens: Record<string, string> = {};
  const runs: Record<string, string> = {};

  beforeAll(async () => {
    idp = await startTestIssuer();
    const keyDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-listings-keys-"));
    const keyFile = path.join(keyDir, "signing-key.json");
    fs.writeFileSync(keyFile, JSON.stringify(idp.keys[0]!.privateJwk));
    fabric = await startListingFabric({ mode: "required", issuer: idp.issuer, jwks_url: idp.jwksUrl, signing_key_file: keyFile });
    gw = fabric.urls["run-gateway"]!;
    const aud = "nodefabric-run-gateway";
    const people = { acme: "acme", globex: "globex" } as const;
    for (const [who, tenant] of Object.entries(people)) {
      tokens[who] = await idp.mint({ aud, scope: "runs:write approvals:write", tenant_id: tenant, sub: `${who}-user`, expiresIn: 600 });
    }
    tokens.operator = await idp.mint({ aud, scope: "runs:write approvals:write", sub: "operator", expiresIn: 600 });
    tokens.reader = await idp.mint({ aud, scope: "runs:read", sub: "auditor", expiresIn: 600 });
    tokens.noScope = await idp.mint({ aud, scope: "node-types:read", tenant_id: "acme", sub: "acme-bot", expiresIn: 600 });
    tokens.acmeAtCoordinator = await idp.mint({ aud: "nodefabric-run-coordinator", scope: "runs:read", tenant_id: "acme", sub: "acme-user", expiresIn: 600 });

    await until("demo.sleep can be started", async () => {
      const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: sleepRef, input: { ms: 10, value: "acme" } }, bearer(tokens.acme));
      return r.status === 200 ? r.body.run_id : undefined;
    }).then((id) => (runs.acme = id as string));
    for (const who of ["globex", "operator"]) {
      const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: sleepRef, input: { ms: 10, value: who } }, bearer(tokens[who]));
      expect(r.status, r.text).toBe(200);
      runs[who] = r.body.run_id;
    }
    await until("three approvals pending", async () => {
      const r = await call("GET", `${gw}/v1/approvals?state=pending`, undefined, bearer(tokens.operator));
      return r.body?.length === 3 ? true : undefined;
    });
  }, 60_000);

  afterAll(async () => {
    await fabric?.close();
    await idp?.close();
  });

  const get = (url: string, who: string) => call("GET", url, undefined, bearer(tokens[who]));
  const runIds = (list: Array<{ run_id: string }>) => list.map((x) => x.run_id);

  it("a tenant's token lists only its tenant's approvals; a token without a tenant lists all", async () => {
    const acme = await get(`${gw}/v1/approvals`, "acme");
    expect(acme.status, acme.text).toBe(200);
    expectValid("approval_list", acme.body);
    expect(runIds(acme.body)).toEqual([runs.acme]);
    expect(acme.body[0]).toMatchObject({ tenant_id: "acme", state: "pending", node_type_ref: sleepRef });
    expect(runIds((await get(`${gw}/v1/approvals`, "globex")).body)).toEqual([runs.globex]);
    // Naming another tenant's run finds nothing rather than telling it exists.
    expect((await get(`${gw}/v1/approvals?run_id=${encodeURIComponent(runs.globex)}`, "acme")).body).toEqual([]);

    const all = await get(`${gw}/v1/approvals`, "operator");
    expect(runIds(all.body)).toEqual([runs.operator, runs.globex, runs.acme]);
    expect(all.body[0].tenant_id).toBeUndefined();
    expect(runIds((await get(`${gw}/v1/approvals`, "reader")).body)).toEqual(runIds(all.body));

    // The coordinator confines the same way.
    const atCoordinator = await get(`${fabric.urls["run-coordinator"]}/v1/approvals`, "acmeAtCoordinator");
    expect(atCoordinator.status, atCoordinator.text).toBe(200);
    expect(atCoordinator.body).toEqual(acme.body);
  });

  it("a tenant's token may not pick another tenant's runs (403); one without a tenant may pick any", async () => {
    expect(runIds((await get(`${gw}/v1/runs`, "acme")).body)).toEqual([runs.acme]);
    expect(runIds((await get(`${gw}/v1/runs?tenant_id=acme`, "acme")).body)).toEqual([runs.acme]);
    const denied = await get(`${gw}/v1/runs?tenant_id=globex`, "acme");
    expectEnvelope(denied, 403, "permission_denied");
    expect(denied.body.error.details).toMatchObject({ tenant_id: "globex" });

    expect(runIds((await get(`${gw}/v1/runs?tenant_id=globex`, "operator")).body)).toEqual([runs.globex]);
    expect(runIds((await get(`${gw}/v1/runs?tenant_id=acme&node_type_id=demo.sleep`, "reader")).body)).toEqual([runs.acme]);
    expect(runIds((await get(`${gw}/v1/runs?node_type_id=demo.sleep`, "operator")).body)).toEqual([runs.operator, runs.globex, runs.acme]);
    expect((await get(`${gw}/v1/runs?tenant_id=initech`, "operator")).body).toEqual([]);
  });

  it("needs runs:read, and a token", async () => {
    const r = await get(`${gw}/v1/approvals`, "noScope");
    expectEnvelope(r, 403, "permission_denied");
    expect(r.body.error.details).toMatchObject({ required_scope: "runs:read" });
    expectEnvelope(await call("GET", `${gw}/v1/approvals`), 401, "unauthenticated");
  });

  it("deciding moves an approval out of the tenant's pending list and leaves the others' alone", async () => {
    const mine = (await get(`${gw}/v1/approvals?state=pending`, "acme")).body[0];
    const theirs = (await get(`${gw}/v1/approvals?state=pending`, "globex")).body[0];
    expectEnvelope(await call("POST", `${gw}/v1/approvals/${theirs.approval_id}:approve`, undefined, bearer(tokens.acme)), 404, "approval_not_found");
    expect((await call("POST", `${gw}/v1/approvals/${mine.approval_id}:approve`, undefined, bearer(tokens.acme))).status).toBe(204);
    expect((await get(`${gw}/v1/approvals?state=pending`, "acme")).body).toEqual([]);
    expect((await get(`${gw}/v1/approvals?state=approved`, "acme")).body).toEqual([expect.objectContaining({ approval_id: mine.approval_id, decision: "approved" })]);
    expect((await get(`${gw}/v1/approvals?state=pending`, "globex")).body).toEqual([theirs]);
  });
});
