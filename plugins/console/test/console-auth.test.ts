/**
 * The console with auth on, with real JWTs from a test identity provider: the page and its configuration are public
 * (they hold no data), the API the page calls is not; config.json says a token is needed and names the OIDC client;
 * the CSP lets the page reach the identity provider; the registry's CORS answers still reach the page, errors too.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { RunningFabric } from "../../../core/src/fabric.js";
import { call, expectEnvelope } from "../../../core/test/support/gateway-http.js";
import { startTestIssuer, type TestIssuer } from "../../../core/test/support/test-issuer.js";
import { expectedCsp, startConsoleFabric } from "./support/console-fabric.js";

describe("the console with auth required", () => {
  let idp: TestIssuer;
  let fabric: RunningFabric;
  let gw: string;
  let registry: string;

  beforeAll(async () => {
    idp = await startTestIssuer();
    const keyDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-console-keys-"));
    const keyFile = path.join(keyDir, "signing-key.json");
    fs.writeFileSync(keyFile, JSON.stringify(idp.keys[0]!.privateJwk));
    fabric = await startConsoleFabric({
      mode: "required",
      issuer: idp.issuer,
      jwks_url: idp.jwksUrl,
      signing_key_file: keyFile,
      oidc: { issuer: idp.issuer, client_id: "nodefabric-console" },
    });
    gw = fabric.urls["run-gateway"]!;
    registry = fabric.urls["node-registry"]!;
  });
  afterAll(async () => {
    await fabric?.close();
    await idp?.close();
  });

  it("serves the page and its configuration without a token", async () => {
    const page = await call("GET", `${gw}/console/`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<div id="app"></div>');
    expect(page.headers["content-security-policy"]).toBe(expectedCsp(new URL(registry).origin, new URL(idp.issuer).origin));
    const js = /src="(\/console\/assets\/[^"]+\.js)"/.exec(page.text)![1];
    expect((await call("GET", `${gw}${js}`)).status).toBe(200);

    const config = await call("GET", `${gw}/console/config.json`);
    expect(config.status).toBe(200);
    expect(config.body).toEqual({
      registry_url: registry,
      auth: { required: true, mode: "required", oidc: { issuer: idp.issuer, client_id: "nodefabric-console", scope: "openid" } },
      trace_url: null,
      redact: [],
    });
  });

  it("still asks for a token on the API the page calls", async () => {
    const anonymous = await call("GET", `${gw}/v1/runs`);
    expectEnvelope(anonymous, 401, "unauthenticated");
    expect(anonymous.headers["www-authenticate"]).toMatch(/^Bearer/);
    const token = await idp.mint({ aud: "nodefabric-run-gateway", scope: "runs:read", sub: "console-user", expiresIn: 600 });
    const listed = await call("GET", `${gw}/v1/runs?limit=5`, undefined, { authorization: `Bearer ${token}` });
    expect(listed.status).toBe(200);
    expect(Array.isArray(listed.body)).toBe(true);
  });

  it("answers the registry's preflight without a token, and lets the page read a 401 envelope", async () => {
    const origin = new URL(gw).origin;
    const pre = await call("OPTIONS", `${registry}/v1/node-types`, undefined, { origin, "access-control-request-method": "GET", "access-control-request-headers": "authorization" });
    expect(pre.status).toBe(204);
    expect(pre.headers["access-control-allow-origin"]).toBe(origin);

    const anonymous = await call("GET", `${registry}/v1/node-types`, undefined, { origin });
    expectEnvelope(anonymous, 401, "unauthenticated");
    expect(anonymous.headers["access-control-allow-origin"]).toBe(origin);

    const token = await idp.mint({ aud: "nodefabric-node-registry", scope: "node-types:read", sub: "console-user", expiresIn: 600 });
    const listed = await call("GET", `${registry}/v1/node-types`, undefined, { origin, authorization: `Bearer ${token}` });
    expect(listed.status).toBe(200);
    expect(listed.headers["access-control-allow-origin"]).toBe(origin);
  });
});
