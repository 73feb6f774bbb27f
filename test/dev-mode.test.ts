/**
 * Dev mode is not an open door. With authentication disabled (the default of `fabric dev`), every service answers only
 * requests addressed to a loopback name (against DNS rebinding from a browser), the data folder is the owner's only
 * (0700, databases 0600), and health tells what is useful without revealing where files are.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { nodeHasSqlite, openSqliteDatabase } from "../core/src/store/sqlite-driver.js";
import { request } from "undici";
import { validatorFor } from "@nodefabric/schemas";
import { SERVICE_NAMES, loadConfig, startFabric, type RunningFabric } from "@nodefabric/core";
import { startTestIssuer, type TestIssuer } from "../core/test/support/test-issuer.js";

const repo = fileURLToPath(new URL("..", import.meta.url));
const isEnvelope = validatorFor("error_envelope");
const isHealth = validatorFor("health");
const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };

const POLICY = '@id("allow-all")\npermit(principal, action, resource);\n';

async function get(url: string, headers: Record<string, string> = {}) {
  const res = await request(url, { headers });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, body: text ? JSON.parse(text) : undefined };
}

function mode(file: string): number {
  return fs.statSync(file).mode & 0o777;
}

/** Any absolute path of this machine in a text: the places tests keep their files, and the repository. */
function absolutePathsIn(text: string, roots: string[]): string[] {
  return roots.filter((r) => text.includes(r));
}

describe("a fabric without authentication", () => {
  let fabric: RunningFabric;
  let base: string;
  let dataDir: string;

  beforeAll(async () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), "nf-devmode-"));
    // A data folder the fabric creates itself, one level below an existing folder.
    dataDir = path.join(base, ".fabric");
    const policyFile = path.join(base, "policy.cedar");
    fs.writeFileSync(policyFile, POLICY);
    const entitiesFile = path.join(base, "entities.json");
    fs.writeFileSync(entitiesFile, "[]");
    fabric = await startFabric(
      loadConfig({
        cwd: repo,
        env: {},
        flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"], policy: policyFile, policy_entities: entitiesFile },
      }),
    );
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  it("refuses requests addressed to any name but a loopback one, on every service, with 403 and an envelope", async () => {
    expect(fabric.services.map((s) => s.name).sort()).toEqual([...SERVICE_NAMES].sort());
    for (const s of fabric.services) {
      const port = new URL(s.url).port;
      for (const host of ["evil.example", `evil.example:${port}`, "attacker.test", `localhost.evil.example:${port}`, "127.0.0.1.nip.io", "[::2]", "10.0.0.1", "0.0.0.0", `[fe80::1]:${port}`, "localhost:notaport"]) {
        for (const p of ["/v1/health", "/v1/version", "/v1/runs"]) {
          const a = await get(`${s.url}${p}`, { host });
          expect(a.status, `${s.name} ${host} ${p}: ${a.text}`).toBe(403);
          expect(isEnvelope(a.body), a.text).toBe(true);
          expect(a.body.error.code).toBe("permission_denied");
        }
      }
    }
  });

  it("answers requests addressed to loopback names, with or without a port", async () => {
    for (const s of fabric.services) {
      const port = new URL(s.url).port;
      for (const host of ["localhost", `localhost:${port}`, `127.0.0.1:${port}`, "127.0.0.1", `[::1]:${port}`, "[::1]", `app.localhost:${port}`, "LOCALHOST", "127.1.2.3", `localhost.:${port}`]) {
        const a = await get(`${s.url}/v1/version`, { host });
        expect(a.status, `${s.name} ${host}: ${a.text}`).toBe(200);
        expect(a.body.service_name).toBe(s.name);
      }
    }
  });

  it("creates its data folder 0700 and its databases (with their -wal and -shm) 0600", async () => {
    // A run, so that every database has been written.
    const gw = fabric.urls["run-gateway"]!;
    const res = await request(`${gw}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json", prefer: "wait=10" },
      body: JSON.stringify({ root_node_type_ref: ECHO, input: { hello: "world" } }),
    });
    expect(res.statusCode).toBe(200);
    await res.body.text();

    expect(mode(dataDir)).toBe(0o700);
    const files = fs.readdirSync(dataDir);
    const dbs = files.filter((f) => /\.db(-wal|-shm)?$/.test(f));
    for (const db of ["run-coordinator.db", "node-registry.db", "selection.db"]) expect(files).toContain(db);
    expect(dbs.some((f) => f.endsWith("-wal"))).toBe(true);
    for (const f of dbs) expect([f, mode(path.join(dataDir, f))]).toEqual([f, 0o600]);
    for (const f of files) expect([f, mode(path.join(dataDir, f)) & 0o077]).toEqual([f, 0]);
  });

  it("tells in health what is useful, but no file path", async () => {
    const roots = [base, dataDir, repo, os.tmpdir(), os.homedir()].filter((r) => r.length > 1);
    for (const s of fabric.services) {
      const h = await get(`${s.url}/v1/health`);
      expect(h.status, h.text).toBe(200);
      expect(isHealth(h.body), h.text).toBe(true);
      expect(absolutePathsIn(h.text, roots), `${s.name}: ${h.text}`).toEqual([]);
    }
    // Still useful: the PDP says which policy file it loaded, by name.
    const pdp = await get(`${fabric.urls.pdp}/v1/health`);
    expect(pdp.body.checks[0]).toMatchObject({ name: "policy", status: "ok", message: "1 policy loaded from policy.cedar", details: { source: "policy.cedar", entities_source: "entities.json", policies: 1 } });
    // And the coordinator, which SQLite library its store runs on: Node's own where it has one.
    const coordinator = await get(`${fabric.urls["run-coordinator"]}/v1/health`);
    expect(coordinator.body.checks).toContainEqual({ name: "store", status: "ok", details: { sqlite_driver: nodeHasSqlite() ? "node:sqlite" : "better-sqlite3", sqlite_writer: "inline" } });
  });
});

describe("a data folder made by an older version", () => {
  it("is tightened on start: the folder 0700, its databases 0600", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-devmode-old-"));
    fs.chmodSync(dataDir, 0o755);
    for (const name of ["run-coordinator.db", "node-registry.db", "selection.db"]) {
      const file = path.join(dataDir, name);
      const db = openSqliteDatabase(file);
      db.pragma("journal_mode = WAL");
      db.exec("CREATE TABLE IF NOT EXISTS t (x)");
      db.close();
      fs.chmodSync(file, 0o644);
    }
    const fabric = await startFabric(loadConfig({ cwd: repo, env: {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"] } }));
    try {
      expect(mode(dataDir)).toBe(0o700);
      for (const f of fs.readdirSync(dataDir).filter((n) => /\.db(-wal|-shm)?$/.test(n))) expect([f, mode(path.join(dataDir, f))]).toEqual([f, 0o600]);
    } finally {
      await fabric.close();
    }
  }, 60_000);
});

describe("a fabric with authentication required", () => {
  let idp: TestIssuer;
  let fabric: RunningFabric;
  let dir: string;

  beforeAll(async () => {
    idp = await startTestIssuer();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-devmode-auth-"));
    const keyFile = path.join(dir, "signing-key.json");
    fs.writeFileSync(keyFile, JSON.stringify(idp.keys[0]!.privateJwk));
    const jwksFile = path.join(dir, "jwks.json");
    idp.writeJwks(jwksFile);
    fabric = await startFabric(
      loadConfig({
        cwd: repo,
        env: {},
        flags: {
          port_base: 0,
          data_dir: path.join(dir, "data"),
          log_level: "silent",
          handlers: ["@nodefabric/handler-demo"],
          auth: { mode: "required", issuer: idp.issuer, jwks_file: jwksFile, signing_key_file: keyFile },
        },
      }),
    );
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
    await idp?.close();
  });

  it("does not check the Host header (tokens protect it), and names its key file without its path", async () => {
    for (const s of fabric.services) {
      const h = await get(`${s.url}/v1/health`, { host: "nodefabric.internal.example" });
      expect(h.status, h.text).toBe(200);
      expect(h.body.extensions["nodefabric.auth"]).toMatchObject({ mode: "required", keys: "jwks.json" });
      expect(h.text.includes(dir), h.text).toBe(false);
      const refused = await get(`${s.url}/v1/runs`, { host: "nodefabric.internal.example" });
      expect(refused.status).not.toBe(403);
      expect(refused.status).toBeGreaterThanOrEqual(400);
      expect(isEnvelope(refused.body)).toBe(true);
    }
  });
});
