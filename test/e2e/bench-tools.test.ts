/**
 * The bench's tools run and say what they promise: a round prints its JSON line (event-loop delay included), the CPU
 * profiler leaves a profile per service of a split scenario, and the comparison of two commits prints both sides'
 * medians and leaves no worktree behind. Nothing here is timed: the figures themselves are for `npm run bench`.
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const node = (args: string[]) => execFileSync(process.execPath, args, { cwd: repo, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 64 << 20 });

describe("the bench's tools", () => {
  it("a round of atomic-throughput prints its result, with the event loop's longest stall, its busy time and CPU per run", () => {
    const out = node(["test/bench/run.mjs", "--round", "atomic-throughput:run", "--runs", "300"]);
    const result = JSON.parse(out.trim().split("\n").at(-1)!);
    expect(result).toMatchObject({ requests: 300, failures: 0 });
    for (const key of ["per_second", "p50_ms", "loop_delay_p99_ms", "loop_delay_max_ms", "peak_rss_mb", "cpu_us_per_run", "loop_busy_us_per_run", "loop_utilization"]) expect(result[key], key).toBeTypeOf("number");
    expect(result.sqlite_writer).toBe(process.env.FABRIC_SQLITE_WRITER === "thread" ? "thread" : "inline");
  }, 120_000);

  it("cpu-profile.mjs profiles each service a split scenario starts, named after it", () => {
    const out = node(["test/bench/cpu-profile.mjs", "split-throughput", "--split-runs", "200", "--runs", "500", "--top", "3"]);
    const dir = /profiles in (\S+)/.exec(out)?.[1];
    expect(dir).toBeDefined();
    try {
      for (const service of ["node-registry", "pdp", "selection", "atomic-executor", "run-coordinator", "run-gateway"]) {
        expect(out).toMatch(new RegExp(`^${service}\\.\\d+\\.\\d+\\.cpuprofile: [\\d.]+ s sampled`, "m"));
      }
      const files = fs.readdirSync(dir!);
      expect(files.filter((f) => f.startsWith("run-coordinator."))).toHaveLength(1);
    } finally {
      fs.rmSync(dir!, { recursive: true, force: true });
    }
  }, 180_000);

  it("compare.mjs measures a commit against this checkout, round for round, and removes its worktree", () => {
    const head = execFileSync("git", ["rev-parse", "HEAD"], { cwd: repo, encoding: "utf8" }).trim();
    const out = node(["test/bench/compare.mjs", head, "atomic-throughput", "--rounds", "2", "--runs", "300"]);
    const rounds = out.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
    expect(rounds.map((r) => [r.side, r.round])).toEqual([[head, 0], ["here", 0], ["here", 1], [head, 1]]);
    for (const r of rounds) expect(r).toMatchObject({ requests: 300, failures: 0 });
    expect(out).toMatch(new RegExp(`^${head}: medians of 2 \\{"per_second":`, "m"));
    expect(out).toMatch(/^here: medians of 2 \{"per_second":/m);
    expect(execFileSync("git", ["worktree", "list"], { cwd: repo, encoding: "utf8" }).trim().split("\n")).toHaveLength(1);
  }, 900_000); // builds another checkout then measures rounds: a bound for a hang, not a measure of speed
});
