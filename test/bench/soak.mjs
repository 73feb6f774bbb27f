/**
 * The soak (`npm run bench:soak`, not part of `npm test`): does the fabric's memory level off under steady load, and
 * does its latency stay put? Issue 32 asks, and docs/memory.md keeps the
 * figures.
 *
 * It starts the built `fabric dev` in a child process (SQLite in a temporary data dir, or `--store postgres://…`, in
 * a fresh schema of its own unless the URL names one), measures its throughput for a few seconds (closed loop,
 * demo.echo runs through the gateway with `Prefer: wait`), then sends runs at `--rate` per second (default: half of
 * that throughput) for `--minutes` (default 30), open loop from a loopback client. Every 5 s it samples the server's
 * resident memory (VmRSS of /proc/<pid>/status) and its heap (nodejs_heap_size_used_bytes from /metrics); per minute it
 * keeps the runs, errors and latency percentiles. At the end: a per-minute table, the RSS growth over the last two
 * thirds (for 30 minutes, from minute 10 to the end; the issue's bar is 10 %), the p99 of each minute, the largest
 * caches as /metrics tells them, and a verdict. The markdown table it prints is ready to paste into
 * docs/performance.md.
 *
 *   npm run bench:soak -- --minutes 3            a short check
 *   npm run bench:soak -- --minutes 30 --rate 80
 *   npm run bench:soak -- --store postgres://postgres@127.0.0.1:5432/test
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { Pool, request } from "undici";
import { closedLoop } from "./load.mjs";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const CLI = path.join(repo, "core/dist/cli/main.js");

// ------------------------------------------------------------------ options

function options(argv) {
  const o = { minutes: 30, rate: undefined, store: undefined, calibrateSeconds: 15, maxInFlight: 512, json: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === "--minutes") o.minutes = Number(value());
    else if (a === "--rate") o.rate = Number(value());
    else if (a === "--store") o.store = value();
    else if (a === "--calibrate-seconds") o.calibrateSeconds = Number(value());
    else if (a === "--max-in-flight") o.maxInFlight = Number(value());
    else if (a === "--json") o.json = true;
    else if (a === "-h" || a === "--help") {
      process.stdout.write("usage: node test/bench/soak.mjs [--minutes N (30)] [--rate runs/s (half the measured throughput)] [--store postgres://...] [--calibrate-seconds S (15)] [--max-in-flight N (512)] [--json]\n");
      process.exit(0);
    } else throw new Error(`unknown option ${a}`);
  }
  if (!(o.minutes >= 1)) throw new Error("--minutes must be at least 1");
  if (o.rate !== undefined && !(o.rate > 0)) throw new Error("--rate must be a positive number of runs per second");
  return o;
}

// ------------------------------------------------------------------ the fabric

/** A fresh schema of its own for a postgres:// store that names none; `drop()` removes it afterwards. */
async function pgStore(url) {
  const u = new URL(url);
  if (u.searchParams.has("schema")) return { url, drop: async () => {} };
  const schema = `nf_soak_${randomBytes(4).toString("hex")}`;
  u.searchParams.set("schema", schema);
  return {
    url: u.toString(),
    drop: async () => {
      const { default: pg } = await import("pg");
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}

/** Starts `fabric dev` (built) in a child process; resolves with its gateway and coordinator URLs and its pid. */
function startFabric({ dataDir, store }) {
  const args = [CLI, "dev", "--port-base", "0", "--data-dir", dataDir, "--auth", "disabled", "--log-level", "warn", "--handlers", "@nodefabric/handler-demo", ...(store ? ["--store", store] : [])];
  const child = spawn(process.execPath, args, { cwd: repo, env: { ...process.env, FABRIC_LOG_LEVEL: "warn" }, stdio: ["ignore", "pipe", "pipe"] });
  process.once("exit", () => child.kill("SIGKILL"));
  let out = "";
  const keep = (c) => {
    out += c.toString();
    if (out.length > 64 * 1024) out = out.slice(-32 * 1024);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal)));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return exited;
    child.kill("SIGTERM");
    const t = setTimeout(() => child.kill("SIGKILL"), 10_000);
    try {
      return await exited;
    } finally {
      clearTimeout(t);
    }
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`fabric dev did not start within 60 s:\n${out}`));
    }, 60_000);
    const url = (service) => out.match(new RegExp(`^\\s+${service}\\s+(http://\\S+)$`, "m"))?.[1];
    const onData = () => {
      const gateway = url("run-gateway");
      const coordinator = url("run-coordinator");
      if (!gateway || !coordinator || !/^data: /m.test(out)) return;
      clearTimeout(timer);
      child.stdout.off("data", onData);
      child.off("exit", early);
      resolve({ pid: child.pid, gateway, coordinator, stop, output: () => out });
    };
    const early = (code) => {
      clearTimeout(timer);
      reject(new Error(`fabric dev exited with ${code} before it was ready:\n${out}`));
    };
    child.stdout.on("data", onData);
    child.once("exit", early);
  });
}

// ------------------------------------------------------------------ what is measured

/** The resident memory of a process, in bytes (VmRSS of /proc/<pid>/status), or undefined off Linux. */
function rssOf(pid) {
  try {
    const m = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+)\s+kB/m);
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** The samples of a scrape of /metrics, by series (`name{labels}`), or undefined when there is no /metrics. */
async function scrape(base) {
  try {
    const res = await request(`${base}/metrics`, { headersTimeout: 10_000, bodyTimeout: 10_000 });
    const text = await res.body.text();
    if (res.statusCode !== 200) return undefined;
    const out = new Map();
    for (const line of text.split("\n")) {
      if (line === "" || line.startsWith("#")) continue;
      const at = line.lastIndexOf(" ");
      out.set(line.slice(0, at), Number(line.slice(at + 1)));
    }
    return out;
  } catch {
    return undefined;
  }
}

const percentile = (sorted, p) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0 ? NaN : s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const mib = (b) => (b === undefined || Number.isNaN(b) ? "n/a" : (b / 1048576).toFixed(0));
const ms = (x) => (Number.isNaN(x) ? "n/a" : x.toFixed(1));
const pct = (x) => `${x >= 0 ? "+" : ""}${(x * 100).toFixed(1)} %`;

// ------------------------------------------------------------------ the soak

const body = (i) => JSON.stringify({ root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: { i, text: "hello" } });

/**
 * Sends runs at `rate` per second for `seconds`, open loop (at most `maxInFlight` at once: a run due while that many
 * are still answered is counted as skipped, so a fabric that falls behind shows it instead of being waited for).
 */
async function soak({ gateway, pid, coordinator, rate, minutes, maxInFlight, onMinute }) {
  const u = new URL(gateway);
  const pool = new Pool(u.origin, { connections: Math.min(maxInFlight, 256), pipelining: 1 });
  const started = performance.now();
  const end = started + minutes * 60_000;
  const perMinute = Array.from({ length: minutes }, () => ({ latencies: [], errors: 0, skipped: 0, rss: [], heap: [] }));
  const minuteOf = (t) => Math.min(minutes - 1, Math.floor((t - started) / 60_000));
  let sent = 0;
  let inFlight = 0;
  let i = 0;
  const one = async () => {
    const t0 = performance.now();
    const m = perMinute[minuteOf(t0)];
    inFlight++;
    try {
      const res = await pool.request({ method: "POST", path: "/v1/runs", headers: { "content-type": "application/json", prefer: "wait=30" }, body: body(i++) });
      const json = await res.body.json().catch(() => undefined);
      if (res.statusCode !== 200 || json?.state !== "completed") m.errors++;
      else m.latencies.push(performance.now() - t0);
    } catch {
      m.errors++;
    } finally {
      inFlight--;
    }
  };
  // Memory every 5 s: RSS from /proc, heap from /metrics (when the telemetry plugin is there).
  const sampler = setInterval(async () => {
    const m = perMinute[minuteOf(performance.now())];
    const rss = rssOf(pid);
    if (rss !== undefined) m.rss.push(rss);
    const s = await scrape(coordinator);
    const heap = s?.get("nodejs_heap_size_used_bytes");
    if (heap !== undefined) m.heap.push(heap);
  }, 5_000);
  let reported = 0;
  const pending = new Set();
  // Ticks of 10 ms, each sending what the schedule says is due by then.
  while (performance.now() < end) {
    const now = performance.now();
    const due = Math.floor(((now - started) / 1000) * rate);
    while (sent < due) {
      sent++;
      if (inFlight >= maxInFlight) {
        perMinute[minuteOf(now)].skipped++;
        continue;
      }
      const p = one();
      pending.add(p);
      void p.finally(() => pending.delete(p));
    }
    const minute = minuteOf(now);
    while (reported < minute) onMinute(reported, perMinute[reported++]);
    await new Promise((r) => setTimeout(r, 10));
  }
  await Promise.all(pending);
  clearInterval(sampler);
  const last = rssOf(pid);
  if (last !== undefined) perMinute[minutes - 1].rss.push(last);
  while (reported < minutes) onMinute(reported, perMinute[reported++]);
  await pool.close();
  return perMinute;
}

function summarize(perMinute, minutes) {
  const rows = perMinute.map((m, k) => {
    const sorted = [...m.latencies].sort((a, b) => a - b);
    return {
      minute: k + 1,
      runs: m.latencies.length,
      errors: m.errors,
      skipped: m.skipped,
      p50_ms: percentile(sorted, 50),
      p99_ms: percentile(sorted, 99),
      rss: m.rss.length ? m.rss.reduce((a, b) => a + b, 0) / m.rss.length : undefined,
      heap: m.heap.length ? m.heap.reduce((a, b) => a + b, 0) / m.heap.length : undefined,
    };
  });
  // The last two thirds: from the end of minute round(N/3) (minute 10 of 30) to the end.
  const base = Math.max(1, Math.round(minutes / 3));
  const rssBase = rows[base - 1].rss;
  const rssEnd = rows[minutes - 1].rss;
  const growth = rssBase && rssEnd ? (rssEnd - rssBase) / rssBase : NaN;
  // p99 steady: the median p99 of the last third's minutes within 25 % (and 2 ms) of the middle third's.
  const third = Math.max(1, Math.floor(minutes / 3));
  const middle = rows.slice(minutes - 2 * third, minutes - third).map((r) => r.p99_ms);
  const lastThird = rows.slice(minutes - third).map((r) => r.p99_ms);
  const p99Middle = median(middle.length ? middle : lastThird);
  const p99Last = median(lastThird);
  const p99Steady = p99Last <= p99Middle * 1.25 + 2;
  const errors = rows.reduce((a, r) => a + r.errors, 0);
  const skipped = rows.reduce((a, r) => a + r.skipped, 0);
  const runs = rows.reduce((a, r) => a + r.runs, 0);
  const memoryFlat = growth <= 0.1;
  return { rows, base, growth, p99Middle, p99Last, p99Steady, errors, skipped, runs, memoryFlat, pass: memoryFlat && p99Steady && errors === 0 && skipped === 0 };
}

async function main() {
  const o = options(process.argv.slice(2));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-soak-"));
  const pg = o.store ? await pgStore(o.store) : undefined;
  const fabric = await startFabric({ dataDir, store: pg?.url });
  const log = (s) => process.stderr.write(`${s}\n`);
  try {
    let rate = o.rate;
    let measured;
    if (rate === undefined) {
      // Throughput as `npm run bench` measures it (closed loop, 32 clients), for calibrateSeconds: half of it is the rate.
      log(`measuring throughput for ${o.calibrateSeconds} s…`);
      const t0 = performance.now();
      let total = 0;
      const rounds = [];
      while (performance.now() - t0 < o.calibrateSeconds * 1000) {
        const r = await closedLoop({ url: fabric.gateway, path: "/v1/runs", headers: { prefer: "wait=30" }, body: (i) => JSON.parse(body(i)), total: 1000, clients: 32, check: (b) => b.state === "completed" });
        total += r.requests;
        rounds.push(r.per_second);
      }
      // The median of rounds of 1000 runs, the first left out (warm-up) when there are others.
      const per = Math.round(median(rounds.length > 1 ? rounds.slice(1) : rounds));
      measured = per;
      rate = Math.max(1, Math.round(per / 2));
      log(`throughput ${per} runs/s (${total} runs): the soak sends ${rate} runs/s`);
    }
    log(`soak: ${o.minutes} min at ${rate} runs/s, fabric dev pid ${fabric.pid} (${pg ? "PostgreSQL" : "SQLite"})`);
    log("minute  runs  errors  p50 ms  p99 ms  RSS MiB  heap MiB");
    const perMinute = await soak({
      gateway: fabric.gateway,
      coordinator: fabric.coordinator,
      pid: fabric.pid,
      rate,
      minutes: o.minutes,
      maxInFlight: o.maxInFlight,
      onMinute: (k, m) => {
        const sorted = [...m.latencies].sort((a, b) => a - b);
        const avg = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : undefined);
        log(`${String(k + 1).padStart(6)}  ${String(m.latencies.length).padStart(5)}  ${String(m.errors + m.skipped).padStart(6)}  ${ms(percentile(sorted, 50)).padStart(6)}  ${ms(percentile(sorted, 99)).padStart(6)}  ${mib(avg(m.rss)).padStart(7)}  ${mib(avg(m.heap)).padStart(8)}`);
      },
    });
    const s = summarize(perMinute, o.minutes);
    const caches = await scrape(fabric.coordinator);
    const cacheRows = caches
      ? [...caches]
          .filter(([k]) => k.startsWith("nodefabric_cache_entries{"))
          .map(([k, v]) => {
            const name = k.match(/cache="([^"]+)"/)[1];
            return { name, entries: v, max: caches.get(`nodefabric_cache_max_entries{cache="${name}"}`), bytes: caches.get(`nodefabric_cache_bytes{cache="${name}"}`) };
          })
          .filter((c) => c.entries > 0)
          .sort((a, b) => b.entries - a.entries)
      : [];

    const out = [];
    out.push(`### Soak: ${o.minutes} min at ${rate} runs/s${measured ? ` (half of ${measured} runs/s measured at the start)` : ""}, ${pg ? "PostgreSQL" : "SQLite"}`);
    out.push("");
    out.push(`node ${process.version}, ${os.cpus().length} cores, ${new Date().toISOString().slice(0, 10)}; \`npm run bench:soak -- --minutes ${o.minutes}${o.rate ? ` --rate ${o.rate}` : ""}${o.store ? " --store postgres://…" : ""}\``);
    out.push("");
    out.push("| minute | runs | errors | p50 ms | p99 ms | RSS MiB | heap MiB |");
    out.push("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const r of s.rows) out.push(`| ${r.minute} | ${r.runs} | ${r.errors + r.skipped} | ${ms(r.p50_ms)} | ${ms(r.p99_ms)} | ${mib(r.rss)} | ${mib(r.heap)} |`);
    out.push("");
    out.push(`- runs: ${s.runs} completed, ${s.errors} errors, ${s.skipped} not sent (${o.maxInFlight} in flight already)`);
    out.push(`- RSS growth over the last two thirds (minute ${s.base} to minute ${o.minutes}): ${pct(s.growth)} (bar: at most +10 %)`);
    out.push(`- p99, median of the minutes: ${ms(s.p99Middle)} ms in the middle third, ${ms(s.p99Last)} ms in the last (steady: within 25 % + 2 ms)`);
    out.push(`- verdict: ${s.pass ? "PASS" : "FAIL"} (memory ${s.memoryFlat ? "flat" : "growing"}, p99 ${s.p99Steady ? "steady" : "rising"}${s.errors + s.skipped > 0 ? ", with errors" : ""})`);
    if (cacheRows.length) {
      out.push("");
      out.push("Caches at the end (`nodefabric_cache_entries`):");
      out.push("");
      out.push("| cache | entries | bound | bytes |");
      out.push("| --- | ---: | ---: | ---: |");
      for (const c of cacheRows) out.push(`| ${c.name} | ${c.entries} | ${c.max ?? "—"} | ${c.bytes === undefined ? "—" : `${(c.bytes / 1048576).toFixed(1)} MiB`} |`);
    }
    process.stdout.write(`\n${out.join("\n")}\n`);
    if (o.json) process.stdout.write(`${JSON.stringify({ rate, measured, minutes: o.minutes, ...s })}\n`);
    process.exitCode = s.pass ? 0 : 1;
  } finally {
    await fabric.stop();
    await pg?.drop().catch((err) => log(`dropping the soak's schema failed: ${err.message}`));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
