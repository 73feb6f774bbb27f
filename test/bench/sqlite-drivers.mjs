/**
 * The embedded store's hot path on both SQLite drivers: better-sqlite3 and Node's own node:sqlite (Node >= 22.13).
 *
 * One "tick" is what the coordinator's TickWriter and engine do per event-loop turn under load, with the run store's
 * own schema and statements (core/src/store/sqlite-run-migrations.ts, sqlite-run-sql.ts):
 *   - one IMMEDIATE transaction that creates BATCH runs (run + root NodeRun upserts, one row of events holding
 *     run_started + node_run_created, with the run-exists and last-seq lookups a run's first batch does), moves the
 *     BATCH NodeRuns claimed last tick to completed (NodeRun + run upserts, one row of two events each);
 *   - the claim: one UPDATE … RETURNING in its own IMMEDIATE transaction;
 *   - the reads of a follower: getRun and listEvents per finished run, getNodeRun per claimed NodeRun.
 * Both drivers run the same statements on a real file each, WAL mode, synchronous=NORMAL, busy_timeout=5000 (as
 * openSqlite sets), rounds interleaved, and the medians and the ratio node:sqlite / better-sqlite3 come from the
 * same run. Measured twice: the bare statements on each driver, then the same tick through core's own
 * SqliteRunStore on each (apply, claim, getNodeRun, getRun, listEvents; built from source with esbuild), which adds
 * the SQLite face of core/src/store/sqlite-driver.ts and the store's caches.
 *
 *   node test/bench/sqlite-drivers.mjs [--rounds 7] [--ticks 400] [--batch 32] [--better-sqlite3-binding FILE]
 *
 * --better-sqlite3-binding (or $BETTER_SQLITE3_BINDING) names a better_sqlite3.node built for the running Node, when
 * the one in node_modules was built for another (.ci/node.sh builds one into its cache).
 * Prints one JSON line per level and driver and one per level for the ratio, then a markdown table.
 *
 * On Node 24.21, 2 cores, 2026-11-25 (better-sqlite3 12.11.1 built for it; a row per event then): statements 528 vs
 * 529 ticks/s (ratio 0.99), SqliteRunStore 485 vs 472 ticks/s (ratio 1.02), about 2 ms per tick of 32 new and 32
 * finished runs.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "7" },
    ticks: { type: "string", default: "400" },
    batch: { type: "string", default: "32" },
    "better-sqlite3-binding": { type: "string" },
  },
});
const ROUNDS = Number(args.rounds);
const TICKS = Number(args.ticks);
const BATCH = Number(args.batch);
const BINDING = args["better-sqlite3-binding"] ?? process.env.BETTER_SQLITE3_BINDING;
const require = createRequire(import.meta.url);

// ------------------------------------------------------------------ the two drivers, raw

function openBetter(file) {
  const Database = require("better-sqlite3");
  const db = new Database(file, BINDING ? { nativeBinding: BINDING } : {});
  return {
    name: "better-sqlite3",
    version: `${require("better-sqlite3/package.json").version} (SQLite ${db.prepare("SELECT sqlite_version()").pluck().get()})`,
    exec: (sql) => db.exec(sql),
    prepare(sql, pluck) {
      const s = db.prepare(sql);
      if (pluck && s.reader) s.pluck();
      return { run: (...p) => s.run(...p), get: (...p) => s.get(...p), all: (...p) => s.all(...p) };
    },
    close: () => db.close(),
  };
}

function openNode(file) {
  const sqlite = process.getBuiltinModule?.("node:sqlite");
  if (!sqlite) return undefined;
  const db = new sqlite.DatabaseSync(file);
  const first = (row) => (row === undefined ? undefined : row[Object.keys(row)[0]]);
  return {
    name: "node:sqlite",
    version: `Node ${process.version} (SQLite ${first(db.prepare("SELECT sqlite_version()").get())})`,
    exec: (sql) => db.exec(sql),
    prepare(sql, pluck) {
      const s = db.prepare(sql);
      if (!pluck) return { run: (...p) => s.run(...p), get: (...p) => s.get(...p), all: (...p) => s.all(...p) };
      return { run: (...p) => s.run(...p), get: (...p) => first(s.get(...p)), all: (...p) => s.all(...p).map(first) };
    },
    close: () => db.close(),
  };
}

// ------------------------------------------------------------------ the run store's schema and statements

// The file's schema is the store's own (the store creates it), and so are the statements that write: core's
// WRITE_SQL, from the module loadRunStore builds. Only the few reads below are spelled here.
const RUN_COLUMNS = "run_id, tenant_id, state, doc, request_hash, deadline_at, created_at";
const NODE_RUN_COLUMNS =
  "node_run_id, run_id, parent_node_run_id, state, doc, attempt, available_at, lease_owner, lease_expires_at, " +
  "approval_id, idempotency_key, spec_hash, depth, created_at";

function prepareAll(db, sql) {
  return {
    upsertRun: db.prepare(sql.runs),
    upsertNodeRun: db.prepare(sql.nodeRuns),
    insertEvents: db.prepare(sql.events),
    runExists: db.prepare(`SELECT 1 FROM runs WHERE run_id = ?`, true),
    lastSeq: db.prepare(`SELECT coalesce(last_seq, seq) FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT 1`, true),
    getRun: db.prepare(`SELECT ${RUN_COLUMNS} FROM runs WHERE run_id = ?`),
    getNodeRun: db.prepare(`SELECT ${NODE_RUN_COLUMNS} FROM node_runs WHERE node_run_id = ?`),
    events: db.prepare(`SELECT last_seq, doc FROM events WHERE run_id = ? AND seq >= 0 ORDER BY seq LIMIT ?`),
    claim: db.prepare(sql.claim),
    begin: db.prepare("BEGIN IMMEDIATE"),
    commit: db.prepare("COMMIT"),
  };
}

// ------------------------------------------------------------------ one driver's workload

const TIME = "2026-11-25T12:00:00.000Z";
const INPUT = { city: "Oslo", note: "x".repeat(120) };

function runDoc(id, state) {
  return JSON.stringify({ run_id: id, state, root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: INPUT, created_at: TIME });
}
function nodeRunDoc(id, runId, state) {
  return JSON.stringify({ node_run_id: id, run_id: runId, state, node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, inputs: INPUT, attempt: 1 });
}

/**
 * A store's file and statements; `tick()` does one tick and answers how many rows it read back. The file is made by
 * the store itself (so its schema is the store's), then written through the raw driver with the store's statements:
 * each run's events of a transaction in one row, as the store writes them.
 */
async function workload(name, open, dir, mod) {
  const file = path.join(dir, `${name.replace(":", "-")}.db`);
  const db = open(file);
  if (!db) return undefined;
  await mod.openSqliteRunStore({ path: file, driver: name === "node:sqlite" ? "node" : "better-sqlite3", ...(name !== "node:sqlite" && BINDING ? { nativeBinding: BINDING } : {}) }).close();
  db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;");
  const s = prepareAll(db, mod.WRITE_SQL);
  let next = 0;
  let now = 1_000_000;
  let claimed = [];
  const seq = new Map();
  /** One row holding a run's events of this transaction, as the store writes them. */
  const events = (runId, list) => {
    let n = seq.get(runId);
    if (n === undefined) {
      if (s.runExists.get(runId) === undefined) throw new Error(`unknown run ${runId}`);
      const last = s.lastSeq.get(runId);
      n = last === undefined ? 0 : last + 1;
    }
    seq.set(runId, n + list.length);
    const docs = list.map(([nodeRunId, type], i) => ({ run_id: runId, seq: n + i, type, time: TIME, ...(nodeRunId ? { node_run_id: nodeRunId } : {}) }));
    s.insertEvents.run(runId, n, n + list.length - 1, list[0][0], list[0][1], TIME, JSON.stringify(docs));
  };
  function tick() {
    now += 1;
    const finished = claimed;
    s.begin.run();
    try {
      for (let i = 0; i < BATCH; i++) {
        const id = String(next++).padStart(10, "0");
        const runId = `run_${id}`;
        const nodeRunId = `nr_${id}`;
        s.upsertRun.run(runId, null, "running", runDoc(runId, "running"), "h", null, now, "demo.echo");
        s.upsertNodeRun.run(nodeRunId, runId, null, "queued", nodeRunDoc(nodeRunId, runId, "queued"), 1, now, null, null, null, null, null, 0, now);
        events(runId, [[null, "run_started"], [nodeRunId, "node_run_created"]]);
      }
      for (const n of finished) {
        s.upsertNodeRun.run(n.node_run_id, n.run_id, null, "completed", nodeRunDoc(n.node_run_id, n.run_id, "completed"), 1, n.available_at, null, null, null, null, null, 0, n.created_at);
        s.upsertRun.run(n.run_id, null, "completed", runDoc(n.run_id, "completed"), "h", null, n.created_at, "demo.echo");
        events(n.run_id, [[n.node_run_id, "node_run_completed"], [null, "run_completed"]]);
        seq.delete(n.run_id);
      }
      s.commit.run();
    } catch (err) {
      db.exec("ROLLBACK");
      throw err;
    }
    s.begin.run();
    claimed = s.claim.all({ owner: "c1", expires: now + 30_000, now, limit: BATCH });
    s.commit.run();
    let rows = claimed.length;
    for (const n of claimed) rows += s.getNodeRun.get(n.node_run_id) ? 1 : 0;
    for (const n of finished) {
      rows += s.getRun.get(n.run_id) ? 1 : 0;
      for (const row of s.events.all(n.run_id, 100)) rows += JSON.parse(row.doc).length;
    }
    return rows;
  }
  return { db, file, tick };
}

// ------------------------------------------------------------------ the same tick through the real SqliteRunStore

/**
 * Builds core's SqliteRunStore (and the SQLite face under it) from source with esbuild, into node_modules/.cache so
 * better-sqlite3 resolves from there as it does from core; undefined when esbuild is not installed.
 */
async function loadRunStore() {
  let esbuild;
  try {
    esbuild = await import("esbuild");
  } catch {
    return undefined;
  }
  const repo = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
  const outfile = path.join(repo, "node_modules/.cache/nodefabric-bench/sqlite-run-store.mjs");
  await esbuild.build({
    entryPoints: [path.join(repo, "core/src/store/sqlite-run-store.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile,
    external: ["better-sqlite3", "@nodefabric/schemas"],
    logLevel: "silent",
  });
  return import(`${outfile}?t=${Date.now()}`);
}

function storeWorkload(mod, name, driver, dir) {
  const options = { path: path.join(dir, `store-${name.replace(":", "-")}.db`), driver };
  if (driver === "better-sqlite3" && BINDING) options.nativeBinding = BINDING;
  const store = mod.openSqliteRunStore(options);
  let next = 0;
  let now = 1_000_000;
  let claimed = [];
  const ev = (run_id, node_run_id, type) => (node_run_id ? { run_id, node_run_id, type, time: TIME } : { run_id, type, time: TIME });
  async function tick() {
    now += 1;
    const finished = claimed;
    const runs = [];
    const nodeRuns = [];
    const events = [];
    for (let i = 0; i < BATCH; i++) {
      const id = String(next++).padStart(10, "0");
      const run_id = `run_${id}`;
      const node_run_id = `nr_${id}`;
      runs.push({ run_id, tenant_id: null, state: "running", run: JSON.parse(runDoc(run_id, "running")), request_hash: "h", deadline_at: null, created_at: now });
      nodeRuns.push({ node_run_id, run_id, parent_node_run_id: null, state: "queued", node_run: JSON.parse(nodeRunDoc(node_run_id, run_id, "queued")), attempt: 1, available_at: now, lease_owner: null, lease_expires_at: null, approval_id: null, idempotency_key: null, spec_hash: null, depth: 0, created_at: now });
      events.push(ev(run_id, undefined, "run_started"), ev(run_id, node_run_id, "node_run_created"));
    }
    for (const n of finished) {
      nodeRuns.push({ ...n, state: "completed", node_run: JSON.parse(nodeRunDoc(n.node_run_id, n.run_id, "completed")), lease_owner: null, lease_expires_at: null });
      runs.push({ run_id: n.run_id, tenant_id: null, state: "completed", run: JSON.parse(runDoc(n.run_id, "completed")), request_hash: "h", deadline_at: null, created_at: n.created_at });
      events.push(ev(n.run_id, n.node_run_id, "node_run_completed"), ev(n.run_id, undefined, "run_completed"));
    }
    await store.apply({ runs, nodeRuns, events });
    claimed = await store.claim({ owner: "c1", now, limit: BATCH, leaseMs: 30_000 });
    let rows = claimed.length;
    for (const n of claimed) rows += (await store.getNodeRun(n.node_run_id)) ? 1 : 0;
    for (const n of finished) {
      rows += (await store.getRun(n.run_id)) ? 1 : 0;
      rows += (await store.listEvents(n.run_id, -1, 100)).length;
    }
    return rows;
  }
  return { tick, close: () => store.close(), driver: store.driver };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Warm-up, then rounds interleaved so drift on a shared machine hits both drivers alike; one result per driver. */
async function measure(level, drivers) {
  for (const d of drivers) for (let i = 0; i < Math.min(100, TICKS); i++) await d.tick();
  for (const d of drivers) d.ticksPerS = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (const d of r % 2 ? [...drivers].reverse() : drivers) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < TICKS; i++) await d.tick();
      const us = Number(process.hrtime.bigint() - t0) / 1000;
      d.ticksPerS.push((TICKS * 1e6) / us);
    }
  }
  const results = drivers.map((d) => ({
    level,
    driver: d.name,
    version: d.version,
    node: process.version,
    rounds: ROUNDS,
    ticks_per_round: TICKS,
    batch: BATCH,
    ticks_per_s: Math.round(median(d.ticksPerS)),
    us_per_tick: Math.round(1e7 / median(d.ticksPerS)) / 10,
    // Per tick: BATCH runs created and BATCH finished, each with 2 upserts and one row of 2 events.
    rows_written_per_s: Math.round(median(d.ticksPerS) * BATCH * 6),
  }));
  for (const r of results) console.log(JSON.stringify(r));
  const b = drivers.find((d) => d.name === "better-sqlite3");
  const n = drivers.find((d) => d.name === "node:sqlite");
  let ratio;
  if (b && n) {
    // Each round's pair, then the median of those: the fairest ratio when the machine's speed drifts.
    ratio = Math.round(median(n.ticksPerS.map((x, i) => x / b.ticksPerS[i])) * 100) / 100;
    console.log(JSON.stringify({ level, ratio_node_sqlite_over_better_sqlite3: ratio }));
  }
  return { results, ratio };
}

// ------------------------------------------------------------------ main

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-sqlite-bench-"));
const table = [];
try {
  const mod = await loadRunStore();
  if (!mod) throw new Error("esbuild is not installed: both levels need core's SqliteRunStore, built from source with it");
  const raw = [];
  for (const [name, open] of [["better-sqlite3", openBetter], ["node:sqlite", openNode]]) {
    let w;
    try {
      w = await workload(name, open, dir, mod);
    } catch (err) {
      console.error(`${name}: not measured: ${err.message.split("\n")[0]}`);
      continue;
    }
    if (!w) {
      console.error(`${name}: not measured: Node ${process.version} has no node:sqlite`);
      continue;
    }
    raw.push({ name, version: w.db.version, tick: w.tick, close: () => w.db.close() });
  }
  table.push(await measure("statements", raw));
  for (const d of raw) d.close();

  const stores = [];
  for (const d of raw) {
    const w = storeWorkload(mod, d.name, d.name === "node:sqlite" ? "node" : "better-sqlite3", dir);
    stores.push({ name: d.name, version: d.version, tick: w.tick, close: w.close });
  }
  table.push(await measure("SqliteRunStore", stores));
  for (const d of stores) await d.close();

  console.log("\n| Level | Driver | Version | ticks/s | µs per tick | rows written/s |\n|---|---|---|---|---|---|");
  for (const { results } of table) {
    for (const r of results) console.log(`| ${r.level} | ${r.driver} | ${r.version} | ${r.ticks_per_s} | ${r.us_per_tick} | ${r.rows_written_per_s} |`);
  }
  console.log("");
  for (const { results, ratio } of table) {
    if (ratio !== undefined) console.log(`${results[0].level}: node:sqlite / better-sqlite3 (ticks/s, median of per-round ratios): ${ratio}`);
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
