import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { ClientCredentialsServiceTokens, SignedServiceTokens, TokenVerifier } from "@nodefabric/core";
import { SigningKeyFile } from "../src/clients/service-tokens.js";
import { makeKey, startTestIssuer, type TestIssuer } from "./support/test-issuer.js";

// The parts of key rotation and executor binding below the services: a JWKS file verifier whose cached verifications
// end with a key's removal, a signing key file read again when it changes, and tokens bound to one executor.
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a JWKS file verifier across a key's removal", () => {
  let idp: TestIssuer;
  beforeAll(async () => {
    idp = await startTestIssuer();
  });
  afterAll(async () => {
    await idp?.close();
  });

  it("refuses a token it verified and cached once its key leaves the file, within the check interval", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "nf-verifier-file-"));
    const file = path.join(dir, "jwks.json");
    const second = await makeKey("ES256");
    idp.writeJwks(file, [idp.keys[0]!, second]);
    const verifier = new TokenVerifier({ keys: { jwksFile: file }, issuer: idp.issuer, fileCheckIntervalMs: 100 });
    const old = await idp.mint({ aud: "nodefabric-pdp", scope: "policy:decide" });
    const fresh = await idp.mint({ aud: "nodefabric-pdp", scope: "policy:decide", key: second });
    expect((await verifier.verify(old, "nodefabric-pdp")).sub).toBe("alice");
    expect((await verifier.verify(fresh, "nodefabric-pdp")).sub).toBe("alice");

    idp.writeJwks(file, [second]);
    await sleep(150);
    await expect(verifier.verify(old, "nodefabric-pdp")).rejects.toMatchObject({ code: "unauthenticated", message: expect.stringMatching(/kid/) });
    expect((await verifier.verify(fresh, "nodefabric-pdp")).sub).toBe("alice");
  });

  it("refuses claims of the wrong type, naming them", async () => {
    const verifier = new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer });
    for (const [claim, value] of [["tenant_id", 7], ["tenant_id", ""], ["tenant_id", null], ["executor_endpoint", 5]] as const) {
      const t = await idp.mint({ aud: "nodefabric-pdp", scope: "policy:decide", extra: { [claim]: value } });
      await expect(verifier.verify(t, "nodefabric-pdp"), `${claim}=${JSON.stringify(value)}`).rejects.toMatchObject({ code: "unauthenticated", message: expect.stringContaining(claim) });
    }
  });
});

describe("outbound tokens", () => {
  let idp: TestIssuer;
  beforeAll(async () => {
    idp = await startTestIssuer();
    idp.clients.set("coordinator", "s3cret");
  });
  afterAll(async () => {
    await idp?.close();
  });

  it("binds a token for an executor to that executor, one token per executor", async () => {
    const tokens = new SignedServiceTokens({ jwk: idp.keys[0]!.privateJwk, issuer: idp.issuer, service: "run-coordinator" });
    const a = await tokens.token("atomic-executor", "http://127.0.0.1:8082/");
    const b = await tokens.token("atomic-executor", "http://127.0.0.1:9999");
    expect(decodeJwt(a)).toMatchObject({ aud: "nodefabric-atomic-executor", executor_endpoint: "http://127.0.0.1:8082", scope: "executions:write" });
    expect(decodeJwt(b).executor_endpoint).toBe("http://127.0.0.1:9999");
    expect(await tokens.token("atomic-executor", "HTTP://127.0.0.1:8082")).toBe(a);
    expect(decodeJwt(await tokens.token("node-registry"))).not.toHaveProperty("executor_endpoint");
    // Only executors register themselves or publish.
    expect(decodeJwt(await tokens.token("node-registry")).scope).toBe("node-types:read");
    const executor = new SignedServiceTokens({ jwk: idp.keys[0]!.privateJwk, issuer: idp.issuer, service: "atomic-executor" });
    expect(decodeJwt(await executor.token("node-registry")).scope).toBe("executors:register node-types:read node-types:write");
  });

  it("leaves client-credentials tokens to the identity provider: one per kind, unbound", async () => {
    const tokens = new ClientCredentialsServiceTokens({ tokenUrl: idp.tokenUrl, clientId: "coordinator", clientSecret: "s3cret", service: "run-coordinator" });
    const a = await tokens.token("atomic-executor", "http://127.0.0.1:8082");
    expect(await tokens.token("atomic-executor", "http://127.0.0.1:9999")).toBe(a);
  });

  it("signs with the key in the signing key file now, and drops tokens of the key it replaced", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "nf-signing-file-"));
    const file = path.join(dir, "signing-key.json");
    writeFileSync(file, JSON.stringify(idp.keys[0]!.privateJwk));
    const keyFile = new SigningKeyFile(file);
    const tokens = new SignedServiceTokens({ keyFile, issuer: idp.issuer, service: "run-coordinator" });
    const before = await tokens.token("pdp");
    expect(decodeProtectedHeader(before).kid).toBe(idp.keys[0]!.kid);
    expect(await tokens.token("pdp")).toBe(before);

    const next = await makeKey("RS256");
    writeFileSync(file, JSON.stringify(next.privateJwk));
    const after = await tokens.token("pdp");
    expect(after).not.toBe(before);
    expect(decodeProtectedHeader(after)).toMatchObject({ kid: next.kid, alg: "RS256" });

    // A file being rewritten by hand (not a key for a moment) leaves the last good key in use.
    writeFileSync(file, "{");
    expect(decodeProtectedHeader(await tokens.token("selection")).kid).toBe(next.kid);
  });
});
