import { describe, expect, it } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import semver from "semver";
import { openSqliteDatabase } from "../src/store/sqlite-driver.js";
import { SqliteNodeTypeStore } from "../src/store/sqlite-node-type-store.js";
import { nodeTypeStoreContract, storedNodeType } from "./store/node-type-store-contract.js";
import { sqliteDrivers, unavailableSqliteDrivers, type DriverUnderTest } from "./support/sqlite-drivers.js";

function tmpFile(): { dir: string; file: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-nts-"));
  return { dir, file: path.join(dir, "registry.db") };
}

for (const { name, reason } of unavailableSqliteDrivers) {
  it.skip(`SqliteNodeTypeStore (${name}): not run, ${reason}`, () => {});
}

for (const driver of sqliteDrivers) {
  nodeTypeStoreContract(`SqliteNodeTypeStore (${driver.name})`, async () => {
    const { dir, file } = tmpFile();
    return {
      store: new SqliteNodeTypeStore(file, driver.options),
      reopen: async () => new SqliteNodeTypeStore(file, driver.options),
      cleanup: async () => fs.rmSync(dir, { recursive: true, force: true }),
    };
  });
  legacyFileSuite(driver);
}

// The sort key and schema the store wrote before versions other than semver were allowed, to build such a file here.
function legacyKey(version: string): string {
  const p = semver.parse(version)!;
  const num = (d: string) => `${String(d.length).padStart(2, "0")}${d}`;
  let key = `${num(String(p.major))}.${num(String(p.minor))}.${num(String(p.patch))}`;
  if (p.prerelease.length === 0) key += "1";
  else key += `0${p.prerelease.map((id) => (/^[0-9]+$/.test(String(id)) ? `0${num(String(id))}` : `1${id}`)).join("\u0002")}`;
  if (p.build.length > 0) key += `\u0001${p.build.join(".")}`;
  return key;
}

const LEGACY_SCHEMA = `CREATE TABLE node_types (
     node_type_id TEXT NOT NULL, version TEXT NOT NULL, version_key TEXT NOT NULL, kind TEXT NOT NULL,
     json TEXT NOT NULL, published_at TEXT NOT NULL, PRIMARY KEY (node_type_id, version)) WITHOUT ROWID;
   CREATE UNIQUE INDEX node_types_by_order ON node_types (node_type_id, version_key);
   CREATE TABLE executors (executor_instance_id TEXT PRIMARY KEY, json TEXT NOT NULL, registered_at TEXT NOT NULL) WITHOUT ROWID;
   CREATE TABLE executor_node_types (node_type_id TEXT NOT NULL, version TEXT NOT NULL, executor_instance_id TEXT NOT NULL,
     PRIMARY KEY (node_type_id, version, executor_instance_id)) WITHOUT ROWID;
   CREATE INDEX executor_node_types_by_executor ON executor_node_types (executor_instance_id);
   PRAGMA user_version = 1;`;

function legacyFileSuite(driver: DriverUnderTest): void {
describe(`SqliteNodeTypeStore (${driver.name}): a file written before any version string was allowed`, () => {
  // Published out of semver order on purpose; "1.0.0-a+1b" gets, in the new encoding, the key "1.0.0-a.b" had before.
  const legacy = ["2.0.0", "1.0.0-a.b", "1.0.0", "1.0.0-a+1b", "1.0.0+b", "1.10.0-rc.1", "1.9.0"];
  const semverOrder = ["1.0.0-a+1b", "1.0.0-a.b", "1.0.0", "1.0.0+b", "1.9.0", "1.10.0-rc.1", "2.0.0"];

  function legacyFile(): { dir: string; file: string } {
    const t = tmpFile();
    const db = openSqliteDatabase(t.file, driver.options);
    db.exec(LEGACY_SCHEMA);
    const insert = db.prepare(`INSERT INTO node_types VALUES (@node_type_id, @version, @version_key, @kind, @json, @published_at)`);
    for (const v of legacy) {
      const r = storedNodeType("old.type", v);
      insert.run({ ...r, version_key: legacyKey(v) });
    }
    insert.run({ ...storedNodeType("old.other", "0.1.0"), version_key: legacyKey("0.1.0") });
    db.close();
    return t;
  }

  it("opens it, keeps every version in semver order, and takes versions of any kind from then on", async () => {
    const { dir, file } = legacyFile();
    try {
      let store = new SqliteNodeTypeStore(file, driver.options);
      expect(await store.listVersions("old.type")).toEqual(semverOrder);
      expect((await store.latestNodeType("old.type"))?.version).toBe("2.0.0");
      expect((await store.getNodeType("old.type", "1.0.0-a+1b"))?.version).toBe("1.0.0-a+1b");

      expect((await store.insertNodeType(storedNodeType("old.type", "v3"))).inserted).toBe(true);
      expect((await store.insertNodeType(storedNodeType("old.type", "1.5.0"))).inserted).toBe(true);
      expect(await store.listVersions("old.type")).toEqual([...semverOrder.slice(0, 4), "1.5.0", ...semverOrder.slice(4), "v3"]);
      expect((await store.latestNodeType("old.type"))?.version).toBe("v3");
      expect((await store.latestNodeTypes()).map((t) => `${t.node_type_id}@${t.version}`)).toEqual(["old.other@0.1.0", "old.type@v3"]);
      await store.close();

      // Opening the migrated file again changes nothing.
      store = new SqliteNodeTypeStore(file, driver.options);
      expect(await store.listVersions("old.type")).toEqual([...semverOrder.slice(0, 4), "1.5.0", ...semverOrder.slice(4), "v3"]);
      expect((await store.insertNodeType(storedNodeType("old.type", "v4"))).inserted).toBe(true);
      expect((await store.latestNodeType("old.type"))?.version).toBe("v4");
      await store.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("lets two stores open the same legacy file at once", async () => {
    const { dir, file } = legacyFile();
    try {
      const a = new SqliteNodeTypeStore(file, driver.options);
      const b = new SqliteNodeTypeStore(file, driver.options);
      expect(await b.listVersions("old.type")).toEqual(semverOrder);
      await a.insertNodeType(storedNodeType("old.type", "v9"));
      expect((await b.latestNodeType("old.type"))?.version).toBe("v9");
      await a.close();
      await b.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
}
