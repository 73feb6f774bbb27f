/**
 * Measures one bench scenario on an earlier commit and on this checkout, rounds alternating, in the same run:
 * what a change bought, on a machine whose absolute figures drift from one run to the next.
 *
 *   node test/bench/compare.mjs <commit> <scenario> [--rounds 5] [--split-runs N] [--runs N]
 *
 * After `npm run build` here. The commit is checked out in a git worktree in a temporary directory, beside this
 * checkout's node_modules, and its core and PostgreSQL plugin (and its MCP plugin for the mcp-* scenarios, its A2A
 * plugin for a2a-*) are built there; every round is `run.mjs --round <scenario>:run` of one side or the other, a
 * fresh process. Prints each round, then the medians of both sides. The worktree is removed at the end.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({ allowPositionals: true, options: { rounds: { type: "string", default: "5" }, "split-runs": { type: "string" }, runs: { type: "string" } } });
if (positionals.length !== 2) {
  process.stderr.write("usage: node test/bench/compare.mjs <commit> <scenario> [--rounds N] [--split-runs N] [--runs N]\n");
  process.exit(2);
}
const [commit, scenario] = positionals;
const repo = fileURLToPath(new URL("../..", import.meta.url));
const dir = mkdtempSync(path.join(os.tmpdir(), "nf-compare-"));
const base = path.join(dir, "base");
const git = (...args) => execFileSync("git", ["-C", repo, ...args], { stdio: ["ignore", "pipe", "inherit"] }).toString().trim();
const extra = [...(values["split-runs"] ? ["--split-runs", values["split-runs"]] : []), ...(values.runs ? ["--runs", values.runs] : [])];
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

git("worktree", "add", "--detach", base, commit);
try {
  // The commit runs on this checkout's installed packages: the root's node_modules and each package's own.
  symlinkSync(path.join(repo, "node_modules"), path.join(base, "node_modules"));
  for (const pkg of ["core", "plugins/postgres"]) {
    if (existsSync(path.join(repo, pkg, "node_modules")) && !existsSync(path.join(base, pkg, "node_modules"))) {
      symlinkSync(path.join(repo, pkg, "node_modules"), path.join(base, pkg, "node_modules"));
    }
  }
  // The MCP scenarios load plugins/mcp from the checkout (run.mjs), so the commit's own is built for them too.
  const built = ["core", "plugins/postgres", ...(scenario.startsWith("mcp") ? ["plugins/mcp"] : []), ...(scenario.startsWith("a2a") ? ["plugins/a2a"] : [])];
  for (const pkg of built) {
    execFileSync(process.execPath, [path.join(repo, "node_modules/tsup/dist/cli-default.js")], { cwd: path.join(base, pkg), stdio: ["ignore", "ignore", "inherit"] });
  }
  const sides = { [commit]: base, here: repo };
  const got = Object.fromEntries(Object.keys(sides).map((k) => [k, []]));
  for (let round = 0; round < Number(values.rounds); round++) {
    // The side that goes first alternates, so a machine getting busier or quieter favours neither.
    const order = round % 2 ? Object.keys(sides).reverse() : Object.keys(sides);
    for (const side of order) {
      const r = spawnSync(process.execPath, ["test/bench/run.mjs", "--round", `${scenario}:run`, ...extra], { cwd: sides[side], encoding: "utf8" });
      const line = r.stdout.trim().split("\n").at(-1) ?? "";
      if (r.status !== 0 || !line.startsWith("{")) throw new Error(`${side}: the round failed:\n${r.stderr}`);
      const result = JSON.parse(line);
      got[side].push(result);
      console.log(JSON.stringify({ side, round, ...result }));
    }
  }
  for (const [side, results] of Object.entries(got)) {
    const out = {};
    for (const key of ["per_second", "p50_ms", "seconds", "cpu_us_per_run", "peak_rss_mb", "loop_delay_max_ms"]) {
      const xs = results.map((r) => r[key]).filter((x) => typeof x === "number");
      if (xs.length) out[key] = median(xs);
    }
    console.log(`${side}: medians of ${results.length} ${JSON.stringify(out)}`);
  }
} finally {
  git("worktree", "remove", "--force", base);
  rmSync(dir, { recursive: true, force: true });
}
