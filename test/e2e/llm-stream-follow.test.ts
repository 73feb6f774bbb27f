/**
 * `fabric runs follow` on a `fabric dev` process (the built CLI, discovering @nodefabric/handler-llm), with llm.chat's
 * endpoint the scripted stand-in streaming a slow answer on loopback: the text is printed while the model is still
 * writing it (the run still running), then the whole answer and the outputs; the model URL on loopback is allowed
 * (an operator's profile), through the executor's egress policy. And `kill -9` of the fabric mid-stream: after the
 * restart the call is made again (the model gets a second request), the restart is counted on the NodeRun, and the
 * new attempt's deltas start again, saying so.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startLlmStandIn, type LlmStandIn } from "@nodefabric/sdk/testing";
import { CLI, freePortBase, runFabric, startFabricProcess, type FabricProcess } from "./fabric-cli.js";
import { call, eventually, readNdjson } from "../run-client.js";

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

describe("a crash mid-stream", () => {
  let crashing: FabricProcess | undefined;
  let model: LlmStandIn | undefined;
  afterAll(async () => {
    await crashing?.stop("SIGKILL");
    await model?.close();
  });

  it("makes the call again after kill -9, counts the restart, and the new attempt's text starts over", async () => {
    let calls = 0;
    // The first call streams slowly (the fabric dies during it); the call made again answers at once.
    model = await startLlmStandIn({ respond: () => (++calls === 1 ? { content: WORDS, stream: { chunk_chars: 6, delay_ms: 150 } } : { content: "Answered again." }) });
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-llm-stream-crash-"));
    const args = ["dev", "--port-base", String(await freePortBase()), "--data-dir", dataDir];
    const clean = Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith("FABRIC_LLM_") || k.startsWith("ARP_LLM_")).map((k) => [k, undefined]));
    const env = { ...clean, FABRIC_LLM_BASE_URL: model.url, FABRIC_LLM_MODEL: "gpt-test", FABRIC_LLM_API_KEY: "sk-crash" };
    crashing = await startFabricProcess(args, { cwd: repo, env });
    await eventually(async () => {
      const r = await call("GET", `${crashing!.urls["node-registry"]}/v1/executors?node_type_id=llm.chat`);
      return r.body?.length > 0 ? true : undefined;
    }, 30_000, "llm.chat's registration");
    const started = await call("POST", `${crashing.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: { node_type_id: "llm.chat", version: "1.0.0" }, input: { messages: [{ role: "user", content: "Count." }] } });
    expect(started.status).toBe(200);
    const runId = started.body.run_id as string;
    const deltasNow = async () => (await readNdjson(`${crashing!.urls["run-gateway"]}/v1/runs/${runId}/events?follow=false&types=node_run_output_delta`)).lines;
    await eventually(async () => ((await deltasNow()).length >= 2 ? true : undefined), 30_000, "the first deltas");
    expect(await crashing.stop("SIGKILL")).toBe(null);

    crashing = await startFabricProcess(args, { cwd: repo, env });
    const gw = crashing.urls["run-gateway"];
    const run = await eventually(async () => {
      const r = await call("GET", `${gw}/v1/runs/${runId}`);
      return ["completed", "failed", "canceled"].includes(r.body?.state) ? r.body : undefined;
    }, 90_000, "the run ended after the restart");
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    expect(run.extensions["nodefabric.outputs"].content).toBe("Answered again.");
    expect(model.calls).toHaveLength(2);

    const nr = (await call("GET", `${gw}/v1/node-runs/${run.root_node_run_id}`)).body;
    expect(nr.extensions["nodefabric.output_stream"]).toMatchObject({ streams: 2, restarts: 1 });
    const deltas = await deltasNow();
    const last = nr.extensions["nodefabric.output_stream"].attempt;
    const before = deltas.filter((d) => d.data.attempt < last);
    const after = deltas.filter((d) => d.data.attempt === last);
    expect(WORDS.startsWith(before.map((d) => d.data.text).join(""))).toBe(true);
    expect(after[0].data).toMatchObject({ index: 0, offset: 0, restarted: true });
    expect(after.map((d) => d.data.text).join("")).toBe("Answered again.");
  }, 180_000);
});
