/**
 * `fabric dev` (the built CLI, discovering @nodefabric/handler-llm and @nodefabric/plugin-telemetry) as a user runs it,
 * with the scripted LLM profile as the default and a real endpoint profile beside it (the scripted OpenAI-compatible
 * stand-in on loopback), debug logs, and traces exported to a real OTLP receiver:
 * - what a new user tries first, with no model: `fabric run llm.planner --input '{"goal":…}'` (the README's command)
 *   completes with the planner's demo plan over the demo node types, and `fabric run llm.agent` with the README's goal
 *   calls demo.echo once and answers;
 * - the API key reaches the model on every call, and appears in no run document, NodeRun, event, log line or span.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { existsSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startLlmStandIn, type ChatRequestBody, type LlmStandIn, type StandInStep } from "@nodefabric/sdk/testing";
import { CLI, freePortBase, runFabric, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually, readNdjson } from "../run-client.js";
import { startOtlpReceiver, type OtlpReceiver } from "../support/otlp-receiver.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "sk-live-CANARY-7c1e9a04b2";
type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

let refuseNext = false;
function respond(body: ChatRequestBody): StandInStep | undefined {
  if (refuseNext) {
    refuseNext = false;
    return { fail: "unauthorized" };
  }
  if (body.response_format?.json_schema?.name === "plan") return { content: { subtasks: [{ id: "a", goal: "echo a greeting", after: [] }] } };
  if (body.response_format?.json_schema?.name === "evaluate") return { content: { summary: "done", success: true, recovery: [] } };
  return undefined;
}

let fabric: FabricProcess | undefined;
let llm: LlmStandIn | undefined;
let otlp: OtlpReceiver | undefined;

beforeAll(async () => {
  expect(existsSync(CLI), "core must be built (npm run build) for the fabric CLI").toBe(true);
  llm = await startLlmStandIn({ apiKey: KEY, respond });
  otlp = await startOtlpReceiver();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-llm-dev-"));
  const clean = Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith("FABRIC_LLM_") || k.startsWith("ARP_LLM_") || k.startsWith("OTEL_")).map((k) => [k, undefined]));
  fabric = await startFabricProcess(["dev", "--port-base", String(await freePortBase()), "--data-dir", dataDir], {
    cwd: repo,
    env: {
      ...clean,
      FABRIC_LLM_PROFILE: "scripted",
      FABRIC_LLM_BASE_URL: llm.url,
      FABRIC_LLM_MODEL: "gpt-test",
      FABRIC_LLM_API_KEY: KEY,
      FABRIC_LOG_LEVEL: "debug",
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_BSP_SCHEDULE_DELAY: "100",
    },
  });
  await eventually(async () => {
    const r = await call("GET", `${fabric!.urls["node-registry"]}/v1/executors?node_type_id=llm.planner`);
    return r.body?.length > 0 ? true : undefined;
  }, 20_000, "the planner's registration");
}, 60_000);

afterAll(async () => {
  await fabric?.stop();
  await llm?.close();
  await otlp?.close();
});

describe("the scripted LLM profile, as a new user tries it", () => {
  it("fabric run llm.planner --input '{\"goal\":…}' completes with no model", async () => {
    const r = await runFabric(["run", "llm.planner", "--input", '{"goal":"Greet the team, then pause"}', "--gateway", fabric!.urls["run-gateway"], "--registry", fabric!.urls["node-registry"]], { cwd: repo });
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const lines: Json[] = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
    const run = lines.at(-1).run;
    expect(run.state).toBe("completed");
    const out = run.extensions["nodefabric.outputs"];
    expect(out.planner_summary).toMatch(/^The scripted plan ran/);
    expect(out.child_node_runs.map((c: Json) => c.node_type_ref.node_type_id)).toEqual(["demo.echo", "demo.sleep", "demo.echo"]);
    expect(lines.filter((e) => e.type === "node_run_created").length).toBeGreaterThanOrEqual(11);
  }, 60_000);

  it("fabric run llm.agent --input '{\"goal\":…,\"tools\":[\"demo.echo\"]}' calls the tool once and answers, with no model", async () => {
    // The README's command, as written there.
    const r = await runFabric(["run", "llm.agent", "--input", '{"goal":"Greet the team with the echo tool","tools":["demo.echo"]}', "--gateway", fabric!.urls["run-gateway"], "--registry", fabric!.urls["node-registry"]], { cwd: repo });
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const lines: Json[] = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
    const run = lines.at(-1).run;
    expect(run.state).toBe("completed");
    const out = run.extensions["nodefabric.outputs"];
    expect(out).toMatchObject({ ended_by: "final", usage: { model_calls: 2, tool_calls: 1 } });
    expect(out.answer).toMatch(/^I greeted the team/);
    expect(out.steps[0].tool_calls[0]).toMatchObject({ name: "demo_echo", state: "completed", outputs: { echo: { greeting: "Hello, team!" } } });
  }, 60_000);
});

describe("the LLM API key stays a secret", () => {
  it("is sent to the model on every call, and is in no run, NodeRun, event, log line or span", async () => {
    const gw = fabric!.urls["run-gateway"];
    llm!.calls.length = 0;
    const chat = { node_type_id: "llm.chat", version: "1.0.0" };
    const ask = { messages: [{ role: "user", content: "hello" }], profile: "default" };
    const ok = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: chat, input: ask }, { prefer: "wait=20" });
    expect(ok.body.state).toBe("completed");
    refuseNext = true;
    const refused = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: chat, input: ask }, { prefer: "wait=20" });
    expect(refused.body.state).toBe("failed");
    const planned = await call(
      "POST",
      `${gw}/v1/runs`,
      { root_node_type_ref: { node_type_id: "llm.planner", version: "1.0.0" }, input: { goal: "greet", allowed_node_type_ids: ["demo.echo"], profile: "default" } },
      { prefer: "wait=30" },
    );
    expect(planned.body.state, JSON.stringify(planned.body.extensions)).toBe("completed");

    expect(llm!.calls.length).toBeGreaterThanOrEqual(5);
    expect(llm!.calls.every((c) => c.headers.authorization === `Bearer ${KEY}`)).toBe(true);

    let seen = "";
    for (const run of [ok.body, refused.body, planned.body]) {
      seen += JSON.stringify((await call("GET", `${gw}/v1/runs/${run.run_id}`)).body);
      seen += JSON.stringify((await call("GET", `${gw}/v1/runs/${run.run_id}/node-runs`)).body);
      seen += JSON.stringify((await readNdjson(`${gw}/v1/runs/${run.run_id}/events?follow=false`)).lines);
    }
    expect(seen).toContain("llm_auth_error");
    // The spans of the LLM calls' NodeRuns, exported while the fabric runs.
    const spans = await otlp!.waitForSpans((s) => s.filter((x) => String(x.attributes["nodefabric.node_type_id"] ?? "") === "llm.chat").length >= 3, 15_000);
    const spanText = JSON.stringify(spans, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v));
    const log = fabric!.output();
    expect(log.length).toBeGreaterThan(1000);
    for (const [what, text] of [["runs, NodeRuns and events", seen], ["spans", spanText], ["logs", log]] as const) {
      expect(text.includes("CANARY"), `the key is in the ${what}`).toBe(false);
    }
  }, 60_000);
});
