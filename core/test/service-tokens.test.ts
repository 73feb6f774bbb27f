import { describe, it, expect, beforeAll, afterAll, afterEach } from "vitest";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { ClientCredentialsServiceTokens, FabricError, SignedServiceTokens, TokenVerifier, setClock } from "@nodefabric/core";
import { startTestIssuer, type TestIssuer } from "./support/test-issuer.js";

/** A clock the test moves by hand. */
function manualClock(start = Date.now()) {
  let now = start;
  setClock({ now: () => now, isoNow: () => new Date(now).toISOString() });
  return { advance: (ms: number) => (now += ms) };
}

const settle = () => new Promise((r) => setTimeout(r, 50));

describe("outbound service tokens", () => {
  let idp: TestIssuer;
  beforeAll(async () => {
    idp = await startTestIssuer();
    idp.clients.set("fabric-coordinator", "s3cret");
  });
  afterAll(async () => {
    await idp?.close();
  });
  afterEach(() => setClock());

  it("mints a token per target with only the scopes the caller needs there, verifiable by the target", async () => {
    const tokens = new SignedServiceTokens({ jwk: idp.keys[0]!.privateJwk, issuer: idp.issuer, service: "run-gateway", ttlSeconds: 120 });
    const t = await tokens.token("run-coordinator");
    expect(decodeProtectedHeader(t)).toMatchObject({ alg: "ES256", kid: idp.keys[0]!.kid, typ: "at+jwt" });
    const claims = decodeJwt(t);
    expect(claims).toMatchObject({ iss: idp.issuer, sub: "nodefabric-run-gateway", aud: "nodefabric-run-coordinator", scope: "approvals:write identity:delegate runs:read runs:write" });
    expect(claims.exp! - claims.iat!).toBe(120);
    const verified = await new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer }).verify(t, "nodefabric-run-coordinator");
    expect([...verified.scopes].sort()).toEqual(["approvals:write", "identity:delegate", "runs:read", "runs:write"]);
    // Only the gateway may pass a caller on; the coordinator's own token for the PDP says what the PDP needs.
    const coordinator = new SignedServiceTokens({ jwk: idp.keys[0]!.privateJwk, issuer: idp.issuer, service: "run-coordinator" });
    expect(decodeJwt(await coordinator.token("pdp")).scope).toBe("policy:decide");
    expect(decodeJwt(await coordinator.token("atomic-executor")).scope).toBe("executions:write");
  });

  it("reuses a minted token until shortly before it expires", async () => {
    const clock = manualClock();
    const tokens = new SignedServiceTokens({ jwk: idp.keys[0]!.privateJwk, issuer: idp.issuer, service: "selection", ttlSeconds: 300 });
    const first = await tokens.token("node-registry");
    clock.advance(200_000);
    expect(await tokens.token("node-registry")).toBe(first);
    clock.advance(50_000); // 250 s of 300: inside the renewal window, still answered at once with the current token
    expect(await tokens.token("node-registry")).toBe(first);
    await settle();
    const renewed = await tokens.token("node-registry");
    expect(renewed).not.toBe(first);
  });

  it("fetches client-credentials tokens once for many concurrent calls, and renews them in the background", async () => {
    const clock = manualClock();
    idp.tokenLifetime = 300;
    const before = idp.hits.get("/token") ?? 0;
    const tokens = new ClientCredentialsServiceTokens({ tokenUrl: idp.tokenUrl, clientId: "fabric-coordinator", clientSecret: "s3cret", service: "run-coordinator" });
    const many = await Promise.all(Array.from({ length: 100 }, () => tokens.token("pdp")));
    expect(new Set(many).size).toBe(1);
    expect((idp.hits.get("/token") ?? 0) - before).toBe(1);
    const claims = decodeJwt(many[0]!);
    expect(claims).toMatchObject({ aud: "nodefabric-pdp", scope: "policy:decide", sub: "fabric-coordinator" });

    for (let i = 0; i < 50; i++) await tokens.token("pdp");
    expect((idp.hits.get("/token") ?? 0) - before).toBe(1); // never fetched per request

    clock.advance(250_000); // inside the last fifth of its life: the cached token is returned, a new one fetched behind it
    expect(await tokens.token("pdp")).toBe(many[0]);
    // The renewal is a real HTTP exchange in the background: on a loaded machine it can take more than one settle.
    let renewed = many[0];
    for (const until = Date.now() + 5_000; renewed === many[0] && Date.now() < until; ) {
      await settle();
      renewed = await tokens.token("pdp");
    }
    expect(renewed).not.toBe(many[0]);
    expect((idp.hits.get("/token") ?? 0) - before).toBe(2);

    await tokens.token("selection"); // another audience, another token
    expect((idp.hits.get("/token") ?? 0) - before).toBe(3);
  });

  it("says why the token endpoint refused", async () => {
    const tokens = new ClientCredentialsServiceTokens({ tokenUrl: idp.tokenUrl, clientId: "fabric-coordinator", clientSecret: "wrong", service: "run-coordinator" });
    const err = await tokens.token("pdp").catch((e: unknown) => e);
    expect(FabricError.is(err)).toBe(true);
    expect((err as FabricError).message).toMatch(/refused a token for nodefabric-pdp \(invalid_client\)/);
    const unreachable = new ClientCredentialsServiceTokens({ tokenUrl: "http://127.0.0.1:9/token", clientId: "a", clientSecret: "b", service: "selection" });
    const err2 = await unreachable.token("node-registry").catch((e: unknown) => e);
    expect((err2 as FabricError).code).toBe("upstream_unavailable");
  });
});
