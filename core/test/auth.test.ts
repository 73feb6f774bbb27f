import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createHmac } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { buildPdp, TokenVerifier, type AuthMode } from "@nodefabric/core";
import { checkedCall } from "./support/checked-call.js";
import { makeKey, startTestIssuer, type TestIssuer } from "./support/test-issuer.js";

const AUD = "nodefabric-pdp";
const DECIDE = { action: "node.run.execute", node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" } };

/** A PDP with authentication, listening on loopback. */
async function securedPdp(verifier: TokenVerifier | undefined, mode: AuthMode = "required"): Promise<{ app: FastifyInstance; url: string }> {
  const app = await buildPdp({ logger: false, auth: { mode, verifier } });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = app.server.address() as { port: number };
  return { app, url: `http://127.0.0.1:${port}` };
}

const b64url = (v: unknown) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");

function challenge(res: { headers: Record<string, unknown> }): string {
  return String(res.headers["www-authenticate"] ?? "");
}

describe("inbound authentication: every way a token is refused (401)", () => {
  let idp: TestIssuer;
  let pdp: { app: FastifyInstance; url: string };
  const decide = (token?: string, headers: Record<string, string> = {}) =>
    checkedCall(pdp.url, "POST", "/v1/policy:decide", DECIDE, token === undefined ? headers : { authorization: `Bearer ${token}`, ...headers });

  beforeAll(async () => {
    idp = await startTestIssuer();
    pdp = await securedPdp(new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer, clockToleranceSeconds: 60 }));
  });
  afterAll(async () => {
    await pdp?.app.close();
    await idp?.close();
  });

  it("accepts a valid token with the scope, and never asks one of health and version", async () => {
    const ok = await decide(await idp.mint({ aud: AUD, scope: "policy:decide" }));
    expect(ok.status).toBe(200);
    expect(ok.body.decision).toBe("allow");
    const health = await checkedCall(pdp.url, "GET", "/v1/health");
    expect(health.status).toBe(200);
    expect(health.body.extensions["nodefabric.auth"]).toEqual({ mode: "required", audience: "nodefabric-pdp", keys: idp.jwksUrl });
    expect((await checkedCall(pdp.url, "GET", "/v1/version")).status).toBe(200);
  });

  const refusals: Array<[string, () => Promise<Record<string, string>>, RegExp]> = [
    ["no token at all", async () => ({}), /no bearer token/],
    ["a Basic header", async () => ({ authorization: "Basic YWxpY2U6c2VjcmV0" }), /not a Bearer token/],
    ["a token that is not a JWT", async () => ({ authorization: "Bearer not-a-jwt" }), /malformed/],
    ["alg: none", async () => ({ authorization: `Bearer ${b64url({ alg: "none", typ: "JWT" })}.${b64url({ iss: idp.issuer, aud: AUD, scope: "policy:decide", exp: Math.floor(Date.now() / 1000) + 300 })}.` }), /algorithm|malformed/],
    [
      "HS256 signed with the public key as its secret (algorithm confusion)",
      async () => {
        const head = b64url({ alg: "HS256", typ: "JWT", kid: idp.keys[0]!.kid });
        const body = b64url({ iss: idp.issuer, aud: AUD, scope: "policy:decide", sub: "mallory", exp: Math.floor(Date.now() / 1000) + 300 });
        const sig = createHmac("sha256", idp.keys[0]!.publicPem).update(`${head}.${body}`).digest("base64url");
        return { authorization: `Bearer ${head}.${body}.${sig}` };
      },
      /algorithm this service does not accept/,
    ],
    ["an unknown kid", async () => ({ authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide", key: await makeKey("ES256") })}` }), /no key in the JWKS/],
    ["a forged signature under a known kid", async () => ({ authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide", key: await makeKey("ES256"), kid: idp.keys[0]!.kid })}` }), /signature does not verify/],
    ["an expired token (beyond the 60 s tolerance)", async () => ({ authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide", expiresIn: -120 })}` }), /expired/],
    ["a token that is not valid yet", async () => ({ authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide", notBefore: 600 })}` }), /not valid yet/],
    ["a token without exp", async () => ({ authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide", noExp: true })}` }), /no expiry|exp/],
    ["a wrong issuer", async () => ({ authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide", iss: "https://evil.example/" })}` }), /not issued by/],
    ["a wrong audience", async () => ({ authorization: `Bearer ${await idp.mint({ aud: "somebody-else", scope: "policy:decide" })}` }), /not meant for this service/],
    ["a token for another service, replayed", async () => ({ authorization: `Bearer ${await idp.mint({ aud: "nodefabric-run-gateway", scope: "policy:decide runs:write" })}` }), /audience is not nodefabric-pdp/],
    ["no audience at all", async () => ({ authorization: `Bearer ${await idp.mint({ scope: "policy:decide" })}` }), /not meant for this service/],
  ];

  for (const [name, headers, why] of refusals) {
    it(`refuses ${name}`, async () => {
      const res = await checkedCall(pdp.url, "POST", "/v1/policy:decide", DECIDE, await headers());
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe("unauthenticated");
      expect(res.body.error.message).toMatch(why);
      expect(challenge(res)).toMatch(/^Bearer realm="nodefabric-pdp", error="invalid_token", error_description="[^"]+"$/);
    });
  }

  it("takes a token expired less than the clock tolerance ago", async () => {
    expect((await decide(await idp.mint({ aud: AUD, scope: "policy:decide", expiresIn: -30 }))).status).toBe(200);
  });

  it("answers 403 permission_denied with the required scope when the token lacks it", async () => {
    const res = await decide(await idp.mint({ aud: AUD, scope: "runs:read runs:write" }));
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: "permission_denied", details: { required_scope: "policy:decide" } });
    expect(challenge(res)).toBe('Bearer realm="nodefabric-pdp", error="insufficient_scope", scope="policy:decide"');
  });

  it("reads scopes from `scp` arrays as well as the `scope` string", async () => {
    expect((await decide(await idp.mint({ aud: AUD, extra: { scp: ["policy:decide"] } }))).status).toBe(200);
  });

  it("answers 503 (not 401) when the JWKS cannot be fetched, and recovers when it can", async () => {
    const verifier = new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer, cooldownMs: 0, cacheMaxAgeMs: 0 });
    const other = await securedPdp(verifier);
    try {
      idp.failJwks(true);
      const token = await idp.mint({ aud: AUD, scope: "policy:decide" });
      const down = await checkedCall(other.url, "POST", "/v1/policy:decide", DECIDE, { authorization: `Bearer ${token}` });
      expect(down.status).toBe(503);
      expect(down.body.error.code).toBe("unavailable");
      expect(down.headers["retry-after"]).toBe("5");
      idp.failJwks(false);
      const up = await checkedCall(other.url, "POST", "/v1/policy:decide", DECIDE, { authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide" })}` });
      expect(up.status).toBe(200);
    } finally {
      idp.failJwks(false);
      await other.app.close();
    }
  });

  it("answers 503 when the JWKS host refuses connections", async () => {
    const other = await securedPdp(new TokenVerifier({ keys: { jwksUrl: "http://127.0.0.1:9/jwks.json" }, issuer: idp.issuer }));
    try {
      const res = await checkedCall(other.url, "POST", "/v1/policy:decide", DECIDE, { authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide" })}` });
      expect(res.status).toBe(503);
    } finally {
      await other.app.close();
    }
  });

  it("checks typ when configured", async () => {
    const other = await securedPdp(new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer, typ: "at+jwt" }));
    try {
      const plain = await checkedCall(other.url, "POST", "/v1/policy:decide", DECIDE, { authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide", typ: "JWT" })}` });
      expect(plain.status).toBe(401);
      expect(plain.body.error.message).toMatch(/typ/);
      const at = await checkedCall(other.url, "POST", "/v1/policy:decide", DECIDE, { authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide", typ: "at+jwt" })}` });
      expect(at.status).toBe(200);
    } finally {
      await other.app.close();
    }
  });

  it("refuses to be configured with none or an HMAC algorithm", () => {
    expect(() => new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer, algorithms: ["HS256"] })).toThrow(/HS256 cannot be verified/);
    expect(() => new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer, algorithms: ["none"] })).toThrow(/none cannot be verified/);
  });
});

describe("where keys come from", () => {
  let idp: TestIssuer;
  beforeAll(async () => {
    idp = await startTestIssuer();
  });
  afterAll(async () => {
    await idp?.close();
  });

  it("finds the issuer and the JWKS by OIDC discovery, fetching the document once", async () => {
    const pdp = await securedPdp(new TokenVerifier({ keys: { oidcDiscoveryUrl: idp.url } }));
    try {
      for (let i = 0; i < 3; i++) {
        const res = await checkedCall(pdp.url, "POST", "/v1/policy:decide", DECIDE, { authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide" })}` });
        expect(res.status).toBe(200);
      }
      expect(idp.hits.get("/.well-known/openid-configuration")).toBe(1);
      const wrongIss = await checkedCall(pdp.url, "POST", "/v1/policy:decide", DECIDE, { authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide", iss: "https://other/" })}` });
      expect(wrongIss.status).toBe(401);
    } finally {
      await pdp.app.close();
    }
  });

  it("reads a local JWKS file and picks up a key added to it without a restart", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "nf-jwks-"));
    const file = path.join(dir, "jwks.json");
    idp.writeJwks(file, [idp.keys[0]!]);
    const pdp = await securedPdp(new TokenVerifier({ keys: { jwksFile: file }, issuer: idp.issuer }));
    try {
      const next = await makeKey("RS256");
      const tokenNext = await idp.mint({ aud: AUD, scope: "policy:decide", key: next });
      expect((await checkedCall(pdp.url, "POST", "/v1/policy:decide", DECIDE, { authorization: `Bearer ${tokenNext}` })).status).toBe(401);
      await new Promise((r) => setTimeout(r, 20)); // a distinct mtime
      writeFileSync(file, JSON.stringify({ keys: [idp.keys[0]!.publicJwk, next.publicJwk] }));
      expect((await checkedCall(pdp.url, "POST", "/v1/policy:decide", DECIDE, { authorization: `Bearer ${tokenNext}` })).status).toBe(200);
    } finally {
      await pdp.app.close();
    }
  });

  it("rotates keys through the JWKS URL: a new kid works at once, the old one until it is removed", async () => {
    const verifier = new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer, cooldownMs: 0, cacheMaxAgeMs: 300 });
    const pdp = await securedPdp(verifier);
    const old = idp.keys[0]!;
    const fresh = await makeKey("EdDSA");
    const decideWith = async (key = old) =>
      (await checkedCall(pdp.url, "POST", "/v1/policy:decide", DECIDE, { authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide", key })}` })).status;
    try {
      idp.publish([old]);
      expect(await decideWith(old)).toBe(200);
      expect(await decideWith(fresh)).toBe(401);
      idp.publish([old, fresh]);
      expect(await decideWith(fresh)).toBe(200); // picked up without a restart
      expect(await decideWith(old)).toBe(200); // the old key keeps working while it is published
      idp.publish([fresh]);
      await new Promise((r) => setTimeout(r, 400)); // past the key cache's max age
      expect(await decideWith(old)).toBe(401);
      expect(await decideWith(fresh)).toBe(200);
    } finally {
      idp.publish([old]);
      await pdp.app.close();
    }
  });
});

describe("optional and disabled modes", () => {
  let idp: TestIssuer;
  beforeAll(async () => {
    idp = await startTestIssuer();
  });
  afterAll(async () => {
    await idp?.close();
  });

  it("optional: no token is anonymous, but a bad token is still refused", async () => {
    const pdp = await securedPdp(new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer }), "optional");
    try {
      expect((await checkedCall(pdp.url, "POST", "/v1/policy:decide", DECIDE)).status).toBe(200);
      expect((await checkedCall(pdp.url, "POST", "/v1/policy:decide", DECIDE, { authorization: "Bearer junk" })).status).toBe(401);
      const wrongScope = await checkedCall(pdp.url, "POST", "/v1/policy:decide", DECIDE, { authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "runs:read" })}` });
      expect(wrongScope.status).toBe(403);
    } finally {
      await pdp.app.close();
    }
  });

  it("disabled: no token is asked for", async () => {
    const pdp = await securedPdp(undefined, "disabled");
    try {
      expect((await checkedCall(pdp.url, "POST", "/v1/policy:decide", DECIDE)).status).toBe(200);
    } finally {
      await pdp.app.close();
    }
  });

  it("a secured service refuses a route the scope table does not cover, instead of leaving it open", async () => {
    const { createService } = await import("@nodefabric/core");
    const app = createService({ name: "pdp", auth: { mode: "required", verifier: new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer }) } });
    expect(() => app.post("/v1/backdoor", async () => ({}))).toThrow(/route POST \/v1\/backdoor has no entry in ROUTE_ACCESS/);
    await app.close();
  });

  it("fabricAuth registered as a plugin on an instance of one's own guards routes added after it, and refuses uncovered ones", async () => {
    const { fabricAuth } = await import("@nodefabric/core");
    const Fastify = (await import("fastify")).default;
    const verifier = new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer });
    // Awaited, the plugin is loaded before the routes: an uncovered route stops the start.
    const strict = Fastify();
    await strict.register(fabricAuth, { service: "pdp", mode: "required", verifier });
    expect(() => strict.get("/v1/extra", async () => ({}))).toThrow(/GET \/v1\/extra has no entry in ROUTE_ACCESS/);
    await strict.close();
    // Not awaited (the usual style), it loads after the routes: each is looked up at its first request.
    const app = Fastify();
    void app.register(fabricAuth, { service: "pdp", mode: "required", verifier });
    app.post("/v1/policy::decide", async () => ({ decision: "allow" }));
    app.get("/v1/extra", async () => ({ open: true }));
    await app.ready();
    try {
      expect((await app.inject({ method: "POST", url: "/v1/policy:decide", payload: {} })).statusCode).toBe(401);
      const token = await idp.mint({ aud: AUD, scope: "policy:decide" });
      expect((await app.inject({ method: "POST", url: "/v1/policy:decide", payload: {}, headers: { authorization: `Bearer ${token}` } })).statusCode).toBe(200);
      const uncovered = await app.inject({ method: "GET", url: "/v1/extra", headers: { authorization: `Bearer ${token}` } });
      expect(uncovered.statusCode).toBe(403);
      // A plain fastify instance has fastify's own error body; createService's services answer an ErrorEnvelope.
      expect(uncovered.json()).toMatchObject({ code: "permission_denied", message: expect.stringMatching(/no scope in this service's table/) });
    } finally {
      await app.close();
    }
  });

  it("required without a verifier does not start", async () => {
    await expect(securedPdp(undefined, "required")).rejects.toThrow(/no token verifier/);
  });
});

describe("the scope table in the docs", () => {
  it("is the table in the code, row for row", async () => {
    const { readFileSync } = await import("node:fs");
    const { ROUTE_ACCESS } = await import("@nodefabric/core");
    const doc = readFileSync(new URL("../../docs/auth.md", import.meta.url), "utf8");
    const table = doc.slice(doc.indexOf("<!-- scope-table:start -->"), doc.indexOf("<!-- scope-table:end -->"));
    const rows = [...table.matchAll(/^\| ([a-z-]+) \| `(GET|POST|PUT) ([^`]+)` \| `([^`]+)` \| (yes)? ?\|$/gm)].map((m) => `${m[1]} ${m[2]} ${m[3]} ${m[4]}${m[5] ? " assignment" : ""}`);
    const code = Object.entries(ROUTE_ACCESS).flatMap(([svc, routes]) => routes.map((r) => `${svc} ${r.method} ${r.path} ${r.scope}${r.assignment ? " assignment" : ""}`));
    expect(rows).toEqual(code);
  });
});
