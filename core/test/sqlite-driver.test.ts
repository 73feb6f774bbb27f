/**
 * The SQLite face both drivers share (core/src/store/sqlite-driver.ts): how a driver is chosen and refused, what
 * openSqlite sets on a file, the statement and transaction behaviour the stores rely on, once per driver this Node
 * can run, and a run store file written by one driver read and written by the other.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.js";
import { nodeHasSqlite, openSqliteDatabase, parseSqliteDriver, SqliteDriverError, type SqliteDatabase } from "../src/store/sqlite-driver.js";
import { openSqlite } from "../src/store/sqlite-open.js";
import { chooseSqliteWriter, parseSqliteWriter } from "../src/store/sqlite-writer-thread.js";
import { openSqliteRunStore } from "../src/store/sqlite-run-store.js";
import { makeEvent, makeNodeRun, makeRun, T0 } from "./store/run-store-contract.js";
import { sqliteDrivers, unavailableSqliteDrivers } from "./support/sqlite-drivers.js";

const dirs: string[] = [];
const open: SqliteDatabase[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-driver-"));
  dirs.push(dir);
  return dir;
}
const mode = (p: string) => fs.statSync(p).mode & 0o777;
const repo = path.resolve(import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname), "../..");
function readIfExists(file: string): string {
  try {
    return fs.readFileSync(file, "utf8");
  } catch {
    return "";
  }
}

describe("choosing the SQLite driver", () => {
  it("takes node or better-sqlite3, and nothing else, from FABRIC_SQLITE_DRIVER", () => {
    expect(parseSqliteDriver("node")).toBe("node");
    expect(parseSqliteDriver("better-sqlite3")).toBe("better-sqlite3");
    expect(parseSqliteDriver(undefined)).toBeUndefined();
    expect(parseSqliteDriver("")).toBeUndefined();
    expect(() => parseSqliteDriver("sqlite3")).toThrow(SqliteDriverError);
    expect(() => parseSqliteDriver("sqlite3")).toThrow('FABRIC_SQLITE_DRIVER must be "node" or "better-sqlite3", not "sqlite3"');
  });

  it("takes thread or inline, and nothing else, from FABRIC_SQLITE_WRITER; a file defaults to inline, memory is always inline", () => {
    expect(parseSqliteWriter("thread")).toBe("thread");
    expect(parseSqliteWriter("inline")).toBe("inline");
    expect(parseSqliteWriter("")).toBeUndefined();
    expect(() => parseSqliteWriter("worker")).toThrow('FABRIC_SQLITE_WRITER must be "thread" or "inline", not "worker"');
    expect(chooseSqliteWriter("/tmp/runs.db")).toBe(process.env.FABRIC_SQLITE_WRITER === "thread" ? "thread" : "inline");
    expect(chooseSqliteWriter("/tmp/runs.db", "thread")).toBe("thread");
    expect(chooseSqliteWriter(":memory:", "thread")).toBe("inline");
    expect(chooseSqliteWriter("file:x?mode=memory", "thread")).toBe("inline");
    expect(() => loadConfig({ cwd: tempDir(), env: { FABRIC_SQLITE_WRITER: "Thread" } })).toThrow(/FABRIC_SQLITE_WRITER must be "thread" or "inline", not "Thread"/);
    expect(() => loadConfig({ cwd: tempDir(), env: { FABRIC_SQLITE_WRITER: "thread" } })).not.toThrow();
  });

  it("a bad FABRIC_SQLITE_DRIVER stops the start with a configuration error naming it", () => {
    expect(() => loadConfig({ cwd: tempDir(), env: { FABRIC_SQLITE_DRIVER: "Node" } })).toThrow(ConfigError);
    expect(() => loadConfig({ cwd: tempDir(), env: { FABRIC_SQLITE_DRIVER: "Node" } })).toThrow(/FABRIC_SQLITE_DRIVER must be "node" or "better-sqlite3", not "Node"/);
    expect(() => loadConfig({ cwd: tempDir(), env: { FABRIC_SQLITE_DRIVER: "node" } })).not.toThrow();
  });

  it("knows which Node versions have node:sqlite without a flag", () => {
    for (const v of ["20.19.0", "22.12.0", "23.3.0", "21.7.3"]) expect([v, nodeHasSqlite(v)]).toEqual([v, false]);
    for (const v of ["22.13.0", "22.20.1", "23.4.0", "24.0.0", "26.1.0"]) expect([v, nodeHasSqlite(v)]).toEqual([v, true]);
  });

  it.runIf(!nodeHasSqlite())("refuses node on a Node without node:sqlite, naming both ways out", () => {
    expect(() => openSqliteDatabase(":memory:", { driver: "node" })).toThrow(/needs node:sqlite, in Node 22\.13 or later; this is Node v\d+.*Upgrade Node.*better-sqlite3/);
  });

  // The installed better-sqlite3 was built for one Node (the one `npm install` ran on); another Node cannot load it.
  const builtFor = /"node_module_version": (\d+)/.exec(readIfExists(path.join(repo, "node_modules/better-sqlite3/build/config.gypi")))?.[1];
  it.runIf(builtFor !== undefined && builtFor !== process.versions.modules)(
    "says to rebuild better-sqlite3 when it was built for another Node, or to use node:sqlite",
    () => {
      const attempt = () => openSqliteDatabase(":memory:", { driver: "better-sqlite3" });
      expect(attempt).toThrow(SqliteDriverError);
      expect(attempt).toThrow(`better-sqlite3 cannot load its native module in Node ${process.version}: npm rebuild better-sqlite3`);
      if (nodeHasSqlite()) expect(attempt).toThrow("or leave FABRIC_SQLITE_DRIVER unset to use node:sqlite");
    },
  );

  it.runIf(nodeHasSqlite())("uses node:sqlite by default where Node has it", () => {
    const saved = process.env.FABRIC_SQLITE_DRIVER;
    delete process.env.FABRIC_SQLITE_DRIVER;
    try {
      const db = openSqliteDatabase(":memory:");
      open.push(db);
      expect(db.driver).toBe("node");
    } finally {
      if (saved !== undefined) process.env.FABRIC_SQLITE_DRIVER = saved;
    }
  });
});

for (const { name, reason } of unavailableSqliteDrivers) {
  it.skip(`SQLite face (${name}): not run, ${reason}`, () => {});
}

for (const driver of sqliteDrivers) {
  describe(`the SQLite face on ${driver.name}`, () => {
    function db(): SqliteDatabase {
      const d = openSqlite(path.join(tempDir(), "nested", "t.db"), driver.options);
      open.push(d);
      d.exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, n INTEGER, blob BLOB)`);
      return d;
    }

    it("opens the file owner-only, in WAL mode, synchronous=NORMAL, with a busy timeout", () => {
      const dir = tempDir();
      const file = path.join(dir, "deep", "store.db");
      const d = openSqlite(file, driver.options);
      open.push(d);
      expect(d.driver).toBe(driver.name);
      d.exec("CREATE TABLE x (y)");
      d.prepare("INSERT INTO x VALUES (1)").run();
      expect(d.pragma("journal_mode", { simple: true })).toBe("wal");
      expect(d.pragma("synchronous", { simple: true })).toBe(1);
      expect(d.pragma("busy_timeout", { simple: true })).toBe(5000);
      expect(d.pragma("foreign_keys", { simple: true })).toBe(1);
      expect(mode(path.join(dir, "deep"))).toBe(0o700);
      for (const f of ["store.db", "store.db-wal", "store.db-shm"]) expect([f, mode(path.join(dir, "deep", f))]).toEqual([f, 0o600]);
      expect(d.pragma("table_info(x)")).toEqual([expect.objectContaining({ name: "y" })]);
    });

    it("binds values in order or by name, and reads integers as numbers and BLOBs as Buffers", () => {
      const d = db();
      const insert = d.prepare(`INSERT INTO t (name, n, blob) VALUES (?, ?, ?)`);
      expect(insert.run("a", 41, Buffer.from([1, 2, 3]))).toEqual({ changes: 1, lastInsertRowid: 1 });
      d.prepare(`INSERT INTO t (name, n, blob) VALUES (@name, @n, @blob)`).run({ name: "b", n: 2 ** 40, blob: null });
      const row = d.prepare(`SELECT id, name, n, blob FROM t WHERE name = ?`).get("a") as Record<string, unknown>;
      expect({ ...row }).toEqual({ id: 1, name: "a", n: 41, blob: Buffer.from([1, 2, 3]) });
      expect(Buffer.isBuffer(row.blob)).toBe(true);
      expect(d.prepare(`SELECT n FROM t WHERE name = @name`).pluck().get({ name: "b" })).toBe(2 ** 40);
      expect(d.prepare(`SELECT blob FROM t ORDER BY id`).pluck().all()).toEqual([Buffer.from([1, 2, 3]), null]);
      expect(d.prepare(`SELECT name FROM t ORDER BY id`).pluck().all()).toEqual(["a", "b"]);
      expect([...d.prepare(`SELECT name FROM t ORDER BY id`).pluck().iterate()]).toEqual(["a", "b"]);
      expect([...d.prepare(`SELECT id, name FROM t ORDER BY id`).iterate()].map((r) => ({ ...(r as object) }))).toEqual([{ id: 1, name: "a" }, { id: 2, name: "b" }]);
      expect(d.prepare(`SELECT name FROM t WHERE id = ?`).get(99)).toBeUndefined();
      expect(d.prepare(`SELECT name FROM t WHERE id = ?`).pluck().get(99)).toBeUndefined();
      expect(d.prepare(`UPDATE t SET n = n + 1`).run().changes).toBe(2);
      expect(d.prepare(`UPDATE t SET n = 0 WHERE id = 1 RETURNING id, n`).all().map((r) => ({ ...(r as object) }))).toEqual([{ id: 1, n: 0 }]);
    });

    it("a transaction commits as a whole, or writes nothing when its body throws", () => {
      const d = db();
      const insert = d.prepare(`INSERT INTO t (name) VALUES (?)`);
      const many = d.transaction((names: string[]) => {
        for (const n of names) insert.run(n);
        return names.length;
      });
      expect(many(["a", "b"])).toBe(2);
      expect(() => many.immediate(["c", "a"])).toThrow(/UNIQUE constraint failed/);
      expect(d.prepare(`SELECT name FROM t ORDER BY name`).pluck().all()).toEqual(["a", "b"]);
      expect(many.immediate(["c"])).toBe(1);
      expect(d.prepare(`SELECT count(*) FROM t`).pluck().get()).toBe(3);
    });

    it("a nested transaction that fails undoes only its own writes", () => {
      const d = db();
      const insert = d.prepare(`INSERT INTO t (name) VALUES (?)`);
      const inner = d.transaction((name: string) => insert.run(name));
      const outer = d.transaction(() => {
        insert.run("outer");
        expect(() => inner("outer")).toThrow(/UNIQUE/);
        inner("inner");
      });
      outer.immediate();
      expect(d.prepare(`SELECT name FROM t ORDER BY name`).pluck().all()).toEqual(["inner", "outer"]);
    });

    it("refuses a transaction body that returns a promise, writing nothing", () => {
      const d = db();
      const insert = d.prepare(`INSERT INTO t (name) VALUES (?)`);
      const tx = d.transaction(() => {
        insert.run("x");
        return Promise.resolve();
      });
      expect(() => tx()).toThrow(/promise/);
      expect(d.prepare(`SELECT count(*) FROM t`).pluck().get()).toBe(0);
    });
  });
}

describe("one file, both drivers", () => {
  const both = sqliteDrivers.length === 2;
  it.skipIf(!both)(
    both ? "a run store file written by one driver is read and written by the other, both ways" : `not run: needs both drivers; ${unavailableSqliteDrivers.map((u) => `${u.name}: ${u.reason}`).join("; ")}`,
    async () => {
      const [first, second] = sqliteDrivers;
      const file = path.join(tempDir(), "runs.db");
      const run = makeRun();
      const root = makeNodeRun({ run_id: run.run_id });
      const a = openSqliteRunStore({ path: file, ...first.options });
      await a.apply({ runs: [run], nodeRuns: [root], events: [makeEvent(run.run_id), makeEvent(run.run_id)] });
      await a.close();

      const b = openSqliteRunStore({ path: file, ...second.options });
      expect(b.driver).toBe(second.name);
      expect(await b.getRun(run.run_id)).toEqual(run);
      expect(await b.getNodeRun(root.node_run_id)).toEqual(root);
      expect((await b.listEvents(run.run_id, -1, 10)).map((e) => e.seq)).toEqual([0, 1]);
      const [claimed] = await b.claim({ owner: "c2", now: T0, limit: 1, leaseMs: 1000 });
      expect(claimed.node_run_id).toBe(root.node_run_id);
      await b.apply({ events: [makeEvent(run.run_id)] });
      await b.close();

      const again = openSqliteRunStore({ path: file, ...first.options });
      expect(await again.getNodeRun(root.node_run_id)).toEqual(claimed);
      expect(await again.lastSeq(run.run_id)).toBe(2);
      await again.close();
      const peek = openSqliteDatabase(file, second.options);
      open.push(peek);
      expect(peek.pragma("user_version", { simple: true })).toBe(1);
      expect(peek.pragma("integrity_check", { simple: true })).toBe("ok");
    },
  );
});
