import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { SignJWT, decodeProtectedHeader, importJWK, type JWK } from "jose";
import { audienceOf, loadConfig, startFabric, type RunningFabric, type ServiceName } from "@nodefabric/core";
import { generateKeys } from "../core/src/cli/keys-command.js";
import { call, eventually } from "./run-client.js";
import { ECHO, FANOUT, HARDENING_HANDLERS, SEQUENCE, SLEEP, repo, type Json } from "./hardening-support.js";

// Issue 10, trust boundary 5: keys rotate while the fabric runs. A fabric verifies with a JWKS file and signs its
// own service tokens with a signing key file, as `fabric dev --auth` and `fabric start` do. After `fabric keys generate
// --rotate` and the removal of the old public key from the JWKS, tokens signed by the old key are refused within
// seconds (even ones already verified and cached), the services sign with the new key without a restart, and a
// composite run that spans the rotation completes.
const ISSUER = "urn:nodefabric:rotation-test";

describe("key rotation while the fabric runs", () => {
  let fabric: RunningFabric;
  let keysDir: string;
  let gw: string;
  let coord: string;

  const signingKey = () => JSON.parse(readFileSync(path.join(keysDir, "signing-key.json"), "utf8")) as JWK;
  /** A client token signed with the signing key in the folder now. */
  async function mint(service: ServiceName, scope: string): Promise<string> {
    const jwk = signingKey();
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ scope, tenant_id: "acme" })
      .setProtectedHeader({ alg: jwk.alg!, kid: jwk.kid, typ: "at+jwt" })
      .setIssuer(ISSUER)
      .setSubject("rotation-client")
      .setAudience(audienceOf(service))
      .setIssuedAt(now)
      .setExpirationTime(now + 3600)
      .sign(await importJWK(jwk, jwk.alg));
  }
  const auth = (token: string) => ({ authorization: `Bearer ${token}` });

  beforeAll(async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "nf-rotation-"));
    keysDir = path.join(dir, "keys");
    await generateKeys({ outDir: keysDir });
    fabric = await startFabric(
      loadConfig({
        cwd: repo,
        env: {},
        flags: {
          port_base: 0,
          data_dir: path.join(dir, "data"),
          log_level: process.env.NF_LOG ?? "silent",
          handlers: ["@nodefabric/handler-demo", "@nodefabric/handler-examples", HARDENING_HANDLERS],
          auth: { mode: "required", issuer: ISSUER, jwks_file: path.join(keysDir, "jwks.json"), signing_key_file: path.join(keysDir, "signing-key.json") },
        } as never,
      }),
    );
    gw = fabric.urls["run-gateway"]!;
    coord = fabric.urls["run-coordinator"]!;
    const registry = fabric.urls["node-registry"]!;
    const reader = auth(await mint("node-registry", "node-types:read"));
    for (const id of [ECHO.node_type_id, FANOUT.node_type_id, SEQUENCE.node_type_id]) {
      await eventually(async () => {
        const r = await call("GET", `${registry}/v1/executors?node_type_id=${id}`, undefined, reader);
        return r.status === 200 && r.body.length > 0 ? true : undefined;
      }, 20_000, `executor registration of ${id}`);
    }
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  it("refuses tokens of a removed key within seconds, signs with the new key at once, and keeps composites running", async () => {
    const oldKid = signingKey().kid!;
    const oldGateway = await mint("run-gateway", "runs:read runs:write");
    const oldCoordinator = await mint("run-coordinator", "runs:read");
    // Verified (and cached) before the rotation.
    expect((await call("GET", `${gw}/v1/runs?limit=1`, undefined, auth(oldGateway))).status).toBe(200);
    expect((await call("GET", `${coord}/v1/runs?limit=1`, undefined, auth(oldCoordinator))).status).toBe(200);
    // A composite over HTTP before the rotation: the coordinator's token for the composite executor is cached now.
    const before = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: FANOUT, input: { items: ["x"] } }, { ...auth(oldGateway), prefer: "wait=15" });
    expect(before.body.state, JSON.stringify(before.body)).toBe("completed");

    // A composite that spans the rotation: a long child first, then a nested composite (a new :begin) and an atomic.
    const spanning = await call(
      "POST",
      `${gw}/v1/runs`,
      { root_node_type_ref: SEQUENCE, input: { steps: [{ node_type_id: SLEEP.node_type_id, inputs: { ms: 2500 } }, { node_type_id: FANOUT.node_type_id, inputs: { items: ["a", "b"] } }, { node_type_id: ECHO.node_type_id, inputs: { after: "rotation" } }] } },
      auth(oldGateway),
    );
    expect(spanning.status, JSON.stringify(spanning.body)).toBe(200);
    await new Promise((r) => setTimeout(r, 300));

    // `fabric keys generate --rotate`, then the old public key leaves the JWKS at once.
    const rotated = await generateKeys({ outDir: keysDir, rotate: true });
    expect(rotated.kid).not.toBe(oldKid);
    const jwksFile = path.join(keysDir, "jwks.json");
    const jwks = JSON.parse(readFileSync(jwksFile, "utf8")) as { keys: JWK[] };
    expect(jwks.keys.map((k) => k.kid)).toEqual([oldKid, rotated.kid]);
    writeFileSync(jwksFile, JSON.stringify({ keys: jwks.keys.filter((k) => k.kid !== oldKid) }));
    const removedAt = Date.now();

    // The old key's tokens stop working within seconds, though they were verified moments ago.
    await eventually(async () => ((await call("GET", `${gw}/v1/runs?limit=1`, undefined, auth(oldGateway))).status === 401 ? true : undefined), 5_000, "the old key's token refused by the gateway");
    await eventually(async () => ((await call("GET", `${coord}/v1/runs?limit=1`, undefined, auth(oldCoordinator))).status === 401 ? true : undefined), 5_000, "the old key's token refused by the coordinator");
    expect(Date.now() - removedAt).toBeLessThan(5_000);
    const refused = await call("GET", `${gw}/v1/runs?limit=1`, undefined, auth(oldGateway));
    expect(refused.body.error.code).toBe("unauthenticated");
    expect(refused.headers["www-authenticate"]).toContain('error="invalid_token"');

    // The new key's tokens work, and the services' own tokens are signed with it: composites go over HTTP.
    const newGateway = await mint("run-gateway", "runs:read runs:write");
    expect(decodeProtectedHeader(newGateway).kid).toBe(rotated.kid);
    expect((await call("GET", `${gw}/v1/runs?limit=1`, undefined, auth(newGateway))).status).toBe(200);
    const echo = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: ECHO, input: { n: 1 } }, { ...auth(newGateway), prefer: "wait=15" });
    expect(echo.body.state, JSON.stringify(echo.body)).toBe("completed");
    const fanout = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: FANOUT, input: { items: ["a", "b", "c"] } }, { ...auth(newGateway), prefer: "wait=15" });
    expect(fanout.body.state, JSON.stringify(fanout.body.extensions)).toBe("completed");

    // The run that spanned the rotation completes, its nested composite begun after the old key was gone.
    const done: Json = await eventually(async () => {
      const r = await call("GET", `${gw}/v1/runs/${spanning.body.run_id}`, undefined, auth(newGateway));
      return ["completed", "failed", "canceled"].includes(r.body?.state) ? r.body : undefined;
    }, 20_000, "the end of the run that spans the rotation");
    expect(done.state, JSON.stringify(done.extensions)).toBe("completed");
    const nodeRuns = await call("GET", `${gw}/v1/runs/${spanning.body.run_id}/node-runs`, undefined, auth(newGateway));
    expect(nodeRuns.body.every((n: Json) => n.state === "completed")).toBe(true);
    expect(nodeRuns.body.length).toBe(1 + 3 + 2);
  }, 60_000);
});
