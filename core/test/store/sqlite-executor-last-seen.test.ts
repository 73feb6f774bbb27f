/**
 * A registry file written before heartbeats (executors without `last_seen`) opens in place: its executors count as
 * last heard from when they registered, and heartbeats and pruning work on them from then on.
 */
import { describe, expect, it } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { openSqliteDatabase } from "../../src/store/sqlite-driver.js";
import { SqliteNodeTypeStore } from "../../src/store/sqlite-node-type-store.js";
import { executorRecord } from "./node-type-store-contract.js";
import { sqliteDrivers, unavailableSqliteDrivers } from "../support/sqlite-drivers.js";

// The schema of the release before heartbeats, with version order already upgraded.
const BEFORE_HEARTBEATS = `CREATE TABLE node_types (
     node_type_id TEXT NOT NULL, version TEXT NOT NULL, version_key TEXT NOT NULL, kind TEXT NOT NULL,
     json TEXT NOT NULL, published_at TEXT NOT NULL, published_seq INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (node_type_id, version)) WITHOUT ROWID;
   CREATE UNIQUE INDEX node_types_by_order ON node_types (node_type_id, version_key);
   CREATE TABLE executors (executor_instance_id TEXT PRIMARY KEY, json TEXT NOT NULL, registered_at TEXT NOT NULL) WITHOUT ROWID;
   CREATE TABLE executor_node_types (node_type_id TEXT NOT NULL, version TEXT NOT NULL, executor_instance_id TEXT NOT NULL,
     PRIMARY KEY (node_type_id, version, executor_instance_id)) WITHOUT ROWID;
   CREATE INDEX executor_node_types_by_executor ON executor_node_types (executor_instance_id);
   PRAGMA user_version = 1;`;

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const at = (s: number) => new Date(T0 + s * 1000).toISOString();

for (const { name, reason } of unavailableSqliteDrivers) {
  it.skip(`SqliteNodeTypeStore (${name}) heartbeat upgrade: not run, ${reason}`, () => {});
}

for (const driver of sqliteDrivers) {
  describe(`SqliteNodeTypeStore (${driver.name}): a file written before executor heartbeats`, () => {
    function oldFile(): { dir: string; file: string } {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-nts-hb-"));
      const file = path.join(dir, "node-registry.db");
      const db = openSqliteDatabase(file, driver.options);
      db.exec(BEFORE_HEARTBEATS);
      const put = db.prepare(`INSERT INTO executors VALUES (?, ?, ?)`);
      const served = db.prepare(`INSERT INTO executor_node_types VALUES (?, ?, ?)`);
      for (const [id, s] of [["exec-a", 10], ["exec-b", 20]] as const) {
        const record = executorRecord(id, s);
        put.run(id, JSON.stringify(record), record.registered_at);
        served.run("svc.echo", "1.0.0", id);
      }
      db.close();
      return { dir, file };
    }

    it("opens in place: old entries count as heard from at registration, and take heartbeats and pruning", async () => {
      const { dir, file } = oldFile();
      try {
        let store = new SqliteNodeTypeStore(file, driver.options);
        expect((await store.listExecutors()).map((e) => e.executor_instance_id)).toEqual(["exec-a", "exec-b"]);
        expect((await store.listExecutors({ node_type_id: "svc.echo", seen_since: at(15) })).map((e) => e.executor_instance_id)).toEqual(["exec-b"]);
        expect(await store.touchExecutor("exec-a", at(30))).toBe(true);
        expect(await store.pruneExecutors(at(25))).toBe(1);
        expect((await store.listExecutors({ seen_since: at(0) })).map((e) => e.executor_instance_id)).toEqual(["exec-a"]);
        await store.close();

        // Opened again (and by two stores at once), the upgraded file is as left.
        store = new SqliteNodeTypeStore(file, driver.options);
        const other = new SqliteNodeTypeStore(file, driver.options);
        expect((await other.listExecutors({ seen_since: at(30) })).map((e) => e.executor_instance_id)).toEqual(["exec-a"]);
        await store.putExecutor(executorRecord("exec-c", 40));
        expect((await other.listExecutors({ seen_since: at(35) })).map((e) => e.executor_instance_id)).toEqual(["exec-c"]);
        await other.close();
        await store.close();
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
