/**
 * `npm run bench`: each scenario runs next to its floor (a stateless fastify + undici setup doing the same HTTP work)
 * in the same process and run, rounds interleaved, and reports medians and the ratio to the floor.
 * Prints one JSON line per scenario, then a markdown table. Options: --rounds N (default 5), --requests N, --clients N,
 * --only name[,name].
 */
import Fastify from "fastify";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { buildAtomicExecutor, loadHandlers } from "../../core/dist/index.js";
import { closedLoop, median } from "./load.mjs";

const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "5" },
    requests: { type: "string", default: "10000" },
    clients: { type: "string", default: "64" },
    only: { type: "string" },
  },
});
const ROUNDS = Number(args.rounds);
const REQUESTS = Number(args.requests);
const CLIENTS = Number(args.clients);
const only = args.only ? new Set(args.only.split(",")) : null;
const repo = fileURLToPath(new URL("../..", import.meta.url));

function address(app) {
  const a = app.server.address();
  return `http://127.0.0.1:${a.port}`;
}

/** The floor: one fastify hop that parses the same body and answers a small JSON object. */
async function startBaseline() {
  const app = Fastify({ logger: false });
  app.post("/v1/atomic-node-runs:execute", async (req) => ({ node_run_id: req.body.node_run_id, state: "completed", outputs: { echo: req.body.inputs } }));
  await app.listen({ host: "127.0.0.1", port: 0 });
  return app;
}

async function startExecutor() {
  const handlers = await loadHandlers({ handlers: ["@nodefabric/handler-demo"], cwd: repo });
  const app = await buildAtomicExecutor({ logger: false, handlers, concurrency: 4096 });
  await app.listen({ host: "127.0.0.1", port: 0 });
  return app;
}

const executeBody = (i) => ({
  run_id: "run_bench",
  node_run_id: `nr_bench_${i}`,
  node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" },
  inputs: { i, text: "hello" },
});

const scenarios = [
  {
    name: "atomic-execute",
    describe: `${REQUESTS} POST /v1/atomic-node-runs:execute of demo.echo, ${CLIENTS} closed-loop clients, executor alone`,
    floor: "baseline",
    start: startExecutor,
    load: (url) =>
      closedLoop({ url, path: "/v1/atomic-node-runs:execute", body: executeBody, total: REQUESTS, clients: CLIENTS, check: (b) => b.state === "completed" }),
  },
];

async function measure(start, load) {
  const app = await start();
  try {
    await load(address(app)); // warm-up round, not counted
    return await load(address(app));
  } finally {
    await app.close();
  }
}

const results = [];
const baselineLoad = (url) =>
  closedLoop({ url, path: "/v1/atomic-node-runs:execute", body: executeBody, total: REQUESTS, clients: CLIENTS, check: (b) => b.state === "completed" });

for (const sc of scenarios) {
  if (only && !only.has(sc.name) && !only.has("baseline")) continue;
  const floorRuns = [];
  const runs = [];
  for (let r = 0; r < ROUNDS; r++) {
    floorRuns.push(await measure(startBaseline, baselineLoad));
    runs.push(await measure(sc.start, sc.load));
  }
  const summarize = (name, describe, rs) => ({
    scenario: name,
    describe,
    rounds: rs.length,
    per_second: median(rs.map((x) => x.per_second)),
    p50_ms: median(rs.map((x) => x.p50_ms)),
    p99_ms: median(rs.map((x) => x.p99_ms)),
    failures: rs.reduce((n, x) => n + x.failures, 0),
  });
  const floor = summarize("baseline", `the floor: one fastify hop, same body, ${CLIENTS} clients`, floorRuns);
  const main = summarize(sc.name, sc.describe, runs);
  main.ratio_to_baseline = +(main.per_second / floor.per_second).toFixed(3);
  main.p50_overhead_ms = +(main.p50_ms - floor.p50_ms).toFixed(2);
  if (!results.some((x) => x.scenario === "baseline")) results.push(floor);
  results.push(main);
}

for (const r of results) process.stdout.write(`${JSON.stringify(r)}\n`);
process.stdout.write(`\n| scenario | runs/s (median of ${ROUNDS}) | p50 ms | p99 ms | ratio to baseline | failures |\n|---|---|---|---|---|---|\n`);
for (const r of results) {
  process.stdout.write(`| ${r.scenario} | ${r.per_second} | ${r.p50_ms} | ${r.p99_ms} | ${r.ratio_to_baseline ?? "1.000"} | ${r.failures} |\n`);
}
process.stdout.write(`\nnode ${process.version}, ${os.cpus().length} cores, ${new Date().toISOString()}\n`);
