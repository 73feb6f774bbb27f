#!/usr/bin/env node
/**
 * Where the test suite's time goes: the slowest test files, and the setup each one pays (fabrics started in the
 * test's process, `fabric` child processes, builds, installs), from a vitest JSON report and the setup ledger that
 * test/support/setup-ledger.ts writes.
 *
 *   node scripts/test-timings.mjs [--suite unit|e2e] [--top 25] [-- <more vitest args>]
 *       runs the suite (built already: run `npm run build` first) with the ledger on, then prints the table
 *   node scripts/test-timings.mjs --report r.json [--ledger l.jsonl] [--top 25]
 *       prints the table of a run already made
 *   --markdown prints the table as Markdown (for docs/testing.md)
 *   --root <dir> the checkout the report was made in (default: this one), for a report of another checkout
 *   --budget <s> names the files that took longer (default 60: docs/testing.md's budget for a file of npm test in the
 *   whole suite)
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function parseArgs(argv) {
  const opts = { top: 25, suite: "unit", markdown: false, budget: 60, rest: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") {
      opts.rest = argv.slice(i + 1);
      break;
    } else if (a === "--top") opts.top = Number(argv[++i]);
    else if (a === "--suite") opts.suite = argv[++i];
    else if (a === "--report") opts.report = argv[++i];
    else if (a === "--ledger") opts.ledger = argv[++i];
    else if (a === "--markdown") opts.markdown = true;
    else if (a === "--budget") opts.budget = Number(argv[++i]);
    else if (a === "--root") opts.root = path.resolve(argv[++i]);
    else {
      console.error(`test-timings: unknown option ${a}`);
      process.exit(2);
    }
  }
  if (!Number.isInteger(opts.top) || opts.top < 1) {
    console.error("test-timings: --top takes a positive integer");
    process.exit(2);
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));

/** The vitest projects of a suite, as package.json's scripts name them. */
function projects(suite) {
  const names = { unit: ["unit", "unit-isolated"], e2e: ["e2e"], runtime: ["runtime"] }[suite];
  if (!names) {
    console.error(`test-timings: --suite is unit, e2e or runtime, not ${suite}`);
    process.exit(2);
  }
  return names.flatMap((n) => ["--project", n]);
}
let wallMs;
if (!opts.report) {
  const dir = mkdtempSync(path.join(tmpdir(), "test-timings-"));
  opts.report = path.join(dir, "report.json");
  opts.ledger = path.join(dir, "ledger.jsonl");
  const t0 = Date.now();
  const run = spawnSync(
    process.execPath,
    [path.join(root, "node_modules/vitest/vitest.mjs"), "run", ...projects(opts.suite), "--reporter=default", "--reporter=json", `--outputFile=${opts.report}`, ...opts.rest],
    { cwd: root, stdio: "inherit", env: { ...process.env, NODEFABRIC_TEST_LEDGER: opts.ledger } },
  );
  wallMs = Date.now() - t0;
  if (run.status !== 0) console.error(`test-timings: vitest exited ${run.status}; the table below covers what ran`);
}
if (!existsSync(opts.report)) {
  console.error(`test-timings: no report at ${opts.report}`);
  process.exit(1);
}

const base = opts.root ?? root;
const report = JSON.parse(readFileSync(opts.report, "utf8"));
const ledger = opts.ledger && existsSync(opts.ledger)
  ? readFileSync(opts.ledger, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l))
  : [];

const files = report.testResults.map((r) => {
  const rel = path.relative(base, r.name);
  const tests = r.assertionResults.length;
  const inTests = r.assertionResults.reduce((s, t) => s + (t.duration ?? 0), 0);
  const duration = r.endTime - r.startTime;
  const paid = { fabric: [0, 0], "fabric-process": [0, 0], build: [0, 0], install: [0, 0] };
  for (const e of ledger) {
    if (path.relative(base, e.file) !== rel || !(e.kind in paid)) continue;
    paid[e.kind][0] += 1;
    paid[e.kind][1] += e.ms;
  }
  return { rel, tests, duration, hooks: Math.max(0, duration - inTests), paid, failed: r.status !== "passed" };
});
files.sort((a, b) => b.duration - a.duration);

const sec = (ms) => (ms / 1000).toFixed(1);
const sumDur = files.reduce((s, f) => s + f.duration, 0);
const tests = files.reduce((s, f) => s + f.tests, 0);
const cell = ([n, ms]) => (n ? `${n} (${sec(ms)} s)` : "");
const header = ["file", "s", "tests", "outside tests s", "in-process fabrics", "fabric processes", "builds", "installs"];
const rows = files.slice(0, opts.top).map((f) => [
  f.rel + (f.failed ? " (failed)" : ""), sec(f.duration), String(f.tests), sec(f.hooks),
  cell(f.paid.fabric), cell(f.paid["fabric-process"]), cell(f.paid.build), cell(f.paid.install),
]);

const totals = { fabric: [0, 0], "fabric-process": [0, 0], build: [0, 0], install: [0, 0] };
for (const f of files) for (const k of Object.keys(totals)) {
  totals[k][0] += f.paid[k][0];
  totals[k][1] += f.paid[k][1];
}

if (opts.markdown) {
  console.log(`| ${header.join(" | ")} |`);
  console.log(`|${header.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`);
  for (const r of rows) console.log(`| ${r.join(" | ")} |`);
} else {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  console.log(line(header));
  for (const r of rows) console.log(line(r));
}
console.log();
console.log(`${files.length} files, ${tests} tests; the files' durations add up to ${sec(sumDur)} s` + (wallMs ? `, run in ${sec(wallMs)} s of wall time` : ""));
console.log(`paid: ${cell(totals.fabric) || "no"} in-process fabrics, ${cell(totals["fabric-process"]) || "no"} fabric processes, ${cell(totals.build) || "no"} builds, ${cell(totals.install) || "no"} installs`);
const over = files.filter((f) => f.duration > opts.budget * 1000);
if (opts.suite === "unit" && over.length) {
  console.log(`over the ${opts.budget} s budget of a file (docs/testing.md): ${over.map((f) => `${f.rel} (${sec(f.duration)} s)`).join(", ")}`);
}
