import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createLocalJWKSet, decodeJwt, jwtVerify, type JSONWebKeySet } from "jose";
import { freePortBase, runFabric, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually } from "../run-client.js";

// Issue 10 from the command line: `fabric token mint` keeps service-only scopes for an explicit flag, and a running
// `fabric dev --auth` takes a key rotation (`fabric keys generate --rotate`, then the old key out of jwks.json)
// without a restart.
const repo = fileURLToPath(new URL("../..", import.meta.url));
const tmp = (prefix: string) => mkdtempSync(path.join(os.tmpdir(), prefix));
const readJson = (file: string) => JSON.parse(readFileSync(file, "utf8"));

describe("fabric token mint and service-only scopes", () => {
  let keysDir: string;
  let keyFile: string;
  beforeAll(async () => {
    keysDir = path.join(tmp("nf-mint-service-"), "keys");
    expect((await runFabric(["keys", "generate", "--out", keysDir])).code).toBe(0);
    keyFile = path.join(keysDir, "signing-key.json");
  });

  for (const [scope, aud] of [["identity:delegate", "run-coordinator"], ["executors:register", "node-registry"]] as const) {
    it(`refuses ${scope} without --allow-service-scopes (exit 2, nothing on stdout), and mints it with the flag`, async () => {
      const refused = await runFabric(["token", "mint", "--aud", aud, "--scope", `runs:read ${scope}`, "--key", keyFile]);
      expect(refused.code).toBe(2);
      expect(refused.stdout).toBe("");
      expect(refused.stderr).toContain(scope);
      expect(refused.stderr).toContain("--allow-service-scopes");

      const allowed = await runFabric(["token", "mint", "--aud", aud, "--scope", `runs:read ${scope}`, "--allow-service-scopes", "--key", keyFile]);
      expect(allowed.stderr).toBe("");
      expect(allowed.code).toBe(0);
      const jwks = createLocalJWKSet(readJson(path.join(keysDir, "jwks.json")) as JSONWebKeySet);
      const { payload } = await jwtVerify(allowed.stdout.trim(), jwks, { audience: `nodefabric-${aud}` });
      expect(String(payload.scope).split(" ")).toContain(scope);
    });
  }

  it("mints ordinary scopes as before, without the flag", async () => {
    const r = await runFabric(["token", "mint", "--aud", "node-registry", "--scope", "node-types:read node-types:write", "--key", keyFile]);
    expect(r.code).toBe(0);
    expect(decodeJwt(r.stdout.trim()).scope).toBe("node-types:read node-types:write");
  });
});

describe("fabric dev --auth across a key rotation", () => {
  let fabric: FabricProcess;
  let dataDir: string;
  let keysDir: string;
  const url = (name: string) => fabric.urls[name];
  const mint = async (args: string[]) => {
    const r = await runFabric(["token", "mint", ...args, "--key", path.join(keysDir, "signing-key.json")], { cwd: repo });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    return { authorization: `Bearer ${r.stdout.trim()}` };
  };

  beforeAll(async () => {
    dataDir = tmp("nf-dev-rotate-");
    keysDir = path.join(dataDir, "keys");
    fabric = await startFabricProcess(["dev", "--auth", "--port-base", String(await freePortBase()), "--data-dir", dataDir], { cwd: repo });
    const reader = await mint(["--aud", "node-registry", "--scope", "node-types:read"]);
    await eventually(async () => {
      const r = await call("GET", `${url("node-registry")}/v1/executors?node_type_id=examples.fanout`, undefined, reader);
      return r.status === 200 && r.body.length > 0 ? true : undefined;
    }, 15_000, "executors registered");
  }, 60_000);
  afterAll(async () => {
    await fabric?.stop();
  });

  it("refuses the removed key's tokens within seconds and runs composites with the new key, without a restart", async () => {
    const old = await mint(["--aud", "run-gateway", "--scope", "runs:read runs:write"]);
    const fanout = { root_node_type_ref: { node_type_id: "examples.fanout", version: "1.0.0" }, input: { items: ["a", "b"] } };
    const before = await call("POST", `${url("run-gateway")}/v1/runs`, fanout, { ...old, prefer: "wait=15" });
    expect(before.body.state, JSON.stringify(before.body)).toBe("completed");

    const oldKid = readJson(path.join(keysDir, "signing-key.json")).kid;
    const rotated = await runFabric(["keys", "generate", "--rotate", "--out", keysDir], { cwd: repo });
    expect(rotated.code).toBe(0);
    const jwksFile = path.join(keysDir, "jwks.json");
    const jwks = readJson(jwksFile);
    expect(jwks.keys).toHaveLength(2);
    writeFileSync(jwksFile, JSON.stringify({ keys: jwks.keys.filter((k: { kid: string }) => k.kid !== oldKid) }));

    await eventually(async () => ((await call("GET", `${url("run-gateway")}/v1/runs?limit=1`, undefined, old)).status === 401 ? true : undefined), 5_000, "the old key refused");
    const fresh = await mint(["--aud", "run-gateway", "--scope", "runs:read runs:write"]);
    const after = await call("POST", `${url("run-gateway")}/v1/runs`, fanout, { ...fresh, prefer: "wait=15" });
    expect(after.status).toBe(200);
    expect(after.body.state, JSON.stringify(after.body.extensions)).toBe("completed");
  }, 60_000);
});
