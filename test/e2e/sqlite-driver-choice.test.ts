/**
 * `fabric dev` from an installation without better-sqlite3 (it is an optional peer dependency of @nodefabric/core):
 * the built core copied into a node_modules of its own, beside links to every other installed package. On Node with
 * node:sqlite the fabric runs on it; without, and whenever better-sqlite3 is asked for, the start stops with a message
 * that says what to do. A FABRIC_SQLITE_DRIVER that names no driver stops it as a configuration error.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { nodeHasSqlite } from "../../core/src/store/sqlite-driver.js";
import { call } from "../run-client.js";
import { runFabric, startFabricProcess } from "./fabric-cli.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
let root: string;
let cli: string;

beforeAll(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "nf-no-better-sqlite3-"));
  const modules = path.join(root, "node_modules");
  fs.mkdirSync(path.join(modules, "@nodefabric"), { recursive: true });
  const installed = path.join(repo, "node_modules");
  for (const name of fs.readdirSync(installed)) {
    if (name === "better-sqlite3" || name === "@nodefabric" || name === ".bin") continue;
    fs.symlinkSync(path.join(installed, name), path.join(modules, name));
  }
  for (const name of fs.readdirSync(path.join(installed, "@nodefabric"))) {
    if (name === "core") continue;
    fs.symlinkSync(fs.realpathSync(path.join(installed, "@nodefabric", name)), path.join(modules, "@nodefabric", name));
  }
  // A copy, not a link: resolving from a link's real path would find the repository's better-sqlite3.
  const core = path.join(modules, "@nodefabric", "core");
  for (const part of ["package.json", "dist", "bin", "policies", "node_modules"]) {
    fs.cpSync(path.join(repo, "core", part), path.join(core, part), { recursive: true, verbatimSymlinks: true });
  }
  cli = path.join(core, "dist", "cli", "main.js");
});

afterAll(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

const dev = (dataDir: string) => ["dev", "--port-base", "0", "--data-dir", dataDir];

describe("an installation without better-sqlite3", () => {
  it("asked for better-sqlite3, stops the start and says to install it, writing no database", async () => {
    const dataDir = path.join(root, "data-better");
    const r = await runFabric(dev(dataDir), { cwd: root, cli, env: { FABRIC_SQLITE_DRIVER: "better-sqlite3", FABRIC_LOG_LEVEL: "warn" } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("FABRIC_SQLITE_DRIVER=better-sqlite3, but better-sqlite3 is not installed: npm install better-sqlite3");
    expect(fs.existsSync(path.join(dataDir, "run-coordinator.db"))).toBe(false);
  }, 60_000);

  it("stops a start whose FABRIC_SQLITE_DRIVER names no driver, as a configuration error", async () => {
    const r = await runFabric(dev(path.join(root, "data-bad")), { cwd: root, cli, env: { FABRIC_SQLITE_DRIVER: "postgres" } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('FABRIC_SQLITE_DRIVER must be "node" or "better-sqlite3", not "postgres"');
  }, 60_000);

  it("stops a start whose FABRIC_SQLITE_WRITER names no place to write, as a configuration error", async () => {
    const r = await runFabric(dev(path.join(root, "data-bad-writer")), { cwd: root, cli, env: { FABRIC_SQLITE_WRITER: "worker" } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('FABRIC_SQLITE_WRITER must be "thread" or "inline", not "worker"');
    expect(fs.existsSync(path.join(root, "data-bad-writer"))).toBe(false);
  }, 60_000);

  it.runIf(!nodeHasSqlite())("on a Node without node:sqlite, stops the start naming both ways out", async () => {
    const r = await runFabric(dev(path.join(root, "data-old")), { cwd: root, cli, env: { FABRIC_SQLITE_DRIVER: "" } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`Node ${process.version} has no node:sqlite and better-sqlite3 is not installed`);
    expect(r.stderr).toContain("Upgrade Node to 22.13 or later (node:sqlite is built in), or npm install better-sqlite3");
  }, 60_000);

  it.runIf(nodeHasSqlite())("on a Node with node:sqlite, runs on it: a run completes, with no warning about SQLite", async () => {
    const fabric = await startFabricProcess(dev(path.join(root, "data-node")), { cwd: root, cli, env: { FABRIC_SQLITE_DRIVER: "" } });
    try {
      const r = await call(
        "POST",
        `${fabric.urls["run-gateway"]}/v1/runs`,
        { root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: { city: "Oslo" } },
        { prefer: "wait=20" },
      );
      expect(r.status).toBe(200);
      expect(r.body.state).toBe("completed");
      expect(fabric.output()).not.toMatch(/ExperimentalWarning|SQLite is an experimental/);
      const health = await call("GET", `${fabric.urls["run-coordinator"]}/v1/health`);
      expect(health.body.checks).toContainEqual({ name: "store", status: "ok", details: { sqlite_driver: "node:sqlite", sqlite_writer: "inline" } });
    } finally {
      await fabric.stop();
    }
  }, 120_000);
});
