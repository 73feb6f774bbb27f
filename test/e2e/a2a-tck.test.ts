/**
 * The official A2A TCK (github.com/a2aproject/a2a-tck, the archive in test/fixtures/a2a-tck) against a real
 * `fabric dev`'s A2A face: its mandatory category and its capabilities category, as a user runs them (no A2A-Version
 * header, as the TCK sends none; --sut-url the card's JSON-RPC interface).
 *
 * Which TCK tests apply, and why the others do not, is data in support-a2a/tck-decisions.json. Every test that applies
 * passes; a test with no decision (a new TCK version) fails this test, as does a decision for a test the TCK no longer
 * has. A reference agent built only from the official JS SDK first shows the harness reads the TCK's verdicts right.
 *
 *   npx vitest run --project e2e test/e2e/a2a-tck.test.ts
 *   npm run a2a-tck -- <JSON-RPC URL>          (the same TCK by hand against any agent; docs/testing.md)
 *
 * The TCK runs on Debian's python3 and python3-* packages (.ci/run installs them): without them this test fails and
 * names the apt command.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pythonProblem, runTck, unpackTck, type TckCategory, type TckRun } from "../../scripts/a2a-tck-lib.mjs";
import { decisionFor, declaredButExcused, loadDecisions } from "./support-a2a/decisions.js";
import { startA2aFabric, startReferenceAgent, type A2aAgent } from "./support-a2a/servers.js";

const SLOW = 600_000;
const CATEGORIES: TckCategory[] = ["mandatory", "capabilities"];
const PATHS: Record<string, string> = { mandatory: "tests/mandatory/", capabilities: "tests/optional/capabilities/" };

let tck: { root: string; remove(): void };
beforeAll(async () => {
  const problem = await pythonProblem();
  if (problem) throw new Error(`the A2A TCK cannot run: ${problem}`);
  tck = await unpackTck();
}, SLOW);
afterAll(() => tck?.remove());

/** The tally of a run's outcomes as pytest's summary line words them. */
function tally(run: TckRun): Record<string, number> {
  const t: Record<string, number> = {};
  for (const r of run.results.values()) {
    const k = r.outcome === "xfailed" ? "xfailed" : r.outcome;
    t[k] = (t[k] ?? 0) + 1;
  }
  return t;
}

describe("the harness, against a reference agent (@a2a-js/sdk server + express)", () => {
  let ref: A2aAgent;
  beforeAll(async () => {
    ref = await startReferenceAgent();
  }, SLOW);
  afterAll(async () => {
    await ref?.stop();
  });

  it("runs the mandatory category and reads each test's outcome as pytest counted it", async () => {
    const run = await runTck(tck.root, ref.jsonrpc, "mandatory");
    const t = tally(run);
    // pytest counts an unexpected pass (xpassed) apart; JUnit lists it as a pass.
    expect({ passed: t.passed ?? 0, failed: t.failed ?? 0, skipped: t.skipped ?? 0, error: t.error ?? 0 }, run.stdout.slice(-3000)).toEqual({
      passed: (run.counts.passed ?? 0) + (run.counts.xpassed ?? 0),
      failed: run.counts.failed ?? 0,
      skipped: (run.counts.skipped ?? 0) + (run.counts.xfailed ?? 0),
      error: run.counts.error ?? 0,
    });
    expect(run.results.size).toBeGreaterThan(50);
    // Every failure pytest listed in its short summary is a failure in the report, by the same node id.
    const listed = [...run.stdout.matchAll(/^FAILED (\S+)/gm)].map((m) => m[1]).sort();
    const failed = [...run.results.values()].filter((r) => r.outcome === "failed").map((r) => r.id).sort();
    expect(failed).toEqual(listed);
    // The SDK's agent serves its card and answers GetTask: what any 1.0 agent passes.
    for (const id of ["tests/mandatory/protocol/test_agent_card.py::test_agent_card_available", "tests/mandatory/protocol/test_tasks_get_method.py::test_tasks_get_valid"]) {
      expect(run.results.get(id)?.outcome, `${id}\n${run.stdout.slice(-3000)}`).toBe("passed");
    }
    // pytest exits 1 when a test failed.
    expect(run.code).toBe(failed.length > 0 ? 1 : 0);
  }, SLOW);
});

describe("fabric dev's A2A face, under the official TCK", () => {
  let f: Awaited<ReturnType<typeof startA2aFabric>>;
  const decisions = loadDecisions();

  beforeAll(async () => {
    f = await startA2aFabric();
  }, SLOW);
  afterAll(async () => {
    await f?.stop();
  });

  it("excuses no capability the card declares: a declared capability's tests apply", () => {
    expect(declaredButExcused(decisions, f.card), JSON.stringify(f.card.capabilities)).toEqual([]);
  });

  for (const category of CATEGORIES) {
    it(`passes every ${category} test that applies, and has a decision for every test`, async () => {
      const run = await runTck(tck.root, f.jsonrpc, category);
      const report: string[] = [`$ (cd <tck> && ${run.command})  (exit ${run.code})`];
      const failing: string[] = [];
      const na = new Map<string, string[]>();
      for (const r of [...run.results.values()].sort((a, b) => a.id.localeCompare(b.id))) {
        const d = decisionFor(decisions, r.id);
        const short = r.id.replace(/^tests\//, "");
        if (!d) {
          failing.push(r.id);
          report.push(`???? ${short}: no decision in support-a2a/tck-decisions.json (${r.outcome}${r.message ? `: ${r.message.split("\n")[0].slice(0, 200)}` : ""})`);
          continue;
        }
        if (!d.applies) {
          na.set(d.key, [...(na.get(d.key) ?? []), short + (r.outcome === "passed" ? " (passes anyway)" : "")]);
          continue;
        }
        // A test that applies must have run and passed: a skip is the TCK deciding it does not apply.
        const ok = r.outcome === "passed";
        report.push(`${ok ? "PASS" : "FAIL"} ${short}${ok ? "" : ` (${r.outcome}): ${r.message.split("\n")[0].slice(0, 400)}`}`);
        if (!ok) failing.push(r.id);
      }
      for (const [key, list] of na) report.push(`n/a  ${list.join(", ")}\n       because ${decisions.reasons[key]}`);
      // Decisions for tests this TCK no longer has (renamed, removed): stale, so the table says what really runs.
      const stale = Object.keys(decisions.tests).filter((id) => id.startsWith(PATHS[category]) && !run.results.has(id));
      for (const id of stale) report.push(`gone ${id}: decided in tck-decisions.json, not reported by the TCK`);
      const t = tally(run);
      report.push(`TCK ${category}: ${run.results.size} tests: ${Object.entries(t).map(([k, v]) => `${v} ${k}`).join(", ")}`);
      console.log(`A2A TCK ${category} against ${f.jsonrpc}\n${report.join("\n")}`);
      expect(run.results.size, `${run.stdout.slice(-3000)}\n${run.stderr.slice(-3000)}`).toBeGreaterThan(0);
      expect([...failing, ...stale], `${report.join("\n")}\n\nfabric output:\n${f.output().slice(-4000)}`).toEqual([]);
    }, SLOW);
  }
});
