/**
 * `npm run bench`: every scenario runs next to its floor (a stateless fastify + undici setup doing the same HTTP work)
 * in the same run, rounds interleaved, and reports medians and the ratio to the floor. Absolute numbers drift on a
 * shared machine; ratios measured in the same run hold.
 *
 * Prints one JSON line per scenario, then a markdown table.
 * Options: --rounds N (default 5), --only a,b (scenario names), --runs N (atomic-throughput size, default 10000),
 * --split-runs N (size of the scenarios that start several processes or use PostgreSQL: split-throughput,
 * split-throughput-pg, atomic-throughput-pg, coordinators-2-vs-1; default 3000). Their HTTP floors still send --runs
 * requests: a floor is cheap, and 3000 requests at 1-hop speed last a fifth of a second, too short to be stable.
 * The PostgreSQL scenarios use FABRIC_PG_URL (default postgres://postgres@127.0.0.1:5432/test), a fresh schema per
 * round dropped afterwards; they are skipped, with a line saying why, when the server does not answer.
 * FABRIC_SQLITE_DRIVER=node|better-sqlite3 picks the SQLite library of the fabric's store (default: node:sqlite where
 * Node has it), and FABRIC_SQLITE_WRITER=inline|thread where its writes run; the last line says which ran. The
 * in-process rounds also report the event loop's longest stall (loop_delay_max_ms) and, for atomic-throughput, its
 * busy time per run (loop_busy_us_per_run: CPU of this thread only, unlike cpu_us_per_run). test/bench/sqlite-drivers.mjs compares the two on the store alone.
 * The fabric loads only the plugins a scenario names, never discovered ones, so figures are core's own unless said.
 * atomic-throughput-telemetry and atomic-throughput-traced are atomic-throughput with @nodefabric/plugin-telemetry
 * loaded, their floor being atomic-throughput without it in the same rounds: -telemetry with no exporter (metrics on,
 * every OTEL_* variable unset), -traced exporting every span over OTLP/HTTP protobuf to a receiver in a child process
 * (test/bench/otlp-sink.mjs); its JSON line says what the receiver got (`otlp`: requests, bytes, spans, per run).
 *
 * Every round of every scenario, floor and run alike, is a fresh child process (`run.mjs --round <scenario>:floor`
 * or `:run`, an internal mode that runs that one round and prints its result as a JSON line), so no round inherits
 * the heap, the garbage, the JIT state or the globals (the telemetry plugin's OpenTelemetry provider) of another.
 * Peak RSS is per round: the high-water mark of that fresh process (getrusage's maxrss, which also counts its start
 * and warm-up), or, for the rounds that start processes of their own (split-*, coordinators-*, baseline-3-hops), the
 * RSS of those processes summed and sampled as before; a scenario's figure is the highest of its rounds.
 */
import Fastify from "fastify";
import { execFile } from "node:child_process";
import { hasSubscribers } from "node:diagnostics_channel";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Pool, request } from "undici";
import { closedLoop, median } from "./load.mjs";

// Loaded by the rounds that use them, not at the top: a floor's round is a fresh process whose peak RSS is reported,
// and it should hold fastify and undici, not core, jose or pg as well (about 30 MB of code it never runs).
const core = () => import("../../core/dist/index.js");
const split = () => import("./split.mjs");

const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "5" },
    only: { type: "string" },
    runs: { type: "string", default: "10000" },
    "split-runs": { type: "string", default: "3000" },
    // Internal: `<scenario>:floor` or `<scenario>:run` runs that one round in this process and prints its result.
    round: { type: "string" },
  },
});
const ROUNDS = Number(args.rounds);
const RUNS = Number(args.runs);
const SPLIT_RUNS = Number(args["split-runs"]);
const CLIENTS = 64;
const only = args.only ? new Set(args.only.split(",")) : null;
const repo = fileURLToPath(new URL("../..", import.meta.url));

const address = (app) => `http://127.0.0.1:${app.server.address().port}`;

/**
 * Runs `fn` and adds the peak RSS of this process in MB: its high-water mark as the kernel keeps it (getrusage's
 * maxrss, in KiB), which a sampler could miss between two samples. A round runs in a process of its own (freshRound),
 * so that mark is the round's: the process's start, the warm-up and the measured load, and nothing before.
 */
async function withPeakRss(fn) {
  // How long the event loop was held up during the load: what any other request to the process waited at worst.
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const result = await fn();
  delay.disable();
  result.loop_delay_p99_ms = Math.round(delay.percentile(99) / 1e5) / 10;
  result.loop_delay_max_ms = Math.round(delay.max / 1e5) / 10;
  return { ...result, peak_rss_mb: Math.round(Math.max(process.resourceUsage().maxRSS * 1024, process.memoryUsage().rss) / 1048576) };
}

// ------------------------------------------------------------------ floors

/** One fastify hop that parses the body and answers a small JSON object. */
async function startEchoFloor() {
  const app = Fastify({ logger: false });
  app.post("/echo", async (req) => ({ state: "completed", outputs: { echo: req.body.inputs ?? req.body.input } }));
  await app.listen({ host: "127.0.0.1", port: 0 });
  return app;
}

/** A server that answers every GET after `ms`. */
async function startSlowUpstream(ms) {
  const app = Fastify({ logger: false });
  app.get("/slow", async () => {
    await new Promise((r) => setTimeout(r, ms));
    return { ok: true };
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  return app;
}

// ------------------------------------------------------------------ fabric

const TELEMETRY_PLUGIN = path.join(repo, "plugins", "telemetry");
const MCP_PLUGIN = path.join(repo, "plugins", "mcp");
const A2A_PLUGIN = path.join(repo, "plugins", "a2a");

/**
 * The plugins a bench fabric loads: those asked for and no others. Left to itself the fabric would discover every
 * plugin package in the workspace's node_modules (the console, telemetry), and the figures would move with them.
 */
async function benchPlugins({ store, telemetry = "off", mcp = false, a2a = false } = {}) {
  const names = [];
  if (store) names.push("@nodefabric/plugin-postgres");
  if (telemetry !== "off") names.push(TELEMETRY_PLUGIN);
  if (mcp) names.push(MCP_PLUGIN);
  if (a2a) names.push(A2A_PLUGIN);
  return (await core()).loadPlugins({ plugins: names, cwd: repo });
}

/**
 * Runs `fn` with every OTEL_* variable of this process replaced by `vars`, restored afterwards: the telemetry plugin
 * reads them when the fabric's first service starts.
 */
async function withOtelEnv(vars, fn) {
  const otel = () => Object.keys(process.env).filter((k) => k.startsWith("OTEL_"));
  const saved = Object.fromEntries(otel().map((k) => [k, process.env[k]]));
  for (const k of otel()) delete process.env[k];
  Object.assign(process.env, vars);
  try {
    return await fn();
  } finally {
    for (const k of otel()) delete process.env[k];
    Object.assign(process.env, saved);
  }
}

/** The SQLite library the fabric's store ran on, as its coordinator's health says. */
let sqliteDriver = "unknown";
/** Where the SQLite store's writes ran (FABRIC_SQLITE_WRITER): the store's connection or a writer thread's own. */
let sqliteWriter = "unknown";

async function noteSqliteDriver(coordinatorUrl) {
  const health = await (await request(`${coordinatorUrl}/v1/health`)).body.json();
  const details = health.checks?.find((c) => c.name === "store")?.details;
  sqliteDriver = details?.sqlite_driver ?? sqliteDriver;
  sqliteWriter = details?.sqlite_writer ?? sqliteWriter;
}

/**
 * With `auth`, every service requires tokens: keys are generated into the data directory, the services mint their
 * own tokens with them, and the returned `headers` carry a client token for the gateway.
 */
async function startWholeFabric({ auth = false, store, telemetry = "off", mcp = false, a2a = false } = {}) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-bench-"));
  const flags = { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"] };
  if (store) Object.assign(flags, { store: { url: store }, plugins: ["@nodefabric/plugin-postgres"] });
  let headers = {};
  let registryHeaders = {};
  if (auth) {
    const { SignJWT, calculateJwkThumbprint, exportJWK, generateKeyPair } = await import("jose");
    const { privateKey, publicKey } = await generateKeyPair("ES256", { extractable: true });
    const pub = await exportJWK(publicKey);
    const kid = await calculateJwkThumbprint(pub);
    writeFileSync(path.join(dataDir, "jwks.json"), JSON.stringify({ keys: [{ ...pub, kid, alg: "ES256", use: "sig" }] }));
    writeFileSync(path.join(dataDir, "signing-key.json"), JSON.stringify({ ...(await exportJWK(privateKey)), kid, alg: "ES256" }));
    const issuer = "urn:nodefabric:bench";
    flags.auth = { mode: "required", issuer, jwks_file: path.join(dataDir, "jwks.json"), signing_key_file: path.join(dataDir, "signing-key.json") };
    const mint = (aud, scope) =>
      new SignJWT({ scope, tenant_id: "bench" }).setProtectedHeader({ alg: "ES256", kid }).setIssuer(issuer).setSubject("bench").setAudience(aud).setIssuedAt().setExpirationTime("1h").sign(privateKey);
    headers = { authorization: `Bearer ${await mint("nodefabric-run-gateway", "runs:write runs:read")}` };
    registryHeaders = { authorization: `Bearer ${await mint("nodefabric-node-registry", "node-types:read")}` };
  }
  const { loadConfig, startFabric } = await core();
  const config = loadConfig({ cwd: repo, env: {}, flags });
  const fabric = await startFabric(config, undefined, { plugins: await benchPlugins({ store, telemetry, mcp, a2a }) });
  await noteSqliteDriver(fabric.urls["run-coordinator"]);
  for (let i = 0; i < 200; i++) {
    const r = await request(`${fabric.urls["node-registry"]}/v1/executors?node_type_id=demo.upstream`, { headers: registryHeaders });
    const list = await r.body.json();
    if (list.length > 0) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    fabric,
    headers,
    close: async () => {
      await fabric.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

// ------------------------------------------------------------------ scenarios

/**
 * `mcp-call`: demo.echo called as an MCP tool (tools/call on /mcp, the 2026-07-28 revision: one stateless POST per
 * call with the per-request envelope and standard headers), each call a run through the gateway's own routes.
 */
async function mcpCall(total) {
  const { fabric, headers, close } = await startWholeFabric({ mcp: true });
  const url = fabric.urls["run-gateway"];
  const _meta = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": { name: "bench", version: "1.0.0" },
    "io.modelcontextprotocol/clientCapabilities": {},
  };
  const body = (i) => ({ jsonrpc: "2.0", id: i, method: "tools/call", params: { name: "demo.echo", arguments: { i, text: "hello" }, _meta } });
  const mcpHeaders = { accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "demo.echo", ...headers };
  const load = (n) => closedLoop({ url, path: "/mcp", body, headers: mcpHeaders, total: n, clients: CLIENTS, check: (b) => b.result?.structuredContent?.echo?.text === "hello" });
  try {
    await load(Math.min(total, 1000));
    // CPU of this process (fabric and load generator) per call, as atomic-throughput reports per run.
    const cpu0 = process.cpuUsage();
    const result = await withPeakRss(() => load(total));
    const cpu = process.cpuUsage(cpu0);
    result.cpu_us_per_run = Math.round((cpu.user + cpu.system) / total);
    return result;
  } finally {
    await close();
  }
}

/**
 * `a2a-send`: demo.echo sent as an A2A message (SendMessage on /a2a, JSON-RPC, A2A 1.0, blocking: one POST per
 * message, answered with the completed task), each message a run through the gateway's own run logic.
 */
async function a2aSend(total) {
  const { fabric, headers, close } = await startWholeFabric({ a2a: true });
  const url = fabric.urls["run-gateway"];
  const body = (i) => ({
    jsonrpc: "2.0",
    id: i,
    method: "SendMessage",
    params: { message: { messageId: `bench-${i}`, role: "ROLE_USER", parts: [{ data: { i, text: "hello" } }], metadata: { skillId: "demo.echo" } } },
  });
  const a2aHeaders = { "a2a-version": "1.0", ...headers };
  const load = (n) => closedLoop({ url, path: "/a2a", body, headers: a2aHeaders, total: n, clients: CLIENTS, check: (b) => b.result?.task?.status?.state === "TASK_STATE_COMPLETED" && b.result.task.artifacts?.[0]?.parts?.[0]?.data?.echo?.text === "hello" });
  try {
    await load(Math.min(total, 1000));
    const cpu0 = process.cpuUsage();
    const result = await withPeakRss(() => load(total));
    const cpu = process.cpuUsage(cpu0);
    result.cpu_us_per_run = Math.round((cpu.user + cpu.system) / total);
    return result;
  } finally {
    await close();
  }
}

const executeBody = (i) => ({
  run_id: "run_bench",
  node_run_id: `nr_bench_${i}`,
  node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" },
  inputs: { i, text: "hello" },
});
const runBody = (i) => ({ root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: { i, text: "hello" } });

async function echoFloor(total) {
  const app = await startEchoFloor();
  try {
    await closedLoop({ url: address(app), path: "/echo", body: executeBody, total: Math.min(total, 2000), clients: CLIENTS });
    return await withPeakRss(() => closedLoop({ url: address(app), path: "/echo", body: executeBody, total, clients: CLIENTS, check: (b) => b.state === "completed" }));
  } finally {
    await app.close();
  }
}

async function atomicExecute(total) {
  const { buildAtomicExecutor, loadHandlers } = await core();
  const handlers = await loadHandlers({ handlers: ["@nodefabric/handler-demo"], cwd: repo });
  const app = await buildAtomicExecutor({ logger: false, handlers, concurrency: 4096 });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const path = "/v1/atomic-node-runs:execute";
  try {
    await closedLoop({ url: address(app), path, body: executeBody, total: Math.min(total, 2000), clients: CLIENTS });
    return await withPeakRss(() => closedLoop({ url: address(app), path, body: executeBody, total, clients: CLIENTS, check: (b) => b.state === "completed" }));
  } finally {
    await app.close();
  }
}

/**
 * With `pg`, the stores are on PostgreSQL, in a schema of this round's own. `telemetry`: "off" (no telemetry plugin),
 * "idle" (the plugin with no OTEL_* variable: metrics on, tracing off) or "traced" (the plugin exporting every span to
 * an OTLP sink in a child process; the result's `otlp` says what the sink got, warm-up runs included).
 */
async function atomicThroughput(total, { pg = false, telemetry = "off", ...options } = {}) {
  if (telemetry === "off") {
    // Nothing may listen on core's channels in a round without telemetry, or it would pay for metrics it does not say.
    const held = Object.values((await core()).CHANNEL_NAMES).filter((name) => hasSubscribers(name));
    if (held.length > 0) throw new Error(`core's diagnostics channels still have subscribers before a run without telemetry: ${held.join(", ")}`);
  }
  const schema = pg ? (await split()).pgSchema() : undefined;
  const sink = telemetry === "traced" ? await (await import("./otlp-sink.mjs")).startOtlpSink() : undefined;
  try {
    // A queue deep enough for every span of a round, sent in batches of 2048, so that no span is dropped.
    const otel = sink ? { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_BSP_MAX_QUEUE_SIZE: "65536", OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "2048" } : {};
    const { fabric, headers, close } = await withOtelEnv(otel, () => startWholeFabric({ ...options, store: schema?.url, telemetry }));
    const url = fabric.urls["run-gateway"];
    const load = (n) =>
      closedLoop({ url, path: "/v1/runs", body: runBody, headers: { prefer: "wait=60", ...headers }, total: n, clients: CLIENTS, check: (b) => b.state === "completed" });
    const warm = Math.min(total, 1000);
    let result;
    try {
      await load(warm);
      // CPU of this process (fabric and load generator) over the measured load: less noisy than throughput on a shared
      // machine, and the load generator's part is the same with telemetry or without.
      const cpu0 = process.cpuUsage();
      // The event loop's busy time (fabric and load generator): unlike CPU, it leaves out work on other threads.
      const elu0 = performance.eventLoopUtilization();
      result = await withPeakRss(() => load(total));
      const cpu = process.cpuUsage(cpu0);
      const elu = performance.eventLoopUtilization(elu0);
      result.cpu_us_per_run = Math.round((cpu.user + cpu.system) / total);
      result.loop_busy_us_per_run = Math.round((elu.active * 1000) / total);
      result.loop_utilization = Math.round(elu.utilization * 100) / 100;
    } finally {
      // Closing the last service flushes the spans still queued.
      await close();
    }
    if (sink) {
      const got = await sink.stats();
      if (got.requests === 0 || got.spans === 0) throw new Error(`atomic-throughput-traced: the OTLP sink at ${sink.url} received no spans (${JSON.stringify(got)})`);
      result.otlp = { ...got, runs: warm + total };
    }
    return result;
  } finally {
    await sink?.close();
    await schema?.drop();
  }
}

/** The chained floor: `hops` fastify processes, each forwarding with undici to the next; RSS summed over them. */
async function hopFloor(hops, total) {
  const { startHopChain, withPeakRssOf } = await split();
  const chain = await startHopChain(hops);
  try {
    await closedLoop({ url: chain.url, path: "/echo", body: executeBody, total: Math.min(total, 2000), clients: CLIENTS });
    return await withPeakRssOf(chain.pids, () =>
      closedLoop({ url: chain.url, path: "/echo", body: executeBody, total, clients: CLIENTS, check: (b) => b.state === "completed" }),
    );
  } finally {
    await chain.close();
  }
}

/**
 * Echo runs through the gateway with every service in its own process (`fabric start <service>`); with `pg`, all
 * of them on one PostgreSQL schema of this round's own. RSS is summed over the fabric's processes.
 */
async function splitThroughput(total, { pg = false, coordinators = 1 } = {}) {
  const { pgSchema, startSplitFabric, withPeakRssOf } = await split();
  const schema = pg ? pgSchema() : undefined;
  try {
    const fabric = await startSplitFabric({ store: schema?.url, coordinators });
    if (!pg) await noteSqliteDriver(fabric.coordinatorUrls[0]).catch(() => {});
    const load = (n) =>
      closedLoop({ url: fabric.gatewayUrl, path: "/v1/runs", body: runBody, headers: { prefer: "wait=60" }, total: n, clients: CLIENTS, check: (b) => b.state === "completed" });
    try {
      // Six processes warm up slower than one: the first thousand runs are still well below the rest.
      await load(Math.min(total, 1500));
      return await withPeakRssOf(fabric.pids, () => load(total));
    } finally {
      await fabric.close();
    }
  } finally {
    await schema?.drop();
  }
}

/** N concurrent one-shot requests; returns the wall time. */
async function burst(url, path, n, body, headers, check) {
  const pool = new Pool(new URL(url).origin, { connections: n });
  const t0 = performance.now();
  let failures = 0;
  await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const res = await pool.request({ method: body ? "POST" : "GET", path, headers: { "content-type": "application/json", ...headers }, body: body ? JSON.stringify(body(i)) : undefined });
      const text = await res.body.text();
      if (res.statusCode !== 200 || (check && !check(JSON.parse(text)))) failures++;
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  await pool.close();
  return { requests: n, failures, seconds: +seconds.toFixed(3), per_second: Math.round(n / seconds) };
}

async function slowUpstreamFloor(n) {
  const upstream = await startSlowUpstream(100);
  const app = Fastify({ logger: false });
  const pool = new Pool(address(upstream), { connections: n });
  app.post("/fetch", async () => {
    const res = await pool.request({ method: "GET", path: "/slow" });
    return { state: "completed", outputs: { status: res.statusCode, body: await res.body.json() } };
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  try {
    await burst(address(app), "/fetch", 100, () => ({}));
    return await withPeakRss(() => burst(address(app), "/fetch", n, () => ({}), {}, (b) => b.state === "completed"));
  } finally {
    await app.close();
    await pool.close();
    await upstream.close();
  }
}

async function slowUpstream(n) {
  const upstream = await startSlowUpstream(100);
  const { fabric, close } = await startWholeFabric();
  const url = fabric.urls["run-gateway"];
  const body = () => ({ root_node_type_ref: { node_type_id: "demo.upstream", version: "1.0.0" }, input: { url: `${address(upstream)}/slow` } });
  try {
    await burst(url, "/v1/runs", 100, body, { prefer: "wait=60" });
    return await withPeakRss(() => burst(url, "/v1/runs", n, body, { prefer: "wait=60" }, (b) => b.state === "completed"));
  } finally {
    await close();
    await upstream.close();
  }
}

/** The fan-out floor: one fastify server making N undici POSTs to another with Promise.all, once per request. */
async function fanoutFloor(n) {
  const echo = await startEchoFloor();
  const pool = new Pool(address(echo), { connections: 128 });
  const app = Fastify({ logger: false });
  app.post("/fanout", async () => {
    const results = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const res = await pool.request({ method: "POST", path: "/echo", headers: { "content-type": "application/json" }, body: JSON.stringify({ inputs: { item: `item-${i}` } }) });
        return res.body.json();
      }),
    );
    return { state: "completed", outputs: { count: results.length } };
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  try {
    await burst(address(app), "/fanout", 1, () => ({}));
    return await withPeakRss(() => burst(address(app), "/fanout", 1, () => ({}), {}, (b) => b.state === "completed"));
  } finally {
    await app.close();
    await pool.close();
    await echo.close();
  }
}

/** One composite with N demo.echo children, through the gateway, waiting for the run's end. */
async function fanout(n) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-bench-"));
  const { loadConfig, startFabric } = await core();
  const config = loadConfig({ cwd: repo, env: {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo", "@nodefabric/handler-examples"] } });
  const fabric = await startFabric(config, undefined, { plugins: await benchPlugins() });
  try {
    await noteSqliteDriver(fabric.urls["run-coordinator"]);
    for (let i = 0; i < 200; i++) {
      const r = await request(`${fabric.urls["node-registry"]}/v1/executors?node_type_id=examples.fanout`);
      if ((await r.body.json()).length > 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const items = Array.from({ length: n }, (_, i) => `item-${i}`);
    const body = () => ({ root_node_type_ref: { node_type_id: "examples.fanout", version: "1.0.0" }, input: { items } });
    return await withPeakRss(() => burst(fabric.urls["run-gateway"], "/v1/runs", 1, body, { prefer: "wait=60" }, (b) => b.state === "completed"));
  } finally {
    await fabric.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const scenarios = [
  {
    name: "atomic-execute",
    describe: `${RUNS} POST /v1/atomic-node-runs:execute of demo.echo to the executor alone, ${CLIENTS} closed-loop clients`,
    floor: { name: "baseline", describe: `one fastify hop, same body, ${CLIENTS} clients`, run: () => echoFloor(RUNS) },
    run: () => atomicExecute(RUNS),
    higherIsBetter: true,
  },
  {
    name: "atomic-throughput",
    describe: `${RUNS} runs of demo.echo through the gateway (Prefer: wait), ${CLIENTS} closed-loop clients, all services in one process, durable SQLite`,
    floor: { name: "baseline", describe: `one fastify hop, same body, ${CLIENTS} clients`, run: () => echoFloor(RUNS) },
    run: () => atomicThroughput(RUNS),
    higherIsBetter: true,
  },
  {
    name: "atomic-throughput-auth",
    describe: `the same as atomic-throughput with auth required on every service: a client token verified at the gateway (ES256), service tokens between services`,
    floor: { name: "baseline", describe: `one fastify hop, same body, ${CLIENTS} clients`, run: () => echoFloor(RUNS) },
    run: () => atomicThroughput(RUNS, { auth: true }),
    higherIsBetter: true,
  },
  {
    name: "atomic-throughput-telemetry",
    describe: `atomic-throughput with @nodefabric/plugin-telemetry and no exporter configured (no OTEL_* variable): metrics on, spans the API's no-ops`,
    floor: { name: "atomic-throughput (no telemetry)", describe: `atomic-throughput without the telemetry plugin, ${RUNS} runs, ${CLIENTS} clients`, run: () => atomicThroughput(RUNS) },
    run: () => atomicThroughput(RUNS, { telemetry: "idle" }),
    higherIsBetter: true,
  },
  {
    name: "atomic-throughput-traced",
    describe: `atomic-throughput with @nodefabric/plugin-telemetry exporting every span (OTLP/HTTP protobuf, batch processor, queue 65536, batches of 2048) to a receiver in another process`,
    floor: { name: "atomic-throughput (no telemetry)", describe: `atomic-throughput without the telemetry plugin, ${RUNS} runs, ${CLIENTS} clients`, run: () => atomicThroughput(RUNS) },
    run: () => atomicThroughput(RUNS, { telemetry: "traced" }),
    higherIsBetter: true,
  },
  {
    name: "mcp-call",
    describe: `${RUNS} calls of demo.echo as an MCP tool (tools/call on /mcp, 2026-07-28, one POST each), ${CLIENTS} closed-loop clients, all services in one process with @nodefabric/plugin-mcp; target >= 0.7 x the Run API`,
    floor: { name: "atomic-throughput (Run API, MCP plugin loaded)", describe: `POST /v1/runs with Prefer: wait on the same kind of fabric, ${RUNS} runs, ${CLIENTS} clients`, run: () => atomicThroughput(RUNS, { mcp: true }) },
    run: () => mcpCall(RUNS),
    higherIsBetter: true,
  },
  {
    name: "a2a-send",
    describe: `${RUNS} SendMessage calls of demo.echo over A2A (JSON-RPC on /a2a, 1.0, blocking, one POST each), ${CLIENTS} closed-loop clients, all services in one process with @nodefabric/plugin-a2a; target >= 0.7 x the Run API`,
    floor: { name: "atomic-throughput (Run API, A2A plugin loaded)", describe: `POST /v1/runs with Prefer: wait on the same kind of fabric, ${RUNS} runs, ${CLIENTS} clients`, run: () => atomicThroughput(RUNS, { a2a: true }) },
    run: () => a2aSend(RUNS),
    higherIsBetter: true,
  },
  {
    name: "atomic-throughput-pg",
    describe: `${SPLIT_RUNS} runs of demo.echo through the gateway (Prefer: wait), ${CLIENTS} closed-loop clients, all services in one process, stores on PostgreSQL (a fresh schema per round)`,
    floor: { name: "baseline", describe: `one fastify hop, same body, ${CLIENTS} clients`, run: () => echoFloor(RUNS) },
    run: () => atomicThroughput(SPLIT_RUNS, { pg: true }),
    higherIsBetter: true,
    pg: true,
  },
  {
    name: "split-throughput",
    describe: `${SPLIT_RUNS} runs of demo.echo through the gateway (Prefer: wait), ${CLIENTS} closed-loop clients, each service in its own process (fabric start), each with its own data dir and SQLite files`,
    floor: { name: "baseline-3-hops", describe: `${RUNS} requests through three chained fastify hops, one process each, forwarding with undici, ${CLIENTS} clients`, run: () => hopFloor(3, RUNS) },
    run: () => splitThroughput(SPLIT_RUNS),
    higherIsBetter: true,
  },
  {
    name: "split-throughput-pg",
    describe: `the same as split-throughput with every process's stores on one PostgreSQL schema (a fresh one per round)`,
    floor: { name: "baseline-3-hops", describe: `${RUNS} requests through three chained fastify hops, one process each, forwarding with undici, ${CLIENTS} clients`, run: () => hopFloor(3, RUNS) },
    run: () => splitThroughput(SPLIT_RUNS, { pg: true }),
    higherIsBetter: true,
    pg: true,
  },
  {
    name: "coordinators-2-vs-1",
    describe: `split-throughput-pg with two run coordinators behind the gateway (gateway.coordinators, round robin); the floor is the same with one`,
    floor: { name: "coordinators-1", describe: `split-throughput-pg with one run coordinator, ${SPLIT_RUNS} runs, ${CLIENTS} clients`, run: () => splitThroughput(SPLIT_RUNS, { pg: true, coordinators: 1 }) },
    run: () => splitThroughput(SPLIT_RUNS, { pg: true, coordinators: 2 }),
    higherIsBetter: true,
    pg: true,
  },
  {
    name: "slow-upstream",
    describe: "1000 concurrent runs of demo.upstream, whose upstream answers after 100 ms; wall time",
    floor: { name: "slow-upstream-floor", describe: "a fastify route doing the same GET with undici, 1000 concurrent requests", run: () => slowUpstreamFloor(1000) },
    run: () => slowUpstream(1000),
    higherIsBetter: false,
  },
  ...[1000, 10000].map((n) => ({
    name: `fanout-${n}`,
    describe: `one composite (examples.fanout) with ${n} demo.echo children, through the gateway; wall time`,
    floor: { name: `fanout-${n}-floor`, describe: `one fastify route making ${n} undici POSTs to another with Promise.all`, run: () => fanoutFloor(n) },
    run: () => fanout(n),
    higherIsBetter: false,
  })),
];

if (args.round !== undefined) {
  // A child of freshRound: one round, its result as the last line of stdout, then exit (closing what a round left).
  const [name, kind] = args.round.split(":");
  const sc = scenarios.find((x) => x.name === name);
  if (!sc || !["floor", "run"].includes(kind)) {
    process.stderr.write(`--round ${args.round}: expected <scenario>:floor or <scenario>:run; the scenarios: ${scenarios.map((x) => x.name).join(", ")}\n`);
    process.exit(2);
  }
  const result = await (kind === "floor" ? sc.floor.run() : sc.run());
  process.stdout.write(`${JSON.stringify({ ...result, sqlite_driver: sqliteDriver, sqlite_writer: sqliteWriter })}\n`, () => process.exit(0));
  await new Promise(() => {}); // the write's callback exits
}

/**
 * Runs one round (`kind` "floor" or "run") of a scenario in a new process, this file in --round mode with this
 * process's sizes, environment and Node flags (so `--cpu-prof` reaches the rounds), and returns its result.
 */
async function freshRound(sc, kind) {
  const argv = [...process.execArgv, fileURLToPath(import.meta.url), "--round", `${sc.name}:${kind}`, "--runs", String(RUNS), "--split-runs", String(SPLIT_RUNS)];
  const stdout = await new Promise((resolve, reject) => {
    const child = execFile(process.execPath, argv, { cwd: repo, env: process.env, maxBuffer: 1 << 20 }, (err, out) =>
      err ? reject(new Error(`round ${sc.name}:${kind} failed (${err.code ?? err.signal}); its stderr is above`)) : resolve(out),
    );
    child.stderr.pipe(process.stderr);
  });
  const { sqlite_driver, sqlite_writer, ...result } = JSON.parse(stdout.trim().split("\n").pop());
  if (sqlite_driver !== "unknown") sqliteDriver = sqlite_driver;
  if (sqlite_writer !== undefined && sqlite_writer !== "unknown") sqliteWriter = sqlite_writer;
  return result;
}

if (only) {
  const unknown = [...only].filter((n) => !scenarios.some((sc) => sc.name === n));
  if (unknown.length > 0) {
    process.stderr.write(`unknown scenario ${unknown.join(", ")}; the scenarios: ${scenarios.map((sc) => sc.name).join(", ")}\n`);
    process.exit(2);
  }
}
const selected = scenarios.filter((sc) => !only || only.has(sc.name));
const pgMissing = selected.some((sc) => sc.pg) ? await (await split()).pgUnavailable() : undefined;

const results = [];
const skipped = [];
for (const sc of selected) {
  if (sc.pg && pgMissing) {
    skipped.push(sc.name);
    process.stdout.write(`${JSON.stringify({ scenario: sc.name, skipped: pgMissing })}\n`);
    continue;
  }
  const floorRuns = [];
  const runs = [];
  for (let r = 0; r < ROUNDS; r++) {
    // Which of the two goes first alternates, so a machine getting busier or quieter favours neither.
    if (r % 2 === 0) {
      floorRuns.push(await freshRound(sc, "floor"));
      runs.push(await freshRound(sc, "run"));
    } else {
      runs.push(await freshRound(sc, "run"));
      floorRuns.push(await freshRound(sc, "floor"));
    }
  }
  const summarize = (name, describe, rs) => {
    const out = { scenario: name, describe, rounds: rs.length, per_second: median(rs.map((x) => x.per_second)) };
    // Every round's figure, in round order, so the spread on a busy machine is visible.
    if (rs.length > 1) out.per_second_rounds = rs.map((x) => x.per_second);
    if (rs[0].p50_ms !== undefined) {
      out.p50_ms = median(rs.map((x) => x.p50_ms));
      out.p99_ms = median(rs.map((x) => x.p99_ms));
    }
    out.seconds = median(rs.map((x) => x.seconds));
    if (rs[0].peak_rss_mb !== undefined) {
      out.peak_rss_mb = Math.max(...rs.map((x) => x.peak_rss_mb));
      if (rs.length > 1) out.peak_rss_mb_rounds = rs.map((x) => x.peak_rss_mb);
    }
    out.failures = rs.reduce((n, x) => n + x.failures, 0);
    if (rs[0].cpu_us_per_run !== undefined) out.cpu_us_per_run = median(rs.map((x) => x.cpu_us_per_run));
    if (rs[0].otlp) {
      const sum = (k) => rs.reduce((n, x) => n + x.otlp[k], 0);
      out.otlp = { requests: sum("requests"), bytes: sum("bytes"), spans: sum("spans"), spans_per_run: +(sum("spans") / sum("runs")).toFixed(2), undecoded: sum("undecoded") };
    }
    return out;
  };
  const floor = summarize(sc.floor.name, sc.floor.describe, floorRuns);
  const main = summarize(sc.name, sc.describe, runs);
  main.floor = floor.scenario;
  main.ratio_to_floor = sc.higherIsBetter ? +(main.per_second / floor.per_second).toFixed(3) : +(main.seconds / floor.seconds).toFixed(3);
  main.ratio_meaning = sc.higherIsBetter ? "throughput / floor throughput (higher is better)" : "wall time / floor wall time (lower is better)";
  if (main.p50_ms !== undefined && floor.p50_ms !== undefined) main.p50_overhead_ms = +(main.p50_ms - floor.p50_ms).toFixed(2);
  results.push(floor, main);
  process.stdout.write(`${JSON.stringify(floor)}\n${JSON.stringify(main)}\n`);
}

process.stdout.write(`\n| scenario | per s (median of ${ROUNDS}) | p50 ms | p99 ms | wall s | peak RSS MB (max of ${ROUNDS} fresh processes) | ratio to floor | failures |\n|---|---|---|---|---|---|---|---|\n`);
for (const r of results) {
  process.stdout.write(
    `| ${r.scenario} | ${r.per_second} | ${r.p50_ms ?? ""} | ${r.p99_ms ?? ""} | ${r.seconds} | ${r.peak_rss_mb ?? ""} | ${r.ratio_to_floor ?? ""} | ${r.failures} |\n`,
  );
}
if (results.length > 0) {
  process.stdout.write(
    `\npeak RSS: every round, floor and run, ran in a fresh process; the figure is that process's high-water mark (fabric and load generator, from its start), or for split-*, coordinators-* and baseline-3-hops the summed RSS of the processes the round started (load generator excluded), sampled every 50 ms; the highest over the rounds, each round's in the JSON lines (peak_rss_mb_rounds)\n`,
  );
}
for (let i = 1; i < results.length; i += 2) {
  const [f, m] = [results[i - 1], results[i]];
  if (m.cpu_us_per_run === undefined || f.cpu_us_per_run === undefined) continue;
  const extra = m.cpu_us_per_run - f.cpu_us_per_run;
  process.stdout.write(`\n${m.scenario}: CPU per run (this process: fabric and load generator, median of ${m.rounds}) ${m.cpu_us_per_run} µs against ${f.cpu_us_per_run} µs without telemetry: ${extra >= 0 ? "+" : ""}${extra} µs (${((extra / f.cpu_us_per_run) * 100).toFixed(1)} %)\n`);
}
for (const r of results.filter((x) => x.otlp)) {
  const o = r.otlp;
  process.stdout.write(`\n${r.scenario}: the OTLP sink received ${o.spans} spans (${o.spans_per_run} per run, warm-up included) in ${o.requests} requests, ${(o.bytes / 1048576).toFixed(1)} MB, over ${r.rounds} rounds\n`);
}
if (skipped.length > 0) process.stdout.write(`\nskipped: ${skipped.join(", ")} (${pgMissing})\n`);
const pgNote = selected.some((sc) => sc.pg) && !pgMissing ? `, PostgreSQL stores at ${new URL((await split()).PG_URL).host}` : "";
process.stdout.write(`\nnode ${process.version}, ${os.cpus().length} cores, SQLite store on ${sqliteDriver} (writes ${sqliteWriter}, FABRIC_SQLITE_WRITER)${pgNote}, ${new Date().toISOString()}\n`);
