/**
 * What the split and PostgreSQL scenarios of `npm run bench` start: each fabric service as `fabric start <service>`
 * in a process of its own (wired with --url), the chained-hop floor (one process per hop), and a fresh PostgreSQL
 * schema per round, dropped afterwards.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { request } from "undici";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const CLI = path.join(repo, "core/dist/cli/main.js");
const HOP = fileURLToPath(new URL("./hop.mjs", import.meta.url));

/** The PostgreSQL server the pg scenarios use (FABRIC_PG_URL overrides it, as in the tests). */
export const PG_URL = process.env.FABRIC_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** Why the PostgreSQL scenarios cannot run (the server does not answer), or undefined when they can. */
export async function pgUnavailable() {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
    return undefined;
  } catch (err) {
    const shown = new URL(PG_URL);
    if (shown.password) shown.password = "***"; // a report line must not carry the password
    return `PostgreSQL at ${shown} does not answer: ${err.message}`;
  } finally {
    await client.end().catch(() => {});
  }
}

/** A fresh schema for one round: its store URL (plugins/postgres/README.md) and `drop()`. */
export function pgSchema(prefix = "nf_bench") {
  const schema = `${prefix}_${randomBytes(4).toString("hex")}`;
  const u = new URL(PG_URL);
  u.searchParams.set("schema", schema);
  return {
    schema,
    url: u.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      try {
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}

/** Every child still running: killed when the bench exits, even on an error, so none outlives it. */
const children = new Set();
process.once("exit", () => {
  for (const c of children) c.kill("SIGKILL");
});

/**
 * Spawns `node <args>` and resolves once `ready(output)` returns a value; keeps the output for error messages.
 * `stop()` sends SIGTERM, then SIGKILL if the process has not exited after 5 s. `started` hears of the process as
 * soon as it is spawned, so a caller can stop it even when it never becomes ready.
 */
function spawnReady(args, { env = {}, ready, what, timeoutMs = 30_000, started = () => {} }) {
  const child = spawn(process.execPath, args, { cwd: repo, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  child.once("exit", () => children.delete(child));
  let out = "";
  const keep = (chunk) => {
    out += chunk.toString();
    if (out.length > 64 * 1024) out = out.slice(-32 * 1024); // a chatty process must not grow the bench's memory
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal)));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return exited;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
    try {
      return await exited;
    } finally {
      clearTimeout(timer);
    }
  };
  started({ child, stop });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${what} did not start within ${timeoutMs} ms:\n${out}`));
    }, timeoutMs);
    const onData = () => {
      const value = ready(out);
      if (value === undefined) return;
      clearTimeout(timer);
      child.stdout.off("data", onData);
      child.off("exit", onEarlyExit);
      resolve({ child, value, output: () => out, stop });
    };
    const onEarlyExit = (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code} before it was ready:\n${out}`));
    };
    child.stdout.on("data", onData);
    child.once("exit", onEarlyExit);
  });
}

/** The resident set sizes of these processes together, in bytes (Linux /proc; 0 elsewhere). */
function rssOf(pids) {
  let total = 0;
  for (const pid of pids) {
    try {
      // statm's second field is the resident pages.
      total += Number(readFileSync(`/proc/${pid}/statm`, "utf8").split(" ")[1]) * 4096;
    } catch {
      // gone, or not Linux
    }
  }
  return total;
}

/**
 * Runs `fn` while sampling the summed RSS of the given processes (and of this one, the load generator, when `self`);
 * returns fn's result with `peak_rss_mb`.
 */
export async function withPeakRssOf(pids, fn, { self = false } = {}) {
  const sample = () => rssOf(pids) + (self ? process.memoryUsage().rss : 0);
  let peak = sample();
  const t = setInterval(() => (peak = Math.max(peak, sample())), 50);
  try {
    const result = await fn();
    return { ...result, peak_rss_mb: Math.round(Math.max(peak, sample()) / 1048576) };
  } finally {
    clearInterval(t);
  }
}

// ------------------------------------------------------------------ the chained floor

/** `hops` fastify processes chained with undici: the first forwards to the second, …, the last answers. */
export async function startHopChain(hops) {
  const procs = [];
  try {
    let next;
    // The last hop first, so each one knows where to forward.
    for (let i = 0; i < hops; i++) {
      const p = await spawnReady([HOP, ...(next ? ["--next", next] : [])], {
        what: `floor hop ${hops - i}`,
        ready: (out) => out.match(/^listening (http:\/\/\S+)$/m)?.[1],
        started: (s) => procs.unshift(s),
      });
      procs[0] = p;
      next = p.value;
    }
  } catch (err) {
    await Promise.all(procs.map((p) => p.stop()));
    throw err;
  }
  return {
    url: procs[0].value,
    pids: procs.map((p) => p.child.pid),
    close: async () => {
      await Promise.all(procs.map((p) => p.stop()));
    },
  };
}

// ------------------------------------------------------------------ the split fabric

/** Starts `fabric start <service>` with its own data dir and ephemeral port; resolves with its URL once it listens. */
async function startService(service, args, env, dirs, started) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `nf-bench-${service}-`));
  dirs.push(dataDir);
  // NF_BENCH_SERVICE_PROFILE_DIR (set by cpu-profile.mjs): each service writes a CPU profile there, named after it.
  const profileDir = process.env.NF_BENCH_SERVICE_PROFILE_DIR;
  const profile = profileDir ? ["--cpu-prof", "--cpu-prof-dir", profileDir, "--cpu-prof-name", `${service}.${process.pid}.${Date.now()}.cpuprofile`] : [];
  const p = await spawnReady([...profile, CLI, "start", service, "--port-base", "0", "--data-dir", dataDir, "--auth", "disabled", "--log-level", "warn", ...args], {
    env: { FABRIC_LOG_LEVEL: "warn", ...env },
    what: `fabric start ${service}`,
    ready: (out) => out.match(new RegExp(`^\\s+${service}\\s+(http://\\S+)$`, "m"))?.[1],
    started,
  });
  return { service, url: p.value, pid: p.child.pid, stop: p.stop, output: p.output };
}

/**
 * The services an echo run goes through, each in its own process: node registry, PDP, selection, atomic executor,
 * `coordinators` run coordinators and a gateway spreading over them (gateway.coordinators, given through
 * FABRIC_GATEWAY_COORDINATORS). With `store`, every process keeps its stores there (a postgres:// URL and the
 * plugin); without, each keeps its own SQLite files in its own data dir.
 */
export async function startSplitFabric({ store, coordinators = 1, handlers = ["@nodefabric/handler-demo"] } = {}) {
  const procs = [];
  const dirs = [];
  const storeArgs = store ? ["--store", store, "--plugin", "@nodefabric/plugin-postgres"] : [];
  // Every process, from its spawn on: a sibling failing to start must not leave this one running.
  const spawned = [];
  const start = async (service, args = [], env = {}) => {
    const p = await startService(service, [...storeArgs, ...args], env, dirs, (s) => spawned.push(s));
    procs.push(p);
    return p;
  };
  const close = async () => {
    // Callers first, then the services they call.
    for (const p of [...spawned].reverse()) await p.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  };
  try {
    // Dependencies first, those that do not depend on each other at once.
    const [registry, pdp] = await Promise.all([start("node-registry"), start("pdp")]);
    const reg = ["--url", `node-registry=${registry.url}`];
    const [selection, atomic] = await Promise.all([start("selection", reg), start("atomic-executor", [...reg, "--handlers", ...handlers])]);
    const coordinatorArgs = [...reg, "--url", `pdp=${pdp.url}`, "--url", `selection=${selection.url}`, "--url", `atomic-executor=${atomic.url}`];
    const coords = await Promise.all(Array.from({ length: coordinators }, () => start("run-coordinator", coordinatorArgs)));
    const gateway = await start("run-gateway", [], { FABRIC_GATEWAY_COORDINATORS: coords.map((c) => c.url).join(",") });
    // The executor announces itself to the registry shortly after it listens; a run before that would fail.
    for (let i = 0; ; i++) {
      const r = await request(`${registry.url}/v1/executors?node_type_id=demo.echo`);
      const list = r.statusCode === 200 ? await r.body.json() : (await r.body.dump(), []);
      if (list.length > 0) break;
      if (i >= 200) throw new Error(`the atomic executor never appeared in the registry:\n${atomic.output()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return { gatewayUrl: gateway.url, coordinatorUrls: coords.map((c) => c.url), pids: procs.map((p) => p.pid), procs, close };
  } catch (err) {
    await close();
    throw err;
  }
}
