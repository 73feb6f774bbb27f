/**
 * `fabric runs follow` on a `fabric dev` process (the built CLI, discovering @nodefabric/handler-llm), with llm.chat's
 * endpoint the scripted stand-in streaming a slow answer on loopback: the text is printed while the model is still
 * writing it (the run still running), then the whole answer and the outputs; the model URL on loopback is allowed
 * (an operator's profile), through the executor's egress policy.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startLlmStandIn, type LlmStandIn } from "@nodefabric/sdk/testing";
import { CLI, freePortBase, runFabric, startFabricProcess, type FabricProcess } from "./fabric-cli.js";
import { call, eventually } from "../run-client.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const WORDS = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ");

let fabric: FabricProcess | undefined;
let llm: LlmStandIn | undefined;

beforeAll(async () => {
  expect(existsSync(CLI), "core must be built (npm run build) for the fabric CLI").toBe(true);
  llm = await startLlmStandIn();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-llm-follow-"));
  const clean = Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith("FABRIC_LLM_") || k.startsWith("ARP_LLM_")).map((k) => [k, undefined]));
  fabric = await startFabricProcess(["dev", "--port-base", String(await freePortBase()), "--data-dir", dataDir], {
    cwd: repo,
    env: { ...clean, FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "gpt-test", FABRIC_LLM_API_KEY: "sk-follow" },
  });
  await eventually(async () => {
    const r = await call("GET", `${fabric!.urls["node-registry"]}/v1/executors?node_type_id=llm.chat`);
    return r.body?.length > 0 ? true : undefined;
  }, 30_000, "llm.chat's registration");
}, 120_000);

afterAll(async () => {
  await fabric?.stop();
  await llm?.close();
});

describe("fabric runs follow", () => {
  it("prints an LLM's answer while it is being written, then the outputs", async () => {
    // 60 words, 6 characters a chunk, 100 ms apart: the answer takes seconds to write.
    llm!.script({ content: WORDS, stream: { chunk_chars: 6, delay_ms: 100 } });
    const gateway = fabric!.urls["run-gateway"];
    const started = await runFabric(["run", "llm.chat@1.0.0", "--no-follow", "--json", "--input", JSON.stringify({ messages: [{ role: "user", content: "Count." }] }), "--gateway", gateway], { cwd: repo });
    expect(started.code, started.stderr).toBe(0);
    const runId: string = JSON.parse(started.stdout).run.run_id;

    const child = spawn(process.execPath, [CLI, "runs", "follow", runId, "--gateway", gateway], { cwd: repo, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));

    // The first words are printed while the model is still writing the rest.
    await eventually(async () => (out.includes("word1 ") ? true : undefined), 60_000, "the first words in the follow output");
    const mid = await call("GET", `${gateway}/v1/runs/${runId}`);
    expect(mid.body.state).toBe("running");
    expect(out).not.toContain("word59");

    expect(await exited, err).toBe(0);
    expect(out).toContain("… llm.chat@1.0.0 writes:\n" + WORDS + "\n✓ llm.chat@1.0.0 completed");
    expect(out).toMatch(/outputs\n[\s\S]*"content": "word0 word1/);
  }, 120_000);
});
