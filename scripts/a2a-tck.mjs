#!/usr/bin/env node
/**
 * Runs the official A2A TCK (the archive in test/fixtures/a2a-tck) by hand against an agent's URL and prints each
 * test's outcome beside the decision test/e2e/support-a2a/tck-decisions.json records for the fabric:
 *
 *   npm run a2a-tck -- http://127.0.0.1:3000                      (mandatory and capabilities)
 *   npm run a2a-tck -- http://127.0.0.1:3000 --category quality   (any of the TCK's categories, comma-separated)
 *   npm run a2a-tck -- http://127.0.0.1:3000 --keep               (keeps the unpacked TCK, to rerun one test with pytest)
 *   npm run a2a-tck -- http://127.0.0.1:3000 -- -k test_tasks_get  (the rest goes to pytest)
 *
 * The URL is the agent's base (the gateway of `fabric dev`): the TCK reads /.well-known/agent-card.json there.
 * It exits 1 when a test decided "passes" did not pass, or a test has no decision; docs/testing.md, "The A2A TCK".
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { CATEGORIES, pythonProblem, repo, runTck, unpackTck } from "./a2a-tck-lib.mjs";

const argv = process.argv.slice(2);
const dash = argv.indexOf("--");
const own = dash === -1 ? argv : argv.slice(0, dash);
const pytestArgs = dash === -1 ? [] : argv.slice(dash + 1);
const url = own.find((a) => /^https?:\/\//.test(a));
const catArg = own.includes("--category") ? own[own.indexOf("--category") + 1] : "mandatory,capabilities";
const keep = own.includes("--keep");
if (!url || own.includes("--help")) {
  console.error(`usage: npm run a2a-tck -- <agent base URL> [--category ${Object.keys(CATEGORIES).join(",")}] [--keep] [-- <pytest args>]`);
  process.exit(2);
}
const problem = await pythonProblem();
if (problem) {
  console.error(problem);
  process.exit(2);
}
const decisions = JSON.parse(readFileSync(path.join(repo, "test/e2e/support-a2a/tck-decisions.json"), "utf8"));
const tck = await unpackTck();
let bad = 0;
try {
  for (const category of catArg.split(",")) {
    const run = await runTck(tck.root, url, category, { pytestArgs });
    console.log(`\n== ${category}   $ (cd ${keep ? tck.root : "<tck>"} && ${run.command})   exit ${run.code}`);
    for (const r of [...run.results.values()].sort((a, b) => a.id.localeCompare(b.id))) {
      const d = decisions.tests[r.id];
      const verdict = d === undefined ? "NO DECISION" : d === "passes" ? (r.outcome === "passed" ? "ok" : "FAILS") : `n/a (${d.slice(4)})`;
      if (verdict === "NO DECISION" || verdict === "FAILS") bad++;
      console.log(`${r.outcome.padEnd(8)} ${verdict.padEnd(22)} ${r.id}${r.outcome === "passed" ? "" : `\n         ${r.message.split("\n")[0].slice(0, 300)}`}`);
    }
    if (run.results.size === 0) {
      bad++;
      console.log(run.stdout.slice(-3000), run.stderr.slice(-3000));
    }
    console.log(`pytest: ${Object.entries(run.counts).map(([k, v]) => `${v} ${k}`).join(", ")}`);
  }
} finally {
  if (keep) console.log(`\nthe TCK stays unpacked at ${tck.root}`);
  else tck.remove();
}
console.log(bad ? `\n${bad} test(s) decided "passes" did not pass, or have no decision` : "\nevery test matches its decision");
process.exit(bad ? 1 : 0);
