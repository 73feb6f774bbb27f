/**
 * pg against postgres (porsager) on the PostgreSQL store's hot path, in one run, so the driver is chosen by figures.
 *
 *   node plugins/postgres/bench/drivers.mjs [--url postgres://postgres@127.0.0.1:5432/test] [--rows 20] [--ticks 300]
 *                                           [--rounds 7] [--claim 10] [--runs 64] [--concurrency 1]
 *
 * A tick is what a coordinator does per batch: one transaction that takes the next `rows` seqs of a run from its
 * counter row, inserts `rows` events (run_id, seq, type, payload jsonb, at) and upserts `rows` node runs
 * (INSERT … ON CONFLICT DO UPDATE), both as one batched multi-row INSERT over unnest(); then the claim (`SELECT … FOR
 * UPDATE SKIP LOCKED LIMIT k` and the UPDATE that leases what it got, one statement); then a read of the run's node
 * runs by run id. Both drivers send the same SQL text with the same parameters, as prepared statements, through a pool.
 * Rounds alternate which driver goes first; the table shows the medians over rounds of ticks/s and of the median µs
 * per tick, and the ratio postgres/pg. Everything lives in a scratch schema, dropped at the end.
 *
 * Both drivers are devDependencies of @nodefabric/plugin-postgres, so this runs from a clone after `npm install`.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import pg from "pg";
import postgres from "postgres";

const { values: opts } = parseArgs({
  options: {
    url: { type: "string", default: process.env.FABRIC_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test" },
    rows: { type: "string", default: "20" },
    ticks: { type: "string", default: "300" },
    rounds: { type: "string", default: "7" },
    claim: { type: "string", default: "10" },
    runs: { type: "string", default: "64" },
    concurrency: { type: "string", default: "1" },
    help: { type: "boolean", default: false },
  },
});
if (opts.help) {
  console.log(
    "node plugins/postgres/bench/drivers.mjs [--url <postgres url>] [--rows N events and node runs per tick] [--ticks per round]\n" +
      "  [--rounds] [--claim k per claim] [--runs distinct runs] [--concurrency workers per driver]",
  );
  process.exit(0);
}
const int = (name) => {
  const n = Number(opts[name]);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`--${name} must be a whole number of at least 1, not ${JSON.stringify(opts[name])}`);
    process.exit(2);
  }
  return n;
};
const ROWS = int("rows");
const TICKS = int("ticks");
const ROUNDS = int("rounds");
const CLAIM = int("claim");
const RUNS = int("runs");
const CONCURRENCY = int("concurrency");
const SCHEMA = `nf_bench_drivers_${process.pid}`;
const POOL = Math.max(2, CONCURRENCY);

// The tables as the plugin's first migration has them, cut to the columns the hot path touches.
const SETUP = `
  CREATE SCHEMA ${SCHEMA};
  SET search_path TO ${SCHEMA};
  CREATE TABLE runs (run_id text PRIMARY KEY, state text NOT NULL, last_seq bigint NOT NULL DEFAULT 0);
  CREATE TABLE events (
    run_id text NOT NULL, seq bigint NOT NULL, node_run_id text, type text NOT NULL, payload jsonb NOT NULL,
    at timestamptz NOT NULL, PRIMARY KEY (run_id, seq));
  CREATE TABLE node_runs (
    node_run_id text PRIMARY KEY, run_id text NOT NULL, state text NOT NULL, doc jsonb NOT NULL,
    attempt integer NOT NULL, available_at timestamptz NOT NULL, lease_owner text, lease_expires_at timestamptz,
    lease_epoch bigint NOT NULL DEFAULT 0, created_at timestamptz NOT NULL);
  CREATE INDEX node_runs_by_run ON node_runs (run_id, created_at, node_run_id);
  CREATE INDEX node_runs_unleased ON node_runs (created_at, node_run_id)
    WHERE lease_owner IS NULL AND state IN ('queued', 'assigned', 'running');
  INSERT INTO runs (run_id, state) SELECT 'run-' || i, 'running' FROM generate_series(0, ${RUNS - 1}) i;`;

const NEXT_SEQ = `UPDATE runs SET last_seq = last_seq + $2 WHERE run_id = $1 RETURNING last_seq`;
const INSERT_EVENTS = `
  INSERT INTO events (run_id, seq, node_run_id, type, payload, at)
  SELECT $1::text, s, n, t, p::jsonb, a::timestamptz FROM unnest($2::int8[], $3::text[], $4::text[], $5::text[], $6::text[]) AS u(s, n, t, p, a)`;
const UPSERT_NODE_RUNS = `
  INSERT INTO node_runs (node_run_id, run_id, state, doc, attempt, available_at, created_at)
  SELECT n, $1::text, 'queued', d::jsonb, 1, now(), now() FROM unnest($2::text[], $3::text[]) AS u(n, d)
  ON CONFLICT (node_run_id) DO UPDATE
    SET state = excluded.state, doc = excluded.doc, attempt = node_runs.attempt + 1, lease_owner = NULL, lease_expires_at = NULL`;
const CLAIM_SQL = `
  UPDATE node_runs SET lease_owner = $1, lease_expires_at = now() + interval '30 seconds', lease_epoch = lease_epoch + 1, state = 'assigned'
  WHERE node_run_id IN (
    SELECT node_run_id FROM node_runs
    WHERE lease_owner IS NULL AND state IN ('queued', 'assigned', 'running') AND available_at <= now()
    ORDER BY created_at, node_run_id LIMIT $2 FOR UPDATE SKIP LOCKED)
  RETURNING node_run_id, lease_epoch`;
const READ_RUN = `SELECT node_run_id, state, doc, attempt, lease_epoch FROM node_runs WHERE run_id = $1 ORDER BY created_at, node_run_id`;

/** The parameters of tick `t` of worker `w`: which run, and its batch of events and node runs. */
function batch(w, t) {
  const run = `run-${(t * CONCURRENCY + w) % RUNS}`;
  const nodeRuns = [];
  const docs = [];
  const types = [];
  const payloads = [];
  const times = [];
  const at = new Date().toISOString();
  for (let i = 0; i < ROWS; i++) {
    const id = `${run}-nr-${i}`;
    nodeRuns.push(id);
    docs.push(JSON.stringify({ node_run_id: id, run_id: run, state: "queued", node_type: { node_type_id: "demo.echo", version: "1.0.0" }, input: { i, t } }));
    types.push("node_run_state_changed");
    payloads.push(JSON.stringify({ node_run_id: id, from: "running", to: "queued", attempt: t, output: { ok: true, i } }));
    times.push(at);
  }
  return { run, nodeRuns, docs, types, payloads, times };
}

const seqs = (last) => Array.from({ length: ROWS }, (_, i) => last - ROWS + 1 + i);

/** The two drivers behind one shape: open, one tick, close. Same SQL and parameters; prepared statements in both. */
const drivers = {
  pg: {
    open() {
      return new pg.Pool({ connectionString: opts.url, max: POOL, options: `-c search_path=${SCHEMA}` });
    },
    async tick(pool, w, t) {
      const b = batch(w, t);
      const c = await pool.connect();
      try {
        await c.query("BEGIN");
        const [{ last_seq }] = (await c.query({ name: "next_seq", text: NEXT_SEQ, values: [b.run, ROWS] })).rows;
        await c.query({ name: "insert_events", text: INSERT_EVENTS, values: [b.run, seqs(Number(last_seq)), b.nodeRuns, b.types, b.payloads, b.times] });
        await c.query({ name: "upsert_node_runs", text: UPSERT_NODE_RUNS, values: [b.run, b.nodeRuns, b.docs] });
        await c.query("COMMIT");
      } catch (err) {
        await c.query("ROLLBACK").catch(() => {});
        throw err;
      } finally {
        c.release();
      }
      await pool.query({ name: "claim", text: CLAIM_SQL, values: [`bench-${w}`, CLAIM] });
      const read = await pool.query({ name: "read_run", text: READ_RUN, values: [b.run] });
      if (read.rows.length !== ROWS) throw new Error(`pg read ${read.rows.length} node runs of ${b.run}, expected ${ROWS}`);
    },
    close: (pool) => pool.end(),
  },
  postgres: {
    open() {
      return postgres(opts.url, { max: POOL, prepare: true, onnotice: () => {}, connection: { search_path: SCHEMA } });
    },
    async tick(sql, w, t) {
      const b = batch(w, t);
      await sql.begin(async (tx) => {
        const [{ last_seq }] = await tx.unsafe(NEXT_SEQ, [b.run, ROWS], { prepare: true });
        await tx.unsafe(INSERT_EVENTS, [b.run, seqs(Number(last_seq)), b.nodeRuns, b.types, b.payloads, b.times], { prepare: true });
        await tx.unsafe(UPSERT_NODE_RUNS, [b.run, b.nodeRuns, b.docs], { prepare: true });
      });
      await sql.unsafe(CLAIM_SQL, [`bench-${w}`, CLAIM], { prepare: true });
      const read = await sql.unsafe(READ_RUN, [b.run], { prepare: true });
      if (read.length !== ROWS) throw new Error(`postgres read ${read.length} node runs of ${b.run}, expected ${ROWS}`);
    },
    close: (sql) => sql.end({ timeout: 5 }),
  },
};

/** The installed version of a package (postgres does not export its package.json). */
function versionOf(name) {
  let dir = path.dirname(createRequire(import.meta.url).resolve(name));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
      if (pkg.name === name) return pkg.version;
    } catch {}
    const up = path.dirname(dir);
    if (up === dir) return "?";
    dir = up;
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** One round of one driver: CONCURRENCY workers, TICKS ticks each; ticks/s overall and the median µs of one tick. */
async function round(name, handle, offset) {
  const d = drivers[name];
  const durations = [];
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, w) => {
      for (let t = 0; t < TICKS; t++) {
        const t0 = performance.now();
        await d.tick(handle, w, offset + t);
        durations.push((performance.now() - t0) * 1000);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  return { ticksPerSecond: (TICKS * CONCURRENCY) / seconds, usPerTick: median(durations) };
}

const admin = new pg.Client({ connectionString: opts.url });
await admin.connect();
try {
  await admin.query(SETUP);
  const handles = { pg: drivers.pg.open(), postgres: drivers.postgres.open() };
  const results = { pg: [], postgres: [] };
  try {
    // Warm-up: connections opened, statements prepared, the node runs of every run created.
    for (const name of ["pg", "postgres"]) for (let t = 0; t < RUNS; t++) await drivers[name].tick(handles[name], 0, t);
    let offset = RUNS;
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? ["pg", "postgres"] : ["postgres", "pg"];
      for (const name of order) {
        results[name].push(await round(name, handles[name], offset));
        offset += TICKS;
      }
    }
  } finally {
    await drivers.pg.close(handles.pg);
    await drivers.postgres.close(handles.postgres);
  }

  // The invariant the store relies on, checked after both drivers wrote: every run's seqs are 1..last_seq, no gaps.
  const { rows: gaps } = await admin.query(
    `SELECT r.run_id FROM ${SCHEMA}.runs r LEFT JOIN ${SCHEMA}.events e USING (run_id)
     GROUP BY r.run_id, r.last_seq HAVING count(e.seq) <> r.last_seq OR coalesce(max(e.seq), 0) <> r.last_seq`,
  );
  if (gaps.length) throw new Error(`seq gaps in ${gaps.length} runs, e.g. ${gaps[0].run_id}`);

  const { rows: [{ server_version: server }] } = await admin.query("SHOW server_version");
  const pgVersion = versionOf("pg");
  const postgresVersion = versionOf("postgres");
  const summary = Object.fromEntries(
    ["pg", "postgres"].map((n) => [n, { ticks: median(results[n].map((x) => x.ticksPerSecond)), us: median(results[n].map((x) => x.usPerTick)) }]),
  );
  console.log(
    `PostgreSQL ${server}, Node ${process.version}; ${ROUNDS} rounds x ${TICKS} ticks x ${CONCURRENCY} worker(s), ` +
      `${ROWS} events + ${ROWS} node-run upserts per tick, claim ${CLAIM}, read by run id; pool ${POOL}`,
  );
  const line = (cells) => console.log(cells.map((c, i) => String(c).padStart(i === 0 ? 0 : 14).padEnd(i === 0 ? 22 : 0)).join(""));
  line(["driver", "ticks/s", "µs/tick", "rows/s"]);
  line([`pg ${pgVersion}`, summary.pg.ticks.toFixed(0), summary.pg.us.toFixed(0), (summary.pg.ticks * ROWS * 2).toFixed(0)]);
  line([`postgres ${postgresVersion}`, summary.postgres.ticks.toFixed(0), summary.postgres.us.toFixed(0), (summary.postgres.ticks * ROWS * 2).toFixed(0)]);
  line(["postgres / pg", (summary.postgres.ticks / summary.pg.ticks).toFixed(2) + "x", (summary.postgres.us / summary.pg.us).toFixed(2) + "x", ""]);
  console.log(
    "per round ticks/s: pg " + results.pg.map((x) => x.ticksPerSecond.toFixed(0)).join(" ") + "; postgres " + results.postgres.map((x) => x.ticksPerSecond.toFixed(0)).join(" "),
  );
} finally {
  await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).catch(() => {});
  await admin.end();
}
