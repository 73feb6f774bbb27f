/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance, server leg) against a real `fabric dev`'s
 * /mcp, in both protocol eras: the requirement sets of 2025-11-25 (stateful, initialize) and 2026-07-28 (stateless).
 *
 * Which scenarios apply to a tools-only server, and why the others do not, is data in support-mcp/scope.ts. Every
 * scenario that applies passes. A reference server (server-everything) first proves the harness reads the suite's
 * verdicts right, passes and failures alike.
 *
 * The client leg: the suite starts each scenario's server, and the client under test is NodeFabric as a user meets it,
 * `fabric node-types import --from-mcp <url>` and runs of the imported tools through mcp.call
 * (support-mcp/conformance-client.mjs).
 *
 *   npx vitest run test/e2e/mcp-conformance.test.ts
 *
 * The suite needs Node >= 22: it runs on Node 24 from `.ci/node.sh 24`, installed into ~/.cache/nodefabric-e2e.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import path from "node:path";
import { SERVER_SCOPE, REVISIONS, clientScope, scopeFor, type Revision } from "./support-mcp/scope.js";
import { CONFORMANCE, ensureTool, requirementSet, runConformanceClient, runConformanceServer, summarize, type ConformanceRun, type ScenarioResult } from "./support-mcp/tools.js";
import { repo, startMcpFabric, startServerEverything, waitForNodeTypes, type McpFabric, type ReferenceServer } from "./support-mcp/servers.js";
import { CLI } from "./fabric-cli.js";

const SLOW = 300_000;

describe("the harness, against a reference server (server-everything over Streamable HTTP)", () => {
  let ref: ReferenceServer;
  beforeAll(async () => {
    await ensureTool(CONFORMANCE);
    ref = await startServerEverything();
  }, SLOW);
  afterAll(async () => {
    await ref?.stop();
  });

  it("runs every scenario of the 2025-11-25 requirement set, and reads passes and failures as the suite printed them", async () => {
    const req = await requirementSet("2025-11-25");
    const run = await runConformanceServer(ref.url, ["--requirements", "2025-11-25"]);
    const expected = [...req.server, ...req.notScored.filter((n) => n.leg === "server").map((n) => n.scenario)];
    expect([...run.scenarios.keys()].sort(), run.stdout).toEqual([...new Set(expected)].sort());
    // What the suite's own summary says, scenario by scenario, is what the harness read from checks.json.
    for (const r of run.scenarios.values()) {
      const line = new RegExp(`^([✓✗]) ${r.scenario.replace(/[/-]/g, "\\$&")}: (\\d+) passed, (\\d+) failed`, "m").exec(run.stdout);
      expect(line, r.scenario).not.toBeNull();
      expect(line![1] === "✓", r.scenario).toBe(r.passed);
      expect(Number(line![3]), r.scenario).toBe(r.failures.length);
    }
    // server-everything speaks the 2025 era, and has none of the suite's fixed fixture tools.
    for (const s of ["server-initialize", "ping", "tools-list", "logging-set-level", "resources-list", "prompts-list", "server-sse-multiple-streams"]) {
      expect(run.scenarios.get(s)?.passed, `${s}\n${summarize(run.scenarios.values())}`).toBe(true);
    }
    expect(run.scenarios.get("tools-call-image")?.failures.map((f) => f.errorMessage)).toEqual(["No image content found"]);
    // The suite exits nonzero when a scored scenario fails.
    expect(run.code).toBe(1);
  }, SLOW);
});

describe("fabric dev's /mcp, under the official conformance suite", () => {
  let f: McpFabric;
  const runs = new Map<Revision, ConformanceRun>();

  beforeAll(async () => {
    await ensureTool(CONFORMANCE);
    f = await startMcpFabric();
    await waitForNodeTypes(f.fabric.urls["node-registry"], ["test_simple_text", "test_error_handling", "test_tool_with_progress", "conformance.step", "json_schema_2020_12_tool"]);
  }, SLOW);
  afterAll(async () => {
    await f?.stop();
  });

  it("names a decision for every server scenario of both requirement sets", async () => {
    for (const rev of REVISIONS) {
      const req = await requirementSet(rev);
      const named = [...req.server, ...req.notScored.filter((n) => n.leg === "server").map((n) => n.scenario)];
      const undecided = named.filter((s) => !(s in SERVER_SCOPE));
      expect(undecided, `scenarios of ${rev} with no decision in support-mcp/scope.ts`).toEqual([]);
    }
  }, SLOW);

  for (const rev of REVISIONS) {
    it(`passes every scenario of the ${rev} requirement set that applies to a tools-only server`, async () => {
      const run = await runConformanceServer(f.mcp, ["--requirements", rev]);
      runs.set(rev, run);
      const report: string[] = [`$ ${run.command}  (exit ${run.code})`];
      const failing: ScenarioResult[] = [];
      const na = new Map<string, string[]>();
      const notApplicable = (s: string, reason: string) => na.set(reason, [...(na.get(reason) ?? []), s]);
      for (const r of [...run.scenarios.values()].sort((a, b) => a.scenario.localeCompare(b.scenario))) {
        const scope = scopeFor(SERVER_SCOPE[r.scenario], rev);
        if (!scope) {
          failing.push(r);
          continue;
        }
        if (!scope.applies) {
          const ran = r.checks.some((c) => c.status === "SUCCESS");
          notApplicable(r.scenario + (r.passed && ran ? " (passes anyway)" : r.passed ? " (nothing exercised)" : ""), scope.reason);
          continue;
        }
        const failures = r.failures.filter((c) => !(scope.notApplicableChecks && c.id in scope.notApplicableChecks));
        const counted = r.checks.filter((c) => !(scope.notApplicableChecks && c.id in scope.notApplicableChecks));
        const tally = (st: string) => counted.filter((c) => c.status === st).length;
        // A scenario that applies must have exercised something: all-skipped is not a pass.
        const verdict = failures.length === 0 && tally("SUCCESS") > 0;
        const counts = `${tally("SUCCESS")} ok, ${tally("WARNING")} warning, ${tally("SKIPPED")} skipped, ${failures.length} failed`;
        report.push(`${verdict ? "PASS" : "FAIL"} ${r.scenario} (${counts})${scope.reportOnly ? " [reported only]" : ""}`);
        for (const c of counted.filter((c) => c.status === "WARNING" || c.status === "SKIPPED")) report.push(`       ${c.status.toLowerCase()} ${c.id}: ${(c.errorMessage ?? c.description ?? "").slice(0, 200)}`);
        for (const c of failures) report.push(`       ✗ ${c.id}: ${(c.errorMessage ?? "").slice(0, 300)}`);
        if (!verdict && !scope.reportOnly) failing.push({ ...r, failures });
      }
      for (const [reason, list] of na) report.push(`n/a  ${list.join(", ")}\n       because ${reason}`);
      console.log(`conformance ${rev} against ${f.mcp}\n${report.join("\n")}`);
      expect(failing.map((r) => r.scenario), `${report.join("\n")}\n\nfabric output:\n${f.fabric.output().slice(-4000)}`).toEqual([]);
      // Every scenario the set names ran (none silently missing from the results).
      const req = await requirementSet(rev);
      for (const s of req.server) expect(run.scenarios.has(s), `${s} did not run:\n${run.stdout.slice(-3000)}`).toBe(true);
    }, SLOW);
  }
});

describe("the conformance suite's client leg: import --from-mcp and mcp.call runs as the client", () => {
  let f: McpFabric;
  const probe = path.join(repo, "test/e2e/support-mcp/conformance-client.mjs");

  beforeAll(async () => {
    await ensureTool(CONFORMANCE);
    // The scenario servers listen on loopback: the operator allows it, as anyone running MCP servers beside the fabric.
    f = await startMcpFabric({ handlers: ["@nodefabric/handler-mcp"], env: { FABRIC_EXECUTOR_EGRESS_ALLOW_CIDRS: "127.0.0.1/32,::1/128" } });
    await waitForNodeTypes(f.fabric.urls["node-registry"], ["mcp.call"]);
  }, SLOW);
  afterAll(async () => {
    await f?.stop();
  });

  it("names a decision for every client scenario of both requirement sets", async () => {
    for (const rev of REVISIONS) {
      const req = await requirementSet(rev);
      const named = [...req.client, ...req.notScored.filter((n) => n.leg === "client").map((n) => n.scenario)];
      expect(named.filter((s) => !clientScope(s)), `client scenarios of ${rev} with no decision in support-mcp/scope.ts`).toEqual([]);
    }
  }, SLOW);

  for (const rev of REVISIONS) {
    it(`passes every client scenario of the ${rev} requirement set that applies`, async () => {
      const req = await requirementSet(rev);
      const named = [...new Set([...req.client, ...req.notScored.filter((n) => n.leg === "client").map((n) => n.scenario)])].sort();
      const env = { NF_CLI: CLI, NF_NODE: process.execPath, NF_REGISTRY: f.fabric.urls["node-registry"], NF_GATEWAY: f.gateway };
      const report: string[] = [];
      const failing: string[] = [];
      const na = new Map<string, string[]>();
      for (const scenario of named) {
        const scope = clientScope(scenario)!;
        if (!scope.applies) {
          na.set(scope.reason, [...(na.get(scope.reason) ?? []), scenario]);
          continue;
        }
        const run = await runConformanceClient(`node "${probe}"`, ["--scenario", scenario, "--spec-version", rev], { env });
        const r = run.scenarios.get(scenario);
        // Passed as the suite counts it, and something was exercised (all-skipped is not a pass).
        const verdict = !!r?.passed && r.checks.some((c) => c.status === "SUCCESS");
        report.push(`${verdict ? "PASS" : "FAIL"} ${scenario}   $ ${run.command}`);
        if (!r) report.push(`       no results:\n${run.stdout.slice(-2000)}\n${run.stderr.slice(-2000)}`);
        for (const c of r?.failures ?? []) report.push(`       ✗ ${c.id}: ${(c.errorMessage ?? c.description ?? "").slice(0, 300)}`);
        if (!verdict) {
          report.push(run.stdout.slice(-1500));
          if (!scope.reportOnly) failing.push(scenario);
        }
      }
      for (const [reason, list] of na) report.push(`n/a  ${list.join(", ")}\n       because ${reason}`);
      console.log(`conformance client leg, ${rev}\n${report.join("\n")}`);
      expect(failing, report.join("\n")).toEqual([]);
    }, 600_000);
  }
});
