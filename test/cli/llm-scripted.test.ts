/**
 * What a new user tries first, with no model at all: `FABRIC_LLM_PROFILE=scripted npx fabric dev`, then
 * `npx fabric run llm.planner --input '{"goal":"…"}'` (the README's commands, run with the built CLI): the planner's
 * demo plan runs over the demo node types and the run completes, its events streamed as NDJSON.
 */
import { describe, it, expect, afterAll } from "vitest";
import { existsSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { CLI, freePortBase, runFabric, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually } from "../run-client.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

describe("the scripted LLM profile, as a new user tries it", () => {
  let fabric: FabricProcess | undefined;
  afterAll(async () => {
    await fabric?.stop();
  });

  it("fabric run llm.planner --input '{\"goal\":…}' completes against FABRIC_LLM_PROFILE=scripted", async () => {
    expect(existsSync(CLI), "core must be built (npm run build) for the fabric CLI").toBe(true);
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-llm-scripted-"));
    const base = await freePortBase();
    const clean = Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith("FABRIC_LLM_") || k.startsWith("ARP_LLM_")).map((k) => [k, undefined]));
    fabric = await startFabricProcess(["dev", "--port-base", String(base), "--data-dir", dataDir], { cwd: repo, env: { ...clean, FABRIC_LLM_PROFILE: "scripted" } });
    await eventually(async () => {
      const r = await call("GET", `${fabric!.urls["node-registry"]}/v1/executors?node_type_id=llm.planner`);
      return r.body?.length > 0 ? true : undefined;
    }, 20_000, "the planner's registration");

    const r = await runFabric(["run", "llm.planner", "--input", '{"goal":"Greet the team, then pause"}', "--gateway", fabric.urls["run-gateway"], "--registry", fabric.urls["node-registry"]], { cwd: repo });
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const lines: Json[] = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
    const run = lines.at(-1).run;
    expect(run.state).toBe("completed");
    const out = run.extensions["nodefabric.outputs"];
    expect(out.planner_summary).toMatch(/^The scripted plan ran/);
    expect(out.child_node_runs.map((c: Json) => c.node_type_ref.node_type_id)).toEqual(["demo.echo", "demo.sleep", "demo.echo"]);
    expect(lines.filter((e) => e.type === "node_run_created").length).toBeGreaterThanOrEqual(11);
  }, 90_000);
});
