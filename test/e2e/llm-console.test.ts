/**
 * Tried as a new user would: `fabric dev` (what `npm start` runs) with the scripted LLM profile and a redaction rule,
 * `fabric run llm.planner --input '{"goal":…}'`, then the run followed in the console (Debian's chromium): the planner's
 * llm.chat NodeRuns are in the tree, and one of them shows its prompt (the goal hidden by FABRIC_CONSOLE_REDACT), its
 * answer and its token usage.
 */
import { describe, it, expect, afterAll } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePortBase, runFabric, startFabricProcess, type FabricProcess } from "./fabric-cli.js";
import { call, eventually } from "../run-client.js";
import { REPO, launchBrowser, open, tid, waitForText, type ConsoleBrowser, type ConsoleFabric } from "./console/harness.js";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const GOAL = "Greet the team, then pause";

describe("an llm.planner run followed in the console", () => {
  let fabric: FabricProcess | undefined;
  let browser: ConsoleBrowser | undefined;
  afterAll(async () => {
    await browser?.close();
    await fabric?.stop();
  });

  it("shows each llm.chat NodeRun's prompt, redacted by the configured rule, its answer and its token usage", async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-llm-console-"));
    const clean = Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith("FABRIC_LLM_") || k.startsWith("ARP_LLM_")).map((k) => [k, undefined]));
    fabric = await startFabricProcess(["dev", "--port-base", String(await freePortBase()), "--data-dir", dataDir], {
      cwd: REPO,
      env: { ...clean, FABRIC_LLM_PROFILE: "scripted", FABRIC_CONSOLE_REDACT: JSON.stringify(["Greet the team"]) },
    });
    const gateway = fabric.urls["run-gateway"];
    await eventually(async () => {
      const r = await call("GET", `${fabric!.urls["node-registry"]}/v1/executors?node_type_id=llm.planner`);
      return r.body?.length > 0 ? true : undefined;
    }, 20_000, "the planner's registration");

    const r = await runFabric(["run", "llm.planner", "--input", JSON.stringify({ goal: GOAL }), "--gateway", gateway, "--registry", fabric.urls["node-registry"]], { cwd: REPO });
    expect(r.code, r.stderr).toBe(0);
    const run = JSON.parse(r.stdout.trim().split("\n").at(-1)!).run;
    expect(run.state).toBe("completed");
    const nrs: Json[] = (await call("GET", `${gateway}/v1/runs/${run.run_id}/node-runs`)).body;
    const plan = nrs.find((n) => n.node_type_ref.node_type_id === "llm.chat" && n.extensions?.["nodefabric.metadata"]?.labels?.["nodefabric.llm.purpose"] === "plan") ?? nrs.find((n) => n.node_type_ref.node_type_id === "llm.chat");
    expect(plan).toBeDefined();

    browser = await launchBrowser();
    const page = await browser.newPage();
    const f = { consoleUrl: `${gateway}/console/` } as ConsoleFabric;
    await open(page.page, f, `#/runs/${run.run_id}`);
    await waitForText(tid(page.page, "run-state"), /completed/);
    await eventually(async () => ((await tid(page.page, "node-row").count()) > 1 ? true : undefined), 15_000, "the tree's rows");

    await open(page.page, f, `#/runs/${run.run_id}?node=${plan.node_run_id}`);
    const panel = tid(page.page, "node-panel");
    await panel.waitFor();
    const call_ = panel.getByTestId("node-llm-call");
    await call_.waitFor();
    const prompt = await call_.getByTestId("node-llm-prompt").innerText();
    expect(prompt).toContain("[redacted]");
    expect(prompt).not.toContain("Greet the team");
    await waitForText(call_.getByTestId("node-llm-usage"), /^\d+ prompt \+ \d+ completion = \d+/);
    await waitForText(call_.getByTestId("node-llm-answer"), /echo a greeting/);
    expect(await panel.getByTestId("node-inputs").innerText()).not.toContain("Greet the team");
    expect(browser.takeErrors()).toEqual([]);
  }, 120_000);
});
