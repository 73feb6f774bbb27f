/**
 * The RunStore contract against real SQLite files, plus what only the SQLite store promises, once per SQLite driver
 * this Node can run (support/sqlite-drivers.ts), and a file written by one driver read and written by the other.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqliteDatabase } from "../src/store/sqlite-driver.js";
import { openSqliteRunStore, type SqliteRunStore } from "../src/store/sqlite-run-store.js";
import { makeEvent, makeNodeRun, makeRun, runStoreContract, T0 } from "./store/run-store-contract.js";
import { sqliteDrivers, unavailableSqliteDrivers, type DriverUnderTest } from "./support/sqlite-drivers.js";

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "nf-"));
}

for (const { name, reason } of unavailableSqliteDrivers) {
  it.skip(`RunStore on SQLite (${name}): not run, ${reason}`, () => {});
}

for (const driver of sqliteDrivers) {
  runStoreContract(`SQLite (${driver.name})`, async () => {
    const dir = tempDir();
    const file = path.join(dir, "runs.db");
    return {
      store: openSqliteRunStore({ path: file, ...driver.options }),
      reopen: async () => openSqliteRunStore({ path: file, ...driver.options }),
      cleanup: async () => fs.rmSync(dir, { recursive: true, force: true }),
    };
  });
  sqliteFileSuite(driver);
}

function sqliteFileSuite(driver: DriverUnderTest): void {
describe(`SqliteRunStore on its file (${driver.name})`, () => {
  const dirs: string[] = [];
  const stores: SqliteRunStore[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });
  function open(file: string): SqliteRunStore {
    const store = openSqliteRunStore({ path: file, ...driver.options });
    expect(store.driver).toBe(driver.name);
    stores.push(store);
    return store;
  }
  function newFile(): string {
    const dir = tempDir();
    dirs.push(dir);
    return path.join(dir, "nested", "deeper", "runs.db");
  }

  it("creates the file and its directory, in WAL mode, with a schema version", async () => {
    const file = newFile();
    const store = open(file);
    const run = makeRun();
    await store.apply({ runs: [run], events: [makeEvent(run.run_id)] });
    expect(fs.existsSync(file)).toBe(true);

    const peek = openSqliteDatabase(file, driver.options);
    try {
      expect(peek.pragma("journal_mode", { simple: true })).toBe("wal");
      expect(peek.pragma("user_version", { simple: true })).toBe(1);
      const tables = peek.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).pluck().all();
      expect(tables).toEqual(["approvals", "events", "node_runs", "runs"]);
      // The whole event is stored as JSON, seq included, so reads need no re-assembly.
      const doc = peek.prepare(`SELECT doc FROM events WHERE run_id = ?`).pluck().get(run.run_id) as string;
      expect(JSON.parse(doc)).toEqual({ ...makeEvent(run.run_id), seq: 0 });
    } finally {
      peek.close();
    }
  });

  it("opening an existing file again keeps its data and schema version", async () => {
    const file = newFile();
    const first = open(file);
    const run = makeRun();
    await first.apply({ runs: [run] });
    await first.close();
    const second = open(file);
    expect(await second.getRun(run.run_id)).toEqual(run);
    const peek = openSqliteDatabase(file, driver.options);
    try {
      expect(peek.pragma("user_version", { simple: true })).toBe(1);
    } finally {
      peek.close();
    }
  });

  it("refuses a NodeRun of a run that does not exist (foreign keys are on), changing nothing", async () => {
    const store = open(newFile());
    const run = makeRun();
    const orphan = makeNodeRun({ run_id: "run_nowhere" });
    await expect(store.apply({ runs: [run], nodeRuns: [orphan] })).rejects.toThrow(/FOREIGN KEY/);
    expect(await store.getRun(run.run_id)).toBeUndefined();
    expect(await store.getNodeRun(orphan.node_run_id)).toBeUndefined();
  });

  it("serves reads written by another store instance over the same file after it closed", async () => {
    // Each store keeps in-memory state; one that reopens a file must see the other's last commit, not stale data.
    const file = newFile();
    const a = open(file);
    const run = makeRun();
    const root = makeNodeRun({ run_id: run.run_id });
    await a.apply({ runs: [run], nodeRuns: [root], events: [makeEvent(run.run_id)] });
    expect(await a.getNodeRun(root.node_run_id)).toEqual(root);
    const [claimed] = await a.claim({ owner: "c1", now: T0, limit: 1, leaseMs: 10 });
    await a.close();
    const b = open(file);
    expect(await b.getNodeRun(root.node_run_id)).toEqual(claimed);
    const running = { ...claimed, state: "running" as const, node_run: { ...claimed.node_run, state: "running" as const } };
    await b.apply({ nodeRuns: [running], events: [makeEvent(run.run_id)] });
    expect(await b.getNodeRun(root.node_run_id)).toEqual(running);
    expect(await b.lastSeq(run.run_id)).toBe(1);
  });
});
}
