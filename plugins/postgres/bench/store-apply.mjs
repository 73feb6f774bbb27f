/**
 * The PostgreSQL RunStore's hot path on the real server, through the store itself (the built package):
 *
 *   npm run build -w @nodefabric/core -w @nodefabric/plugin-postgres
 *   node plugins/postgres/bench/store-apply.mjs [--url postgres://postgres@127.0.0.1:5432/test] [--ticks 40] [--rounds 5]
 *
 * A tick is one apply() of 64 runs, each with one NodeRun and 3 events (64 + 64 + 192 = 320 rows), as a coordinator's
 * batch of one engine tick: "create" ticks insert new runs; "progress" ticks then upsert the same 64 runs and NodeRuns
 * with 3 more events each. Both run attached (fenced, with commit notices, as several coordinators run) and detached
 * (the single-coordinator use). The claim is one claim() of 512 from a backlog of queued NodeRuns. Each figure is the
 * median of `rounds` rounds; every round works in a fresh scratch schema, dropped at the end.
 */
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { openPgRunStore } from "../dist/index.js";

const { values: opts } = parseArgs({
  options: {
    url: { type: "string", default: process.env.FABRIC_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test" },
    ticks: { type: "string", default: "40" },
    rounds: { type: "string", default: "5" },
    runs: { type: "string", default: "64" },
    claim: { type: "string", default: "512" },
    help: { type: "boolean", default: false },
  },
});
if (opts.help) {
  console.log("node plugins/postgres/bench/store-apply.mjs [--url <postgres url>] [--ticks per round] [--rounds] [--runs per tick] [--claim k]");
  process.exit(0);
}
const TICKS = Number(opts.ticks);
const ROUNDS = Number(opts.rounds);
const RUNS = Number(opts.runs);
const CLAIM = Number(opts.claim);
const T0 = Date.UTC(2026, 0, 1, 12);
const iso = (ms) => new Date(ms).toISOString();

let counter = 0;
const id = (prefix) => `${prefix}_${(counter++).toString(36).padStart(8, "0")}${randomBytes(4).toString("hex")}`;

function run() {
  const run_id = id("run");
  return {
    run_id,
    tenant_id: null,
    state: "running",
    request_hash: `sha256:${run_id}`,
    deadline_at: null,
    created_at: T0,
    run: { run_id, state: "running", root_node_run_id: `nr_root_${run_id}`, run_context: {}, started_at: iso(T0) },
  };
}

function nodeRun(r, state = "queued") {
  const node_run_id = r.run.root_node_run_id;
  return {
    node_run_id,
    run_id: r.run_id,
    parent_node_run_id: null,
    state,
    attempt: 1,
    available_at: T0,
    lease_owner: null,
    lease_expires_at: null,
    approval_id: null,
    idempotency_key: null,
    spec_hash: null,
    depth: 0,
    created_at: T0,
    node_run: {
      node_run_id,
      run_id: r.run_id,
      node_type_ref: { node_type_id: "bench.echo", version: "1.0.0" },
      state,
      kind: "atomic",
      created_at: iso(T0),
      inputs: { message: "hello", nested: { list: [1, 2, 3], flag: true } },
    },
  };
}

const events = (r) =>
  ["node_run_created", "policy_decided", "node_run_started"].map((type) => ({
    run_id: r.run_id,
    node_run_id: r.run.root_node_run_id,
    type,
    time: iso(T0),
    data: { note: "bench" },
  }));

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const admin = new pg.Client({ connectionString: opts.url });
await admin.connect();

async function withStore(attached, work) {
  const schema = `nf_bench_${randomBytes(6).toString("hex")}`;
  const url = new URL(opts.url);
  url.searchParams.set("schema", schema);
  const store = await openPgRunStore(url, { poolSize: 4, dataDir: "/tmp", service: "run-coordinator" });
  if (attached) store.attach("bench-coordinator", 60_000);
  try {
    return await work(store);
  } finally {
    await store.close();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  }
}

/** One round of ticks: TICKS create ticks of fresh runs, then TICKS progress ticks over the runs of the first. */
async function applyRound(attached) {
  return withStore(attached, async (store) => {
    const created = [];
    let t = performance.now();
    for (let i = 0; i < TICKS; i++) {
      const runs = Array.from({ length: RUNS }, run);
      await store.apply({ runs, nodeRuns: runs.map((r) => nodeRun(r)), events: runs.flatMap(events) });
      if (i === 0) created.push(...runs);
    }
    const createMs = performance.now() - t;
    t = performance.now();
    for (let i = 0; i < TICKS; i++) {
      await store.apply({ runs: created, nodeRuns: created.map((r) => nodeRun(r, "running")), events: created.flatMap(events) });
    }
    const progressMs = performance.now() - t;
    return { create: (TICKS * 1000) / createMs, progress: (TICKS * 1000) / progressMs };
  });
}

/** One round of claims: a backlog of 4 x CLAIM queued NodeRuns, claimed CLAIM at a time until none is left. */
async function claimRound(attached) {
  return withStore(attached, async (store) => {
    for (let i = 0; i < (4 * CLAIM) / RUNS; i++) {
      const runs = Array.from({ length: RUNS }, run);
      await store.apply({ runs, nodeRuns: runs.map((r) => nodeRun(r)) });
    }
    const times = [];
    for (;;) {
      const t = performance.now();
      const got = await store.claim({ owner: "bench-coordinator", now: T0 + 1, limit: CLAIM, leaseMs: 60_000 });
      if (got.length === 0) break;
      if (got.length !== CLAIM) throw new Error(`claimed ${got.length}, expected ${CLAIM}`);
      times.push(performance.now() - t);
    }
    return median(times);
  });
}

const rowsPerTick = RUNS * 5;
const results = { attached: [], detached: [], claimAttached: [], claimDetached: [] };
for (let round = 0; round < ROUNDS; round++) {
  // Alternate which mode goes first, so warm-up and drift fall on both.
  const order = round % 2 === 0 ? [true, false] : [false, true];
  for (const attached of order) results[attached ? "attached" : "detached"].push(await applyRound(attached));
  for (const attached of order) results[attached ? "claimAttached" : "claimDetached"].push(await claimRound(attached));
}

const line = (name, xs) => {
  const create = median(xs.map((x) => x.create));
  const progress = median(xs.map((x) => x.progress));
  return `| ${name} | ${create.toFixed(0)} | ${(create * rowsPerTick).toFixed(0)} | ${progress.toFixed(0)} | ${(progress * rowsPerTick).toFixed(0)} |`;
};
const { rows } = await admin.query("SELECT version() AS v");
console.log(`apply(): ${RUNS} runs + ${RUNS} NodeRuns + ${3 * RUNS} events per tick (${rowsPerTick} rows), ${TICKS} ticks per round, median of ${ROUNDS} rounds`);
console.log(`${rows[0].v.split(" on ")[0]}, Node ${process.versions.node}\n`);
console.log("| mode | create ticks/s | create rows/s | progress ticks/s | progress rows/s |");
console.log("| --- | --- | --- | --- | --- |");
console.log(line("attached (fenced, notices)", results.attached));
console.log(line("detached", results.detached));
console.log(`\nclaim() of ${CLAIM} from a backlog of ${4 * CLAIM}, median of ${ROUNDS} rounds (each the median of 4 claims):\n`);
console.log("| mode | ms per claim | node runs/s |");
console.log("| --- | --- | --- |");
for (const [name, xs] of [["attached", results.claimAttached], ["detached", results.claimDetached]]) {
  const ms = median(xs);
  console.log(`| ${name} | ${ms.toFixed(1)} | ${((CLAIM * 1000) / ms).toFixed(0)} |`);
}
await admin.end();
