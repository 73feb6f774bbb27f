/**
 * Where the CPU of one run goes, on SQLite and on PostgreSQL, with every service in this process:
 *
 *   npm run build && node test/bench/cpu-per-run.mjs [--runs 3000] [--rounds 3]
 *
 * Each round sends `runs` echo runs through the gateway (64 closed-loop clients, Prefer: wait, as atomic-throughput
 * does) and reads, over the measured load only, the CPU time of this process (fabric and load generator) and of the
 * PostgreSQL server's processes (from /proc: the server must run on this machine). The one-hop floor runs in the same
 * round, measured the same way. From CPU per run it prints the most runs per second the cores of this machine could
 * give if nothing else ran: the floor and the fabric share them with the database.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import Fastify from "fastify";
import { request } from "undici";
import { loadConfig, startFabric } from "../../core/dist/index.js";
import { closedLoop, median } from "./load.mjs";
import { pgSchema, pgUnavailable } from "./split.mjs";

const { values: args } = parseArgs({ options: { runs: { type: "string", default: "3000" }, rounds: { type: "string", default: "3" } } });
const RUNS = Number(args.runs);
const ROUNDS = Number(args.rounds);
const CLIENTS = 64;
const repo = fileURLToPath(new URL("../..", import.meta.url));
const TICK_US = 1e6 / 100; // /proc times are in clock ticks of 1/100 s on Linux

/** CPU µs used so far by every process of the local PostgreSQL server (live ones, and children it reaped). */
function postgresCpuUs() {
  let ticks = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      continue;
    }
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    if (comm !== "postgres") continue;
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime stime cutime cstime are fields 14-17 of stat, 12-15 after the comm.
    ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  }
  return ticks * TICK_US;
}

async function measured(fn, withPg) {
  const pg0 = withPg ? postgresCpuUs() : 0;
  const cpu0 = process.cpuUsage();
  const r = await fn();
  const cpu = process.cpuUsage(cpu0);
  return { ...r, node_us: cpu.user + cpu.system, pg_us: withPg ? postgresCpuUs() - pg0 : 0 };
}

const runBody = (i) => ({ root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: { i, text: "hello" } });

async function floor() {
  const app = Fastify({ logger: false });
  app.post("/echo", async (req) => ({ state: "completed", outputs: { echo: req.body.input } }));
  await app.listen({ host: "127.0.0.1", port: 0 });
  const url = `http://127.0.0.1:${app.server.address().port}`;
  try {
    await closedLoop({ url, path: "/echo", body: runBody, total: 2000, clients: CLIENTS });
    return await measured(() => closedLoop({ url, path: "/echo", body: runBody, total: RUNS * 3, clients: CLIENTS }), false);
  } finally {
    await app.close();
  }
}

async function fabricRuns(storeUrl) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-cpu-"));
  const flags = { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"] };
  if (storeUrl) Object.assign(flags, { store: { url: storeUrl }, plugins: ["@nodefabric/plugin-postgres"] });
  const fabric = await startFabric(loadConfig({ cwd: repo, env: {}, flags }));
  try {
    for (let i = 0; i < 200; i++) {
      const list = await (await request(`${fabric.urls["node-registry"]}/v1/executors?node_type_id=demo.echo`)).body.json();
      if (list.length > 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const url = fabric.urls["run-gateway"];
    const load = (n) => closedLoop({ url, path: "/v1/runs", body: runBody, headers: { prefer: "wait=60" }, total: n, clients: CLIENTS, check: (b) => b.state === "completed" });
    await load(1000);
    return await measured(() => load(RUNS), Boolean(storeUrl));
  } finally {
    await fabric.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const pgMissing = await pgUnavailable();
const rows = { floor: [], sqlite: [], postgres: [] };
for (let round = 0; round < ROUNDS; round++) {
  rows.floor.push(await floor());
  rows.sqlite.push(await fabricRuns());
  if (!pgMissing) {
    const schema = pgSchema("nf_cpu");
    try {
      rows.postgres.push(await fabricRuns(schema.url));
    } finally {
      await schema.drop();
    }
  }
}
const cores = os.availableParallelism();
process.stdout.write(`\nnode ${process.version}, ${cores} cores, ${RUNS} runs per round (floor: ${RUNS * 3} requests), median of ${ROUNDS} rounds${pgMissing ? `; ${pgMissing}` : ""}\n\n`);
process.stdout.write(`| setup | per s | node µs CPU per run | PostgreSQL µs CPU per run | total µs per run | most per s on ${cores} cores | failures |\n|---|---|---|---|---|---|---|\n`);
for (const [name, rs] of Object.entries(rows)) {
  if (rs.length === 0) continue;
  const n = name === "floor" ? RUNS * 3 : RUNS;
  const node = median(rs.map((r) => r.node_us / n));
  const pgUs = median(rs.map((r) => r.pg_us / n));
  const total = node + pgUs;
  process.stdout.write(`| ${name} | ${median(rs.map((r) => r.per_second))} | ${node.toFixed(0)} | ${pgUs.toFixed(0)} | ${total.toFixed(0)} | ${Math.round((cores * 1e6) / total)} | ${rs.reduce((a, r) => a + r.failures, 0)} |\n`);
}
