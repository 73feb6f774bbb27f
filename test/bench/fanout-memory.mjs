/**
 * fanout-memory: the memory of one `fanout-<n>` round (issue 16), measured alone in a fresh process.
 *
 * Starts the whole fabric in this process as test/bench/run.mjs's fanout() does (durable SQLite, demo + examples
 * handlers), runs one examples.fanout with n demo.echo children through the gateway, samples RSS every 25 ms and
 * prints the peak (sampled, and the kernel's maxRSS) and the wall time as one JSON line.
 *
 *   npm run build && node test/bench/fanout-memory.mjs [--n 10000] [--heap-snapshot] [--threshold-mb 250] [--top 40]
 *   node test/bench/fanout-memory.mjs --analyze <file.heapsnapshot>
 *
 * With --heap-snapshot, a heap snapshot is written (v8.writeHeapSnapshot) the first time RSS passes the threshold;
 * after the run it is read back and the largest groups of objects by self size are printed (by type and constructor
 * name; strings by their first characters). Wall time is meaningless in that mode: writing the snapshot stops the
 * process for seconds.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import v8 from "node:v8";
import { Session } from "node:inspector/promises";
import { Pool, request } from "undici";
import { loadConfig, loadPlugins, startFabric } from "../../core/dist/index.js";

const { values: args } = parseArgs({
  options: {
    n: { type: "string", default: "10000" },
    "heap-snapshot": { type: "boolean", default: false },
    "threshold-mb": { type: "string", default: "250" },
    top: { type: "string", default: "40" },
    // Sample the allocations that reach V8's old space (those that die in a major GC included) during the run.
    "alloc-profile": { type: "boolean", default: false },
    // Print RSS and V8's heap every 100 ms of the run (to stderr).
    timeline: { type: "boolean", default: false },
    // Only print the summary of a snapshot written before.
    analyze: { type: "string" },
  },
});
if (args.analyze) {
  summarize(args.analyze, Number(args.top));
  process.exit(0);
}
const N = Number(args.n);
const THRESHOLD = Number(args["threshold-mb"]) * 1048576;
const repo = fileURLToPath(new URL("../..", import.meta.url));
const mb = (bytes) => Math.round(bytes / 1048576);

let peak = 0;
/** process.memoryUsage() at the highest sample: how much of the peak was V8's heap, and how much native memory. */
let atPeak;
let snapshotFile;
let t0 = 0;
let lastLine = 0;
function sample() {
  const rss = process.memoryUsage.rss();
  if (args.timeline && performance.now() - lastLine >= 100) {
    lastLine = performance.now();
    const m = process.memoryUsage();
    console.error(`${((lastLine - t0) / 1000).toFixed(1).padStart(5)} s  rss ${mb(m.rss)}  heap ${mb(m.heapUsed)}/${mb(m.heapTotal)}  external ${mb(m.external)}`);
  }
  if (rss > peak) {
    peak = rss;
    const m = process.memoryUsage();
    atPeak = { heap_total_mb: mb(m.heapTotal), heap_used_mb: mb(m.heapUsed), external_mb: mb(m.external), array_buffers_mb: mb(m.arrayBuffers), ...rssParts() };
  }
  if (args["heap-snapshot"] && !snapshotFile && rss > THRESHOLD) {
    snapshotFile = v8.writeHeapSnapshot(path.join(os.tmpdir(), `fanout-${N}-${process.pid}.heapsnapshot`));
    console.error(`heap snapshot at ${mb(rss)} MB RSS: ${snapshotFile}`);
  }
}

/** Linux: the anonymous, file-backed and shared parts of RSS, from /proc/self/status. */
function rssParts() {
  try {
    const status = readFileSync("/proc/self/status", "utf8");
    const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
    return { rss_anon_mb: Math.round(kb("RssAnon") / 1024), rss_file_mb: Math.round(kb("RssFile") / 1024), rss_shmem_mb: Math.round(kb("RssShmem") / 1024) };
  } catch {
    return {};
  }
}

const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-fanout-mem-"));
const config = loadConfig({
  cwd: repo,
  env: {},
  flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo", "@nodefabric/handler-examples"] },
});
const fabric = await startFabric(config, undefined, { plugins: await loadPlugins({ plugins: [], cwd: repo }) });
let result;
try {
  for (let i = 0; i < 200; i++) {
    const r = await request(`${fabric.urls["node-registry"]}/v1/executors?node_type_id=examples.fanout`);
    if ((await r.body.json()).length > 0) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const items = Array.from({ length: N }, (_, i) => `item-${i}`);
  const body = JSON.stringify({ root_node_type_ref: { node_type_id: "examples.fanout", version: "1.0.0" }, input: { items } });
  let session;
  if (args["alloc-profile"]) {
    session = new Session();
    session.connect();
    await session.post("HeapProfiler.startSampling", { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: false });
  }
  const startRss = process.memoryUsage.rss();
  const startParts = { heap_total_mb: mb(process.memoryUsage().heapTotal), heap_used_mb: mb(process.memoryUsage().heapUsed), ...rssParts() };
  const timer = setInterval(sample, 25);
  const pool = new Pool(new URL(fabric.urls["run-gateway"]).origin, { connections: 1 });
  t0 = performance.now();
  const res = await pool.request({ method: "POST", path: "/v1/runs", headers: { "content-type": "application/json", prefer: "wait=60" }, body });
  const text = await res.body.text();
  const seconds = (performance.now() - t0) / 1000;
  clearInterval(timer);
  sample();
  if (session) {
    const { profile } = await session.post("HeapProfiler.stopSampling");
    session.disconnect();
    allocations(profile, Number(args.top));
  }
  await pool.close();
  const run = JSON.parse(text);
  const results = (run.outputs ?? run.extensions?.["nodefabric.outputs"])?.results;
  const ok = res.statusCode === 200 && run.state === "completed" && Array.isArray(results) && results.length === N && results.every((r, i) => r === items[i]);
  result = {
    n: N,
    ok,
    status: res.statusCode,
    state: run.state,
    seconds: +seconds.toFixed(3),
    start_rss_mb: mb(startRss),
    start: startParts,
    peak_rss_mb: mb(peak),
    max_rss_mb: mb(process.resourceUsage().maxRSS * 1024),
    at_peak: atPeak,
  };
  if (!ok) result.error = run.error ?? text.slice(0, 500);
} finally {
  await fabric.close();
  rmSync(dataDir, { recursive: true, force: true });
}
console.log(JSON.stringify(result));

if (snapshotFile) {
  summarize(snapshotFile, Number(args.top));
} else if (args["heap-snapshot"]) {
  console.error(`RSS never passed ${args["threshold-mb"]} MB: no snapshot`);
}

/** Sampled bytes per allocating function (self), and per function of this repository anywhere on the stack. */
function allocations(profile, top) {
  const self = new Map();
  const ours = new Map();
  let total = 0;
  const where = (f) => `${f.functionName || "(anonymous)"} ${f.url.replace(/^.*\/(node_modules|work\/main)\//, "")}:${f.lineNumber + 1}`;
  const walk = (node, stack) => {
    const here = where(node.callFrame);
    const bytes = node.selfSize;
    if (bytes > 0) {
      total += bytes;
      self.set(here, (self.get(here) ?? 0) + bytes);
      // The innermost frame of this repository (not node_modules, not node:) that led to the allocation.
      const mine = [here, ...stack].find((w) => /(core|sdk|schemas|handlers)\/(dist|src)/.test(w) && !w.includes("node_modules"));
      if (mine) ours.set(mine, (ours.get(mine) ?? 0) + bytes);
    }
    for (const c of node.children) walk(c, [here, ...stack].slice(0, 40));
  };
  walk(profile.head, []);
  // Who calls the builtins that allocate (Map#set, Array#push…): their nearest caller with a source location.
  const callers = new Map();
  const walkCallers = (node, caller) => {
    const here = where(node.callFrame);
    if (node.selfSize > 0 && node.callFrame.url === "" && caller) {
      const key = `${node.callFrame.functionName || "(anonymous)"} <- ${caller}`;
      callers.set(key, (callers.get(key) ?? 0) + node.selfSize);
    }
    for (const c of node.children) walkCallers(c, node.callFrame.url === "" ? caller : here);
  };
  walkCallers(profile.head, undefined);
  const print = (title, map) => {
    console.log(`\n${title}`);
    for (const [k, v] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${(v / 1048576).toFixed(1).padStart(7)} MB  ${k}`);
  };
  console.log(`\nsampled allocations reaching old space: ${(total / 1048576).toFixed(1)} MB`);
  print("by allocating function", self);
  print("by innermost NodeFabric function on the stack", ours);
  print("builtins by their caller", callers);
}

/** Adds one object of `size` bytes to the group `key` of `map`. */
function tally(map, key, size) {
  const g = map.get(key) ?? map.set(key, { count: 0, size: 0 }).get(key);
  g.count++;
  g.size += size;
}

/** Self size and count per (type, name) of a .heapsnapshot; strings grouped by their first 60 characters. */
function summarize(file, top) {
  const snap = JSON.parse(readFileSync(file, "utf8"));
  const meta = snap.snapshot.meta;
  const fields = meta.node_fields;
  const width = fields.length;
  const TYPE = fields.indexOf("type");
  const NAME = fields.indexOf("name");
  const SIZE = fields.indexOf("self_size");
  const types = meta.node_types[TYPE];
  const { nodes, strings } = snap;
  const groups = new Map();
  const stringGroups = new Map();
  let total = 0;
  for (let i = 0; i < nodes.length; i += width) {
    const type = types[nodes[i + TYPE]];
    const size = nodes[i + SIZE];
    total += size;
    const name = strings[nodes[i + NAME]];
    const key = `${type}\t${type === "string" || type === "concatenated string" || type === "sliced string" ? "(string)" : name}`;
    tally(groups, key, size);
    if (type === "string") tally(stringGroups, JSON.stringify(name.slice(0, 60).replace(/[0-9a-z]{16,}/g, "~").replace(/\d+/g, "#")), size);
  }
  const print = (title, map) => {
    console.log(`\n${title}`);
    console.log("self MB   count      group");
    for (const [key, g] of [...map].sort((a, b) => b[1].size - a[1].size).slice(0, top)) {
      console.log(`${(g.size / 1048576).toFixed(1).padStart(7)} ${String(g.count).padStart(9)}  ${key}`);
    }
  };
  // Plain objects grouped by their first property names: tells a NodeRun from a spec from an event.
  const efields = meta.edge_fields;
  const ewidth = efields.length;
  const ETYPE = efields.indexOf("type");
  const ENAME = efields.indexOf("name_or_index");
  const ECOUNT = fields.indexOf("edge_count");
  const edgeTypes = meta.edge_types[ETYPE];
  const shapes = new Map();
  for (let i = 0, e = 0; i < nodes.length; i += width) {
    const count = nodes[i + ECOUNT];
    if (types[nodes[i + TYPE]] === "object" && strings[nodes[i + NAME]] === "Object") {
      const names = [];
      for (let k = 0; k < count && names.length < 4; k++) {
        const at = (e + k) * ewidth;
        if (edgeTypes[snap.edges[at + ETYPE]] === "property") names.push(strings[snap.edges[at + ENAME]]);
      }
      tally(shapes, `{${names.join(",")}}`, nodes[i + SIZE]);
    }
    e += count;
  }
  console.log(`\nheap snapshot ${file}: ${(total / 1048576).toFixed(1)} MB of objects`);
  print("largest groups by self size (type, constructor/name)", groups);
  print("plain objects by their first properties (self size)", shapes);
  print("largest strings by self size (first 60 characters, digits as #, ids as ~)", stringGroups);
}
