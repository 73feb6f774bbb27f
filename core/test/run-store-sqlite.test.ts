/**
 * The RunStore contract against real SQLite files, plus what only the SQLite store promises, once per SQLite driver
 * this Node can run (support/sqlite-drivers.ts), and a file written by one driver read and written by the other.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqliteDatabase } from "../src/store/sqlite-driver.js";
import { openSqliteRunStore, QUEUE_STATS_SQL, WRITE_SQL, type SqliteRunStore } from "../src/store/sqlite-run-store.js";
import { SqliteWriteError, SqliteWriterThread } from "../src/store/sqlite-writer-thread.js";
import { makeEvent, makeNodeRun, makeRun, runStoreContract, T0 } from "./store/run-store-contract.js";
import { sqliteDrivers, unavailableSqliteDrivers, type DriverUnderTest } from "./support/sqlite-drivers.js";

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "nf-"));
}

for (const { name, reason } of unavailableSqliteDrivers) {
  it.skip(`RunStore on SQLite (${name}): not run, ${reason}`, () => {});
}

for (const driver of sqliteDrivers) {
  // Both places the writes can run: on the store's connection (the default) and on a writer thread's own.
  for (const writer of ["inline", "thread"] as const) {
    runStoreContract(`SQLite (${driver.name}, ${writer} writer)`, async () => {
      const dir = tempDir();
      const file = path.join(dir, "runs.db");
      return {
        store: openSqliteRunStore({ path: file, writer, ...driver.options }),
        reopen: async () => openSqliteRunStore({ path: file, writer, ...driver.options }),
        cleanup: async () => fs.rmSync(dir, { recursive: true, force: true }),
      };
    });
  }
  sqliteFileSuite(driver);
}

function sqliteFileSuite(driver: DriverUnderTest): void {
describe(`SqliteRunStore's timed statements (${driver.name})`, () => {
  // What runs on a timer, on the event loop, whatever the size of the file: every one must read an index range,
  // never the whole table (a count over every NodeRun ever stored grew the soak's p99 from 80 ms to over a second).
  it("claim and queueStats read index ranges, not whole tables", async () => {
    const dir = tempDir();
    const file = path.join(dir, "runs.db");
    await openSqliteRunStore({ path: file, ...driver.options }).close();
    const db = openSqliteDatabase(file, driver.options);
    try {
      const values: Record<string, unknown> = { now: T0, owner: "c1", expires: T0 + 1, limit: 10 };
      for (const sql of [QUEUE_STATS_SQL, WRITE_SQL.claim]) {
        // Only the parameters the statement names: node:sqlite refuses a named parameter the statement lacks.
        const names = new Set([...sql.matchAll(/@(\w+)/g)].map((m) => m[1]!));
        const params = Object.fromEntries(Object.entries(values).filter(([k]) => names.has(k)));
        const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as Array<{ detail: string }>).map((r) => r.detail);
        expect(plan.filter((d) => /^SCAN (runs|node_runs|events|approvals)$/.test(d)), `${sql}\n${plan.join("\n")}`).toEqual([]);
        expect(plan.some((d) => /USING (COVERING )?INDEX node_runs_(un)?leased/.test(d)), plan.join("\n")).toBe(true);
      }
    } finally {
      db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

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
    const other = makeRun();
    await store.apply({ runs: [run, other], events: [makeEvent(run.run_id), makeEvent(other.run_id), makeEvent(run.run_id, { type: "node_run_completed" })] });
    expect(fs.existsSync(file)).toBe(true);

    const peek = openSqliteDatabase(file, driver.options);
    try {
      expect(peek.pragma("journal_mode", { simple: true })).toBe("wal");
      expect(peek.pragma("user_version", { simple: true })).toBe(1);
      const tables = peek.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).pluck().all();
      expect(tables).toEqual(["approvals", "events", "node_runs", "runs"]);
      // One row per run and batch holds its events as a JSON array, seq included, so reads need no re-assembly.
      const rows = peek.prepare(`SELECT run_id, seq, last_seq, type, doc FROM events ORDER BY id`).all() as Array<{ run_id: string; seq: number; last_seq: number; type: string; doc: string }>;
      expect(rows.map(({ doc, ...row }) => ({ ...row, doc: JSON.parse(doc) }))).toEqual([
        { run_id: run.run_id, seq: 0, last_seq: 1, type: "node_run_started", doc: [{ ...makeEvent(run.run_id), seq: 0 }, { ...makeEvent(run.run_id, { type: "node_run_completed" }), seq: 1 }] },
        { run_id: other.run_id, seq: 0, last_seq: 0, type: "node_run_started", doc: [{ ...makeEvent(other.run_id), seq: 0 }] },
      ]);
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

  it("reads a file written one row per event (before events were grouped), and carries on its seqs", async () => {
    // The layout of the events table before last_seq: one row per event, its doc the event object.
    const file = newFile();
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const run = makeRun();
    const old = openSqliteDatabase(file, driver.options);
    old.exec(`CREATE TABLE runs (run_id TEXT PRIMARY KEY, tenant_id TEXT, state TEXT NOT NULL, doc TEXT NOT NULL,
        request_hash TEXT NOT NULL, deadline_at INTEGER, created_at INTEGER NOT NULL);
      CREATE TABLE events (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, seq INTEGER NOT NULL, node_run_id TEXT,
        type TEXT NOT NULL, time TEXT NOT NULL, doc TEXT NOT NULL);
      CREATE UNIQUE INDEX events_by_run ON events (run_id, seq);`);
    old.prepare(`INSERT INTO runs VALUES (?, NULL, ?, ?, ?, NULL, ?)`).run(run.run_id, run.state, JSON.stringify(run.run), run.request_hash, run.created_at);
    const before = [0, 1, 2].map((seq) => ({ ...makeEvent(run.run_id, { data: { old: seq } }), seq }));
    for (const e of before) old.prepare(`INSERT INTO events (run_id, seq, type, time, doc) VALUES (?, ?, ?, ?, ?)`).run(run.run_id, e.seq, e.type, e.time, JSON.stringify(e));
    old.close();

    const store = open(file);
    expect(await store.lastSeq(run.run_id)).toBe(2);
    const after = await store.apply({ events: [makeEvent(run.run_id, { data: { n: 3 } }), makeEvent(run.run_id, { data: { n: 4 } })] });
    expect(after.map((e) => e.seq)).toEqual([3, 4]);
    const all = [...before, ...after];
    expect(await store.listEvents(run.run_id, -1, 100)).toEqual(all);
    for (let from = -1; from <= 4; from++) {
      for (const limit of [1, 2, 3]) expect(await store.listEvents(run.run_id, from, limit)).toEqual(all.slice(from + 1, from + 1 + limit));
    }
  });

  it("with the writer thread, commits on its own connection and reads back on the store's, across a reopen", async () => {
    const file = newFile();
    const store = openSqliteRunStore({ path: file, writer: "thread", ...driver.options });
    stores.push(store);
    expect(store.writer).toBe("thread");
    const run = makeRun();
    const root = makeNodeRun({ run_id: run.run_id });
    const events = await store.apply({ runs: [run], nodeRuns: [root], events: [makeEvent(run.run_id), makeEvent(run.run_id)] });
    expect(events.map((e) => e.seq)).toEqual([0, 1]);
    // Another connection sees the commit at once: it is on the file, not only in the store's memory.
    const peek = openSqliteDatabase(file, driver.options);
    try {
      expect(peek.prepare(`SELECT state FROM node_runs WHERE node_run_id = ?`).pluck().get(root.node_run_id)).toBe("queued");
    } finally {
      peek.close();
    }
    const [claimed] = await store.claim({ owner: "c1", now: T0, limit: 1, leaseMs: 10 });
    expect(claimed.lease_owner).toBe("c1");
    expect(await store.releaseLeases("c1")).toBe(1);
    await store.close();
    const again = open(file);
    expect(again.writer).toBe("inline");
    expect(await again.listEvents(run.run_id, -1, 10)).toEqual(events);
    expect((await again.getNodeRun(root.node_run_id))?.lease_owner).toBeNull();
  });

  it("a writer thread that cannot open its file fails every write with SQLite's reason, and closes cleanly", async () => {
    const dir = tempDir();
    dirs.push(dir);
    // A directory where the file should be: the thread's connection cannot open it.
    const thread = new SqliteWriterThread({ file: dir, driver: driver.name, nativeBinding: driver.options.nativeBinding, sql: { runs: "x", nodeRuns: "x", approvals: "x", events: "x", claim: "x", releaseLeases: "x" } });
    const failed = thread.write({ runs: [], nodeRuns: [], approvals: [], events: [] });
    await expect(failed).rejects.toThrow(SqliteWriteError);
    await expect(failed).rejects.toThrow(/unable to open|directory|cannot open/i);
    await expect(thread.claim({ owner: "c1", expires: 1, now: 0, limit: 1 })).rejects.toThrow(SqliteWriteError);
    await thread.close();
  });

  it("reads back every ended run as committed, past the few kept in memory and for a run too large to keep", async () => {
    const store = open(newFile());
    const ended = (run: ReturnType<typeof makeRun>, outputs: unknown) =>
      ({ ...run, state: "completed" as const, run: { ...run.run, state: "completed" as const, extensions: { "nodefabric.outputs": outputs } } });
    const runs = Array.from({ length: 1_100 }, () => makeRun());
    await store.apply({ runs });
    const big = makeRun();
    await store.apply({ runs: [big] });
    const done = runs.map((r, i) => ended(r, { i }));
    for (let i = 0; i < done.length; i += 100) await store.apply({ runs: done.slice(i, i + 100) });
    const bigDone = ended(big, { text: "x".repeat(9 << 20) });
    await store.apply({ runs: [bigDone] });
    expect(await store.getRun(big.run_id)).toEqual(bigDone);
    for (const i of [0, 1, 75, 1_099]) expect(await store.getRun(done[i].run_id)).toEqual(done[i]);
    // Changed again after it ended (as a cancel of an ended run never does, but a store must not care): the new one.
    const again = { ...done[1_099], run: { ...done[1_099].run, extensions: { "nodefabric.outputs": { i: "again" } } } };
    await store.apply({ runs: [again] });
    expect(await store.getRun(again.run_id)).toEqual(again);
  });

  it("a database in memory is written inline whatever is asked, since no second connection can open it", async () => {
    const store = openSqliteRunStore({ path: ":memory:", writer: "thread", ...driver.options });
    stores.push(store);
    expect(store.writer).toBe("inline");
    const run = makeRun();
    await store.apply({ runs: [run], events: [makeEvent(run.run_id)] });
    expect(await store.lastSeq(run.run_id)).toBe(0);
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
