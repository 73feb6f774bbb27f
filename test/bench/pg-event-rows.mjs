/**
 * What grouped event rows buy on PostgreSQL, measured where the bench's CPU figures cannot see: the database server.
 *
 *   npm run build && node test/bench/pg-event-rows.mjs [--runs 3000] [--rounds 3]
 *
 * Each round starts the whole fabric in this process on a fresh schema, once as a database of the release before
 * migration 4 leaves it (one row per event) and once as a new database (grouped rows), the two in alternating order,
 * and sends `runs` echo runs through the gateway (64 closed-loop clients, Prefer: wait, as atomic-throughput does)
 * after 1,000 to warm up. Over the measured load it reads the CPU time of this process and of the PostgreSQL backends
 * that serve this fabric's connections only (found by application_name in pg_stat_activity, their times in /proc),
 * so other users of a shared server do not count; and, afterwards, the event rows stored per run. The server must
 * run on this machine.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { loadConfig, loadPlugins, startFabric } from "../../core/dist/index.js";
import { MIGRATIONS, migrate } from "../../plugins/postgres/dist/index.js";
import { closedLoop, median } from "./load.mjs";
import { PG_URL, pgSchema, pgUnavailable } from "./split.mjs";

const { values: args } = parseArgs({ options: { runs: { type: "string", default: "3000" }, rounds: { type: "string", default: "3" } } });
const RUNS = Number(args.runs);
const ROUNDS = Number(args.rounds);
const repo = fileURLToPath(new URL("../..", import.meta.url));
const TICK_US = 1e6 / 100; // /proc times are in clock ticks of 1/100 s on Linux
const runBody = (i) => ({ root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: { i, text: "hello" } });

/** CPU ticks used so far by one process, 0 once it is gone. */
function ticksOf(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/** CPU ticks so far of each backend whose connection names `app`. */
async function backendTicks(admin, app) {
  const { rows } = await admin.query(`SELECT pid FROM pg_stat_activity WHERE application_name = $1`, [app]);
  return new Map(rows.map((r) => [r.pid, ticksOf(r.pid)]));
}

async function round(admin, mode) {
  const { schema, url, drop } = pgSchema("nf_rows");
  try {
    if (mode === "per-event") {
      // As the release before migration 4 left the database: this release then writes one row per event.
      const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
      try {
        await migrate(pool, { schema, migrations: MIGRATIONS.filter((m) => m.optIn === undefined) });
      } finally {
        await pool.end();
      }
    }
    const store = new URL(url);
    store.searchParams.set("application_name", schema);
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-rows-"));
    const flags = { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"], store: { url: store.toString() }, plugins: ["@nodefabric/plugin-postgres"] };
    const fabric = await startFabric(loadConfig({ cwd: repo, env: {}, flags }), undefined, { plugins: await loadPlugins({ plugins: ["@nodefabric/plugin-postgres"], cwd: repo }) });
    try {
      for (let i = 0; i < 200; i++) {
        const r = await fetch(`${fabric.urls["node-registry"]}/v1/executors?node_type_id=demo.upstream`);
        if ((await r.json()).length > 0) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const load = (total) =>
        closedLoop({ url: fabric.urls["run-gateway"], path: "/v1/runs", body: runBody, headers: { prefer: "wait=60" }, total, clients: 64, check: (b) => b.state === "completed" });
      await load(1000);
      const before = await backendTicks(admin, schema);
      const cpu0 = process.cpuUsage();
      const result = await load(RUNS);
      const cpu = process.cpuUsage(cpu0);
      const after = await backendTicks(admin, schema);
      let ticks = 0;
      for (const [pid, t] of after) ticks += t - (before.get(pid) ?? 0);
      const { rows } = await admin.query(`SELECT (SELECT count(*) FROM ${schema}.events)::float8 / (SELECT count(*) FROM ${schema}.runs) AS rows`);
      return {
        mode,
        per_second: result.per_second,
        fabric_cpu_us_per_run: Math.round((cpu.user + cpu.system) / RUNS),
        pg_cpu_us_per_run: Math.round((ticks * TICK_US) / RUNS),
        event_rows_per_run: rows[0].rows,
      };
    } finally {
      await fabric.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  } finally {
    await drop();
  }
}

const missing = await pgUnavailable();
if (missing) {
  process.stderr.write(`pg-event-rows: ${missing}\n`);
  process.exit(2);
}
const admin = new pg.Client({ connectionString: PG_URL });
await admin.connect();
const got = { "per-event": [], grouped: [] };
try {
  for (let r = 0; r < ROUNDS; r++) {
    // The side that goes first alternates, so a machine getting busier or quieter favours neither.
    for (const mode of r % 2 ? ["grouped", "per-event"] : ["per-event", "grouped"]) {
      const result = await round(admin, mode);
      got[mode].push(result);
      console.log(JSON.stringify({ round: r, ...result }));
    }
  }
} finally {
  await admin.end();
}
for (const [mode, results] of Object.entries(got)) {
  const keys = ["per_second", "fabric_cpu_us_per_run", "pg_cpu_us_per_run", "event_rows_per_run"];
  console.log(`${mode}: medians of ${results.length} ${JSON.stringify(Object.fromEntries(keys.map((k) => [k, median(results.map((x) => x[k]))])))}`);
}
process.exit(0);
