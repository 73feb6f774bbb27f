/**
 * The console shows an LLM's answer being written: `fabric dev` with llm.chat's endpoint the scripted stand-in
 * streaming slowly on loopback; the run's page (Debian's chromium) shows the first words above the tree while the run
 * is still running, then the NodeRun's panel holds the whole text once it completed.
 */
import { describe, it, expect, afterAll } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startLlmStandIn, type LlmStandIn } from "@nodefabric/sdk/testing";
import { freePortBase, startFabricProcess, type FabricProcess } from "./fabric-cli.js";
import { call, eventually } from "../run-client.js";
import { REPO, launchBrowser, open, tid, waitForText, type ConsoleBrowser, type ConsoleFabric } from "./console/harness.js";

const WORDS = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ");

describe("an llm.chat run followed in the console", () => {
  let fabric: FabricProcess | undefined;
  let browser: ConsoleBrowser | undefined;
  let llm: LlmStandIn | undefined;
  afterAll(async () => {
    await browser?.close();
    await fabric?.stop();
    await llm?.close();
  });

  it("shows the answer as it is written, then all of it in the NodeRun's panel", async () => {
    llm = await startLlmStandIn();
    llm.script({ content: WORDS, stream: { chunk_chars: 6, delay_ms: 120 } });
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-llm-stream-console-"));
    const clean = Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith("FABRIC_LLM_") || k.startsWith("ARP_LLM_")).map((k) => [k, undefined]));
    fabric = await startFabricProcess(["dev", "--port-base", String(await freePortBase()), "--data-dir", dataDir], {
      cwd: REPO,
      env: { ...clean, FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "gpt-test", FABRIC_LLM_API_KEY: "sk-console" },
    });
    const gateway = fabric.urls["run-gateway"];
    await eventually(async () => {
      const r = await call("GET", `${fabric!.urls["node-registry"]}/v1/executors?node_type_id=llm.chat`);
      return r.body?.length > 0 ? true : undefined;
    }, 30_000, "llm.chat's registration");
    browser = await launchBrowser();
    const page = await browser.newPage();
    const f = { consoleUrl: `${gateway}/console/` } as ConsoleFabric;

    const started = await call("POST", `${gateway}/v1/runs`, { root_node_type_ref: { node_type_id: "llm.chat", version: "1.0.0" }, input: { messages: [{ role: "user", content: "Count." }] } });
    expect(started.status).toBe(200);
    const runId = started.body.run_id as string;
    await open(page.page, f, `#/runs/${runId}`);
    const writing = tid(page.page, "run-streamed-text");
    await waitForText(writing, /word1 /, 30_000);
    expect(await writing.getAttribute("data-writing")).toBe("true");
    expect(await writing.innerText()).not.toContain("word59");

    await waitForText(tid(page.page, "run-state"), /completed/, 60_000);
    const nr = (await call("GET", `${gateway}/v1/runs/${runId}`)).body.root_node_run_id as string;
    await open(page.page, f, `#/runs/${runId}?node=${nr}`);
    const panel = tid(page.page, "node-panel");
    await panel.waitFor();
    const text = panel.getByTestId("node-streamed-text");
    await waitForText(text, /word59/);
    expect((await text.innerText()).trim()).toBe(WORDS);
    expect(await text.getAttribute("data-writing")).toBe("false");
    expect(browser.takeErrors()).toEqual([]);
  }, 150_000);
});
