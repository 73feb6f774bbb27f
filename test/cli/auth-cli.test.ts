import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from "jose";
import { freePortBase, runFabric, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually } from "../run-client.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const DEV_ISSUER = "urn:nodefabric:dev";
/** A client command run without any token, whatever the environment of the test run holds. */
const NO_TOKEN = { FABRIC_TOKEN: "" };

const tmp = (prefix: string) => mkdtempSync(path.join(os.tmpdir(), prefix));
const readJson = (file: string) => JSON.parse(readFileSync(file, "utf8"));

/** Whether something accepts connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

async function mint(args: string[], cwd = repo): Promise<string> {
  const r = await runFabric(["token", "mint", ...args], { cwd });
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  return r.stdout.trim();
}

describe("fabric keys generate", () => {
  it("writes a private key (0600) and a JWKS of public keys, refuses to overwrite them, and rotates on request", async () => {
    const out = path.join(tmp("nf-keys-"), "keys");
    const first = await runFabric(["keys", "generate", "--out", out]);
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    const signingKey = readJson(path.join(out, "signing-key.json"));
    const jwks = readJson(path.join(out, "jwks.json"));
    expect(statSync(path.join(out, "signing-key.json")).mode & 0o777).toBe(0o600);
    expect(signingKey).toMatchObject({ kty: "EC", crv: "P-256", alg: "ES256", use: "sig" });
    expect(typeof signingKey.d).toBe("string");
    expect(jwks.keys).toHaveLength(1);
    expect(jwks.keys[0]).toMatchObject({ kid: signingKey.kid, alg: "ES256", use: "sig" });
    expect(jwks.keys[0]).not.toHaveProperty("d");
    expect(first.stdout).toContain(`kid: ${signingKey.kid}`);
    expect(first.stdout).toContain("signing-key.json");
    expect(first.stdout).toContain("jwks.json");

    const again = await runFabric(["keys", "generate", "--out", out]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain("already exists");
    expect(again.stderr).toContain("--rotate");
    expect(readJson(path.join(out, "signing-key.json")).kid).toBe(signingKey.kid);

    const rotated = await runFabric(["keys", "generate", "--out", out, "--rotate", "--alg", "RS256"]);
    expect(rotated.stderr).toBe("");
    expect(rotated.code).toBe(0);
    const newKey = readJson(path.join(out, "signing-key.json"));
    const both = readJson(path.join(out, "jwks.json"));
    expect(newKey).toMatchObject({ kty: "RSA", alg: "RS256" });
    expect(newKey.kid).not.toBe(signingKey.kid);
    expect(both.keys.map((k: { kid: string }) => k.kid)).toEqual([signingKey.kid, newKey.kid]);
    expect(both.keys.some((k: Record<string, unknown>) => "d" in k || "p" in k)).toBe(false);
    expect(statSync(path.join(out, "signing-key.json")).mode & 0o777).toBe(0o600);
    expect(rotated.stdout).toContain(`kid: ${newKey.kid}`);
  });

  it("writes to <data_dir>/keys by default, even while the configuration still lacks them, and refuses an unknown --alg", async () => {
    const dir = tmp("nf-keys-default-");
    writeFileSync(path.join(dir, "fabric.config.json"), JSON.stringify({ data_dir: "state", auth: { mode: "required" } }));
    const r = await runFabric(["keys", "generate", "--alg", "EdDSA"], { cwd: dir });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(readJson(path.join(dir, "state", "keys", "signing-key.json"))).toMatchObject({ kty: "OKP", alg: "EdDSA" });
    const bad = await runFabric(["keys", "generate", "--alg", "HS256", "--out", path.join(dir, "other")]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("HS256");
  });
});

describe("fabric token mint", () => {
  let keysDir: string;
  let keyFile: string;
  let jwks: ReturnType<typeof createLocalJWKSet>;

  beforeAll(async () => {
    keysDir = path.join(tmp("nf-mint-"), "keys");
    expect((await runFabric(["keys", "generate", "--out", keysDir])).code).toBe(0);
    keyFile = path.join(keysDir, "signing-key.json");
    jwks = createLocalJWKSet(readJson(path.join(keysDir, "jwks.json")) as JSONWebKeySet);
  });

  it("prints only a token that verifies against the JWKS with the asked audience, scopes, tenant and lifetime", async () => {
    const r = await runFabric(["token", "mint", "--aud", "run-gateway", "--scope", "runs:read runs:write", "--tenant", "acme", "--ttl", "15m", "--key", keyFile]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/);
    const token = r.stdout.trim();
    const { payload, protectedHeader } = await jwtVerify(token, jwks, { audience: "nodefabric-run-gateway", issuer: DEV_ISSUER, typ: "at+jwt" });
    expect(protectedHeader).toMatchObject({ alg: "ES256", kid: readJson(keyFile).kid });
    expect(payload).toMatchObject({ sub: "fabric-cli", scope: "runs:read runs:write", tenant_id: "acme" });
    expect(payload.exp! - payload.iat!).toBe(900);
    expect(Math.abs(payload.iat! - Date.now() / 1000)).toBeLessThan(60);
    expect(typeof payload.jti).toBe("string");
  });

  it("takes full audiences, several of them, a subject and an issuer; the default lifetime is an hour", async () => {
    const token = await mint(["--aud", "nodefabric-pdp", "--aud", "selection", "--scope", "policy:decide", "--scope", "candidate-sets:write", "--sub", "ci-bot", "--issuer", "https://issuer.test", "--key", keyFile]);
    const { payload } = await jwtVerify(token, jwks, { audience: "nodefabric-selection", issuer: "https://issuer.test" });
    expect(payload.aud).toEqual(["nodefabric-pdp", "nodefabric-selection"]);
    expect(payload).toMatchObject({ sub: "ci-bot", scope: "policy:decide candidate-sets:write" });
    expect(payload).not.toHaveProperty("tenant_id");
    expect(payload.exp! - payload.iat!).toBe(3600);
  });

  it("finds the key, issuer and typ in the configuration", async () => {
    const dir = tmp("nf-mint-config-");
    writeFileSync(
      path.join(dir, "fabric.config.json"),
      JSON.stringify({ auth: { issuer: "https://configured.test", signing_key_file: keyFile, jwks_file: path.join(keysDir, "jwks.json"), typ: "JWT" } }),
    );
    const token = await mint(["--aud", "node-registry", "--scope", "node-types:read"], dir);
    expect(decodeProtectedHeader(token).typ).toBe("JWT");
    const { payload } = await jwtVerify(token, jwks, { audience: "nodefabric-node-registry", issuer: "https://configured.test" });
    expect(payload.scope).toBe("node-types:read");
  });

  it("refuses an unknown audience or scope, a bad lifetime and a missing key with exit 2 and nothing on stdout", async () => {
    const badAud = await runFabric(["token", "mint", "--aud", "billing", "--scope", "runs:read", "--key", keyFile]);
    expect(badAud.code).toBe(2);
    expect(badAud.stdout).toBe("");
    expect(badAud.stderr).toContain("--aud billing");
    expect(badAud.stderr).toContain("run-gateway, run-coordinator, atomic-executor, composite-executor, node-registry, selection, pdp");

    const badScope = await runFabric(["token", "mint", "--aud", "run-gateway", "--scope", "runs:read runs:delete", "--key", keyFile]);
    expect(badScope.code).toBe(2);
    expect(badScope.stdout).toBe("");
    expect(badScope.stderr).toContain('unknown scope "runs:delete"');

    const tooLong = await runFabric(["token", "mint", "--aud", "run-gateway", "--scope", "runs:read", "--ttl", "48h", "--key", keyFile]);
    expect(tooLong.code).toBe(2);
    expect(tooLong.stderr).toContain("--ttl 48h");

    const noKey = await runFabric(["token", "mint", "--aud", "run-gateway", "--scope", "runs:read"], { cwd: tmp("nf-mint-nokey-") });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain(path.join(".fabric", "keys", "signing-key.json"));
    expect(noKey.stderr).toContain("fabric keys generate");
  });
});

describe("fabric dev --auth", () => {
  let fabric: FabricProcess;
  let dataDir: string;
  let portBase: number;
  let keyFile: string;
  let gatewayToken: string;
  const url = (name: string) => fabric.urls[name];
  const demo = (input: Record<string, unknown>) => ({ root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input });

  beforeAll(async () => {
    dataDir = tmp("nf-dev-auth-");
    portBase = await freePortBase();
    keyFile = path.join(dataDir, "keys", "signing-key.json");
    fabric = await startFabricProcess(["dev", "--auth", "--port-base", String(portBase), "--data-dir", dataDir], { cwd: repo });
    gatewayToken = await mint(["--aud", "run-gateway", "--scope", "runs:read runs:write", "--key", keyFile]);
    const registryToken = await mint(["--aud", "node-registry", "--scope", "node-types:read", "--key", keyFile]);
    await eventually(async () => {
      const r = await call("GET", `${url("node-registry")}/v1/executors?node_type_id=examples.fanout`, undefined, { authorization: `Bearer ${registryToken}` });
      return r.status === 200 && r.body.length > 0 ? true : undefined;
    }, 15_000, "executors registered");
  }, 60_000);

  afterAll(async () => {
    await fabric?.stop();
  });

  it("makes dev keys in <data_dir>/keys and says how to get a token", async () => {
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(readJson(path.join(dataDir, "keys", "jwks.json")).keys).toHaveLength(1);
    await eventually(async () => (fabric.output().includes("auth: required") ? true : undefined), 5_000, "the auth line of the banner");
    expect(fabric.output()).toMatch(/auth: required \(new dev keys in .*keys\); a token: npx fabric token mint --aud run-gateway/);
  });

  it("answers 401 with a challenge without a token, 403 without the scope, and runs demo.echo and examples.fanout with one", async () => {
    const refused = await call("POST", `${url("run-gateway")}/v1/runs`, demo({ x: 1 }), { prefer: "wait=10" });
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe("unauthenticated");
    expect(refused.headers["www-authenticate"]).toMatch(/^Bearer realm="nodefabric-run-gateway"/);

    const readOnly = await mint(["--aud", "run-gateway", "--scope", "runs:read", "--key", keyFile]);
    const forbidden = await call("POST", `${url("run-gateway")}/v1/runs`, demo({ x: 1 }), { authorization: `Bearer ${readOnly}` });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.error.code).toBe("permission_denied");

    const bearer = { authorization: `Bearer ${gatewayToken}` };
    const echo = await call("POST", `${url("run-gateway")}/v1/runs`, demo({ x: 1 }), { prefer: "wait=10", ...bearer });
    expect(echo.status).toBe(200);
    expect(echo.body).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { echo: { x: 1 } } } });

    const fanout = await call(
      "POST",
      `${url("run-gateway")}/v1/runs`,
      { root_node_type_ref: { node_type_id: "examples.fanout", version: "1.0.0" }, input: { items: ["a", "b", "c"] } },
      { prefer: "wait=10", ...bearer },
    );
    expect(fanout.status).toBe(200);
    expect(fanout.body.state).toBe("completed");
    const nodeRuns = await call("GET", `${url("run-gateway")}/v1/runs/${fanout.body.run_id}/node-runs`, undefined, bearer);
    expect(nodeRuns.status).toBe(200);
    expect(nodeRuns.body.filter((n: { parent_node_run_id?: string; state: string }) => n.parent_node_run_id && n.state === "completed")).toHaveLength(3);
  });

  it("lets `fabric run` and `fabric runs` use $FABRIC_TOKEN or --token, and prints unauthenticated without one", async () => {
    const gw = ["--gateway", url("run-gateway"), "--registry", url("node-registry")];
    // The token the banner suggests: the gateway, and the registry that names the latest version.
    const both = await mint(["--aud", "run-gateway", "--aud", "node-registry", "--scope", "runs:read runs:write node-types:read", "--key", keyFile]);
    const started = await runFabric(["run", "demo.echo", "--input", '{"x":1}', "--no-follow", ...gw], { env: { FABRIC_TOKEN: both } });
    expect(started.stderr).toBe("");
    expect(started.code).toBe(0);
    const runId = JSON.parse(started.stdout).run.run_id as string;

    const followed = await runFabric(["run", "demo.echo@1.0.0", "--input", '{"y":2}', "--token", gatewayToken, ...gw], { env: NO_TOKEN });
    expect(followed.stderr).toBe("");
    expect(followed.code).toBe(0);
    expect(JSON.parse(followed.stdout.trimEnd().split("\n").at(-1)!).run).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { echo: { y: 2 } } } });

    // A token for the gateway alone cannot ask the registry for the latest version: the message says what to do.
    const gatewayOnly = await runFabric(["run", "demo.echo", "--input", '{"x":1}', "--no-follow", ...gw], { env: { FABRIC_TOKEN: gatewayToken } });
    expect(gatewayOnly.code).toBe(1);
    expect(gatewayOnly.stderr).toMatch(/^fabric: unauthenticated: .*nodefabric-node-registry/);
    expect(gatewayOnly.stderr).toContain("demo.echo@<version>");

    const got = await runFabric(["runs", "get", runId, "--gateway", url("run-gateway")], { env: { FABRIC_TOKEN: gatewayToken } });
    expect(got.code).toBe(0);
    expect(JSON.parse(got.stdout).run_id).toBe(runId);

    const anonymous = await runFabric(["run", "demo.echo", "--input", '{"x":1}', "--no-follow", ...gw], { env: NO_TOKEN });
    expect(anonymous.code).toBe(1);
    expect(anonymous.stdout).toBe("");
    expect(anonymous.stderr).toMatch(/^fabric: unauthenticated: /);
    const anonymousGet = await runFabric(["runs", "get", runId, "--gateway", url("run-gateway")], { env: NO_TOKEN });
    expect(anonymousGet.code).toBe(1);
    expect(anonymousGet.stderr).toMatch(/^fabric: unauthenticated: /);

    const ls = await runFabric(["node-types", "ls", "demo", "--registry", url("node-registry")], { env: { FABRIC_TOKEN: both } });
    expect(ls.code).toBe(0);
    expect(ls.stdout).toContain("demo.echo");
    const lsAnonymous = await runFabric(["node-types", "ls", "demo", "--registry", url("node-registry")], { env: NO_TOKEN });
    expect(lsAnonymous.code).toBe(1);
    expect(lsAnonymous.stderr).toMatch(/^fabric: unauthenticated: /);
    // Ten `fabric` processes one after another, each a Node start: seconds each on a loaded 2-core machine.
  }, 90_000);

  it("reuses its keys on the next start, so tokens already minted keep working", async () => {
    const kid = readJson(keyFile).kid;
    await fabric.stop();
    fabric = await startFabricProcess(["dev", "--auth", "--port-base", String(portBase), "--data-dir", dataDir], { cwd: repo });
    expect(readJson(keyFile).kid).toBe(kid);
    await eventually(async () => (fabric.output().includes("auth: required") ? true : undefined), 5_000, "the auth line of the banner");
    expect(fabric.output()).not.toContain("new dev keys");
    const r = await call("GET", `${url("run-gateway")}/v1/runs?limit=1`, undefined, { authorization: `Bearer ${gatewayToken}` });
    expect(r.status).toBe(200);
  }, 60_000);
});

describe("where a fabric may listen, and what `fabric start` requires", () => {
  it("refuses to listen on 0.0.0.0 with authentication disabled (exit 2), and listens on nothing", async () => {
    const base = await freePortBase();
    const r = await runFabric(["dev", "--host", "0.0.0.0", "--port-base", String(base), "--data-dir", tmp("nf-open-")], { cwd: repo });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("refusing to listen on 0.0.0.0: authentication is disabled");
    for (let k = 0; k < 7; k++) expect(await listening(base + k)).toBe(false);
  });

  it("requires keys for `fabric start` unless --auth disabled", async () => {
    const base = await freePortBase();
    const dataDir = tmp("nf-start-");
    const refused = await runFabric(["start", "node-registry", "--port-base", String(base), "--data-dir", dataDir], { cwd: repo });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('auth.mode is "required" but no keys to verify tokens with');
    expect(refused.stderr).toContain("auth.jwks_file");
    expect(await listening(base + 4)).toBe(false);

    const open = await startFabricProcess(["start", "node-registry", "--auth", "disabled", "--port-base", String(base), "--data-dir", dataDir], { cwd: repo, expect: 1 });
    try {
      expect(open.urls["node-registry"]).toBe(`http://127.0.0.1:${base + 4}`);
      expect((await call("GET", `${open.urls["node-registry"]}/v1/node-types`)).status).toBe(200);
    } finally {
      await open.stop();
    }
  });
});
