/**
 * The embedded store's hot path on both SQLite drivers: better-sqlite3 and Node's own node:sqlite (Node >= 22.13).
 *
 * One "tick" is what the coordinator's TickWriter and engine do per event-loop turn under load, with the run store's
 * own schema and statements (core/src/store/sqlite-run-store.ts):
 *   - one IMMEDIATE transaction that creates BATCH runs (run + root NodeRun upserts, run_started + node_run_created
 *     events, each with the run-exists and last-seq lookups a run's first batch does), moves the BATCH NodeRuns
 *     claimed last tick to completed (NodeRun + run upserts, two events each);
 *   - the claim: one UPDATE … RETURNING in its own IMMEDIATE transaction;
 *   - the reads of a follower: getRun and listEvents per finished run, getNodeRun per claimed NodeRun.
 * Both drivers run the same statements on a real file each, WAL mode, synchronous=NORMAL, busy_timeout=5000 (as
 * openSqlite sets), rounds interleaved, and the medians and the ratio node:sqlite / better-sqlite3 come from the
 * same run.
 *
 *   node test/bench/sqlite-drivers.mjs [--rounds 7] [--ticks 400] [--batch 32] [--better-sqlite3-binding FILE]
 *
 * --better-sqlite3-binding (or $BETTER_SQLITE3_BINDING) names a better_sqlite3.node built for the running Node, when
 * the one in node_modules was built for another (.ci/node.sh builds one into its cache).
 * Prints one JSON line per driver and one for the ratio, then a markdown table.
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

const OPEN_NODE_RUN = `state IN ('queued', 'assigned', 'running')`;
const SCHEMA = `
  CREATE TABLE runs (run_id TEXT PRIMARY KEY, tenant_id TEXT, state TEXT NOT NULL, doc TEXT NOT NULL,
    request_hash TEXT NOT NULL, deadline_at INTEGER, created_at INTEGER NOT NULL);
  CREATE INDEX runs_by_tenant ON runs (tenant_id, run_id);
  CREATE INDEX runs_by_state ON runs (state, run_id);
  CREATE TABLE node_runs (node_run_id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs (run_id),
    parent_node_run_id TEXT, state TEXT NOT NULL, doc TEXT NOT NULL, attempt INTEGER NOT NULL,
    available_at INTEGER NOT NULL, lease_owner TEXT, lease_expires_at INTEGER, approval_id TEXT, idempotency_key TEXT,
    spec_hash TEXT, depth INTEGER NOT NULL, created_at INTEGER NOT NULL);
  CREATE INDEX node_runs_by_run ON node_runs (run_id, created_at, node_run_id);
  CREATE UNIQUE INDEX node_runs_idempotency ON node_runs (run_id, parent_node_run_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
  CREATE INDEX node_runs_unleased ON node_runs (created_at, node_run_id)
    WHERE lease_owner IS NULL AND approval_id IS NULL AND ${OPEN_NODE_RUN};
  CREATE INDEX node_runs_leased ON node_runs (lease_expires_at) WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN};
  CREATE TABLE events (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, seq INTEGER NOT NULL, node_run_id TEXT,
    type TEXT NOT NULL, time TEXT NOT NULL, doc TEXT NOT NULL);
  CREATE UNIQUE INDEX events_by_run ON events (run_id, seq);`;
const RUN_COLUMNS = "run_id, tenant_id, state, doc, request_hash, deadline_at, created_at";
const NODE_RUN_COLUMNS =
  "node_run_id, run_id, parent_node_run_id, state, doc, attempt, available_at, lease_owner, lease_expires_at, " +
  "approval_id, idempotency_key, spec_hash, depth, created_at";

function prepareAll(db) {
  return {
    upsertRun: db.prepare(`INSERT INTO runs (${RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, doc = excluded.doc, deadline_at = excluded.deadline_at`),
    upsertNodeRun: db.prepare(`INSERT INTO node_runs (${NODE_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (node_run_id) DO UPDATE SET state = excluded.state, doc = excluded.doc, attempt = excluded.attempt,
        available_at = excluded.available_at, lease_owner = excluded.lease_owner,
        lease_expires_at = excluded.lease_expires_at, approval_id = excluded.approval_id`),
    runExists: db.prepare(`SELECT 1 FROM runs WHERE run_id = ?`, true),
    lastSeq: db.prepare(`SELECT seq FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT 1`, true),
    insertEvent: db.prepare(`INSERT INTO events (run_id, seq, node_run_id, type, time, doc) VALUES (?, ?, ?, ?, ?, ?)`),
    getRun: db.prepare(`SELECT ${RUN_COLUMNS} FROM runs WHERE run_id = ?`),
    getNodeRun: db.prepare(`SELECT ${NODE_RUN_COLUMNS} FROM node_runs WHERE node_run_id = ?`),
    events: db.prepare(`SELECT doc FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`, true),
    claim: db.prepare(`UPDATE node_runs SET lease_owner = @owner, lease_expires_at = @expires
      WHERE node_run_id IN (
        SELECT node_run_id FROM (
          SELECT node_run_id, created_at FROM (
            SELECT node_run_id, created_at FROM node_runs
            WHERE lease_owner IS NULL AND approval_id IS NULL AND ${OPEN_NODE_RUN} AND available_at <= @now
            ORDER BY created_at, node_run_id LIMIT @limit)
          UNION ALL
          SELECT node_run_id, created_at FROM (
            SELECT node_run_id, created_at FROM node_runs
            WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN} AND lease_expires_at < @now
              AND approval_id IS NULL AND available_at <= @now
            ORDER BY created_at, node_run_id LIMIT @limit))
        ORDER BY created_at, node_run_id LIMIT @limit)
      RETURNING ${NODE_RUN_COLUMNS}`),
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

/** A store's file and statements; `tick()` does one tick and answers how many rows it read back. */
function workload(name, open, dir) {
  const file = path.join(dir, `${name.replace(":", "-")}.db`);
  const db = open(file);
  if (!db) return undefined;
  db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;");
  db.exec(SCHEMA);
  const s = prepareAll(db);
  let next = 0;
  let now = 1_000_000;
  let claimed = [];
  const seq = new Map();
  const event = (runId, nodeRunId, type) => {
    let n = seq.get(runId);
    if (n === undefined) {
      if (s.runExists.get(runId) === undefined) throw new Error(`unknown run ${runId}`);
      const last = s.lastSeq.get(runId);
      n = last === undefined ? 0 : last + 1;
    }
    seq.set(runId, n + 1);
    s.insertEvent.run(runId, n, nodeRunId, type, TIME, JSON.stringify({ run_id: runId, seq: n, type, time: TIME, node_run_id: nodeRunId }));
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
        s.upsertRun.run(runId, null, "running", runDoc(runId, "running"), "h", null, now);
        s.upsertNodeRun.run(nodeRunId, runId, null, "queued", nodeRunDoc(nodeRunId, runId, "queued"), 1, now, null, null, null, null, null, 0, now);
        event(runId, null, "run_started");
        event(runId, nodeRunId, "node_run_created");
      }
      for (const n of finished) {
        s.upsertNodeRun.run(n.node_run_id, n.run_id, null, "completed", nodeRunDoc(n.node_run_id, n.run_id, "completed"), 1, n.available_at, null, null, null, null, null, 0, n.created_at);
        s.upsertRun.run(n.run_id, null, "completed", runDoc(n.run_id, "completed"), "h", null, n.created_at);
        event(n.run_id, n.node_run_id, "node_run_completed");
        event(n.run_id, null, "run_completed");
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
      rows += s.events.all(n.run_id, -1, 100).length;
    }
    return rows;
  }
  return { db, file, tick };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// ------------------------------------------------------------------ main

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-sqlite-bench-"));
try {
  const drivers = [];
  for (const [name, open] of [["better-sqlite3", openBetter], ["node:sqlite", openNode]]) {
    let w;
    try {
      w = workload(name, open, dir);
    } catch (err) {
      console.error(`${name}: not measured: ${err.message.split("\n")[0]}`);
      continue;
    }
    if (!w) {
      console.error(`${name}: not measured: Node ${process.version} has no node:sqlite`);
      continue;
    }
    drivers.push({ name, version: w.db.version, w, ticksPerS: [], usPerTick: [] });
  }
  // Warm-up, then rounds interleaved so drift on a shared machine hits both drivers alike.
  for (const d of drivers) for (let i = 0; i < Math.min(100, TICKS); i++) d.w.tick();
  for (let r = 0; r < ROUNDS; r++) {
    for (const d of r % 2 ? [...drivers].reverse() : drivers) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < TICKS; i++) d.w.tick();
      const us = Number(process.hrtime.bigint() - t0) / 1000;
      d.usPerTick.push(us / TICKS);
      d.ticksPerS.push((TICKS * 1e6) / us);
    }
  }
  const results = drivers.map((d) => ({
    driver: d.name,
    version: d.version,
    node: process.version,
    rounds: ROUNDS,
    ticks_per_round: TICKS,
    batch: BATCH,
    ticks_per_s: Math.round(median(d.ticksPerS)),
    us_per_tick: Math.round(median(d.usPerTick) * 10) / 10,
    // Per tick: BATCH runs created and BATCH finished, so rows written = 2 upserts + 2 events for each.
    rows_written_per_s: Math.round(median(d.ticksPerS) * BATCH * 8),
  }));
  for (const r of results) console.log(JSON.stringify(r));
  const [better, node] = ["better-sqlite3", "node:sqlite"].map((n) => results.find((r) => r.driver === n));
  let ratio;
  if (better && node) {
    // Each round's pair, then the median of those: the fairest ratio when the machine's speed drifts.
    const b = drivers.find((d) => d.name === "better-sqlite3");
    const n = drivers.find((d) => d.name === "node:sqlite");
    ratio = Math.round(median(n.ticksPerS.map((x, i) => x / b.ticksPerS[i])) * 100) / 100;
    console.log(JSON.stringify({ ratio_node_sqlite_over_better_sqlite3: ratio }));
  }
  console.log("\n| Driver | Version | ticks/s | µs per tick | rows written/s |\n|---|---|---|---|---|");
  for (const r of results) console.log(`| ${r.driver} | ${r.version} | ${r.ticks_per_s} | ${r.us_per_tick} | ${r.rows_written_per_s} |`);
  if (ratio !== undefined) console.log(`\nnode:sqlite / better-sqlite3 (ticks/s, median of per-round ratios): ${ratio}`);
  for (const d of drivers) d.w.db.close();
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
