/**
 * Profiles one bench scenario and prints where the CPU went.
 *
 *   node test/bench/cpu-profile.mjs atomic-throughput-pg [--rounds 1] [--top 40] [--runs N] [--split-runs N]
 *
 * Runs `test/bench/run.mjs --only <scenario>` under `node --cpu-prof`. Every round, the floor's and the fabric's,
 * runs in a process of its own that inherits the flag, so each leaves its own profile; this reads each and prints
 * self time by function and by package. The .cpuprofile files stay in the directory printed last; open one in Chrome
 * DevTools for the call tree. The services a split scenario starts (`fabric start <service>`) leave one profile each,
 * named `<service>.<pid>.<time>.cpuprofile`.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({ allowPositionals: true, options: { rounds: { type: "string", default: "1" }, top: { type: "string", default: "40" }, "split-runs": { type: "string" }, runs: { type: "string" } } });
if (positionals.length !== 1) {
  process.stderr.write("usage: node test/bench/cpu-profile.mjs <scenario> [--rounds N] [--top N]\n");
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const dir = mkdtempSync(path.join(os.tmpdir(), "nf-cpu-prof-"));
const extra = [...(values["split-runs"] ? ["--split-runs", values["split-runs"]] : []), ...(values.runs ? ["--runs", values.runs] : [])];
const r = spawnSync(process.execPath, ["--cpu-prof", "--cpu-prof-dir", dir, path.join(here, "run.mjs"), "--only", positionals[0], "--rounds", values.rounds, ...extra], {
  stdio: ["ignore", "inherit", "inherit"],
  // The services a split scenario starts as processes of their own profile themselves too, each named after its service.
  env: { ...process.env, NF_BENCH_SERVICE_PROFILE_DIR: dir },
});
if (r.status !== 0) process.exit(r.status ?? 1);

/** Self time (µs) per node id, from the sample deltas. */
function selfTimes(profile) {
  const self = new Map();
  for (let i = 0; i < profile.samples.length; i++) self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + (profile.timeDeltas[i] ?? 0));
  return self;
}

function packageOf(url) {
  if (!url) return "(native/V8)";
  if (url.startsWith("node:")) return "node:" + url.slice(5).split("/")[0];
  const nm = url.lastIndexOf("node_modules/");
  if (nm >= 0) {
    const rest = url.slice(nm + 13).split("/");
    return rest[0].startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  const m = /\/(core|sdk|schemas|plugins\/[^/]+|handlers\/[^/]+|test)\//.exec(url);
  return m ? `nodefabric:${m[1]}` : url;
}

const files = readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"));
for (const file of files) {
  const profile = JSON.parse(readFileSync(path.join(dir, file), "utf8"));
  const self = selfTimes(profile);
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const byFn = new Map();
  const byPkg = new Map();
  for (const node of profile.nodes) {
    const t = self.get(node.id) ?? 0;
    if (!t) continue;
    const cf = node.callFrame;
    const where = cf.url ? `${path.basename(cf.url)}:${cf.lineNumber + 1}` : "";
    const fn = `${cf.functionName || "(anonymous)"} ${where}`.trim();
    byFn.set(fn, (byFn.get(fn) ?? 0) + t);
    const pkg = packageOf(cf.url);
    byPkg.set(pkg, (byPkg.get(pkg) ?? 0) + t);
  }
  const pct = (t) => `${((100 * t) / total).toFixed(1).padStart(5)}%`;
  process.stdout.write(`\n${file}: ${(total / 1e6).toFixed(2)} s sampled\n\nby package (self time)\n`);
  for (const [k, t] of [...byPkg].sort((a, b) => b[1] - a[1]).slice(0, 25)) process.stdout.write(`${pct(t)}  ${k}\n`);
  process.stdout.write(`\nby function (self time)\n`);
  for (const [k, t] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) process.stdout.write(`${pct(t)}  ${k}\n`);
}
process.stdout.write(`\nprofiles in ${dir}\n`);
