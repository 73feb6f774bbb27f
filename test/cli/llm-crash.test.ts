/**
 * The planner's durability guarantee, with a real crash: `fabric dev` (the built CLI, which discovers
 * @nodefabric/handler-llm in node_modules) runs an llm.planner against the scripted OpenAI-compatible stand-in of
 * @nodefabric/sdk/testing on loopback. A first run goes uninterrupted, for the count of model calls. A second one is
 * killed with SIGKILL in the middle of its plan (its first wave's children running), and the fabric is started again on
 * the same data: the run ends completed, the stand-in received at most one call more than the uninterrupted run, and
 * no child NodeRun is duplicated.
 */
import { describe, it, expect, afterAll } from "vitest";
import { existsSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startLlmStandIn, type ChatRequestBody, type LlmStandIn, type StandInStep } from "@nodefabric/sdk/testing";
import { CLI, freePortBase, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually, readNdjson } from "../run-client.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const TERMINAL = new Set(["completed", "failed", "canceled"]);
const KEY = "sk-crash-test-CANARY-51d0";

function firstUser(body: ChatRequestBody): Json {
  try {
    return JSON.parse(String((body.messages ?? []).find((m) => m.role === "user")?.content ?? "{}"));
  } catch {
    return {};
  }
}

/** The scripted model: a plan of a slow subtask and a fast one in parallel, then a third that needs both. */
function brain(body: ChatRequestBody): StandInStep | undefined {
  const name = body.response_format?.json_schema?.name;
  const u = firstUser(body);
  switch (name) {
    case "plan":
      return {
        content: {
          subtasks: [
            { id: "slow", goal: "sleep a while", after: [] },
            { id: "fast", goal: "echo a greeting", after: [] },
            { id: "last", goal: "echo both results", after: ["slow", "fast"] },
          ],
        },
      };
    case "choose":
      return { content: { choice: u.subtask.id === "slow" ? "demo.sleep@1.0.0" : "demo.echo@1.0.0" } };
    case "inputs":
      return { content: String(body.messages?.[0]?.content).includes("demo.sleep") ? { ms: 2500, value: u.goal } : { text: u.subtask.goal, earlier: u.earlier_results } };
    case "evaluate":
      return { content: { summary: `done: ${u.goal}`, success: true, recovery: [] } };
  }
  return undefined;
}

describe("llm.planner survives a kill -9 of the fabric", () => {
  let fabric: FabricProcess | undefined;
  let llm: LlmStandIn | undefined;
  afterAll(async () => {
    await fabric?.stop("SIGKILL");
    await llm?.close();
  });

  it("ends the run after a restart, with at most one model call more than an uninterrupted run and no duplicated child", async () => {
    expect(existsSync(CLI), "core must be built (npm run build) for the fabric CLI").toBe(true);
    expect(existsSync(path.join(repo, "handlers/llm/dist/index.js")), "handlers/llm must be built").toBe(true);
    llm = await startLlmStandIn({ respond: brain });
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-llm-crash-"));
    const base = await freePortBase();
    const args = ["dev", "--port-base", String(base), "--data-dir", dataDir];
    // Debug logs, so the check below that the key is in no log line covers everything the fabric can log.
    const env = { FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "scripted-model", FABRIC_LLM_API_KEY: KEY, FABRIC_LOG_LEVEL: "debug" };
    fabric = await startFabricProcess(args, { cwd: repo, env });
    const gw = fabric.urls["run-gateway"];
    await eventually(async () => {
      const r = await call("GET", `${fabric!.urls["node-registry"]}/v1/executors?node_type_id=llm.planner`);
      return r.body?.length > 0 ? true : undefined;
    }, 20_000, "the planner's registration");

    const planner = { node_type_id: "llm.planner", version: "1.0.0" };
    const callsFor = (goal: string) => llm!.calls.filter((c) => firstUser(c.body).goal === goal);
    const uninterrupted = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: planner, input: { goal: "first goal", allowed_node_type_ids: ["demo.sleep", "demo.echo"] } }, { prefer: "wait=30" });
    expect(uninterrupted.body.state, JSON.stringify(uninterrupted.body)).toBe("completed");
    const expected = callsFor("first goal").length;
    expect(expected).toBe(8); // plan, 3 × choose, 3 × inputs, evaluate

    const started = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: planner, input: { goal: "second goal", allowed_node_type_ids: ["demo.sleep", "demo.echo"] } });
    expect(started.status).toBe(200);
    const runId = started.body.run_id as string;
    // Both inputs of the first wave written: its demo.sleep is running when the process dies.
    await eventually(async () => (callsFor("second goal").length >= 6 ? true : undefined), 20_000, "the first wave started");
    await new Promise((r) => setTimeout(r, 300));
    const firstLog = fabric.output();
    expect(await fabric.stop("SIGKILL")).toBe(null);
    const beforeRestart = callsFor("second goal").length;

    fabric = await startFabricProcess(args, { cwd: repo, env });
    const run = await eventually(async () => {
      const r = await call("GET", `${fabric!.urls["run-gateway"]}/v1/runs/${runId}`);
      return TERMINAL.has(r.body?.state) ? r.body : undefined;
    }, 60_000, "the run ended after the restart");
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    const total = callsFor("second goal").length;
    expect(total).toBeGreaterThanOrEqual(expected);
    expect(total).toBeLessThanOrEqual(expected + 1);
    expect(beforeRestart).toBeGreaterThanOrEqual(6);
    expect(beforeRestart).toBeLessThan(expected);

    const nrs: Json[] = (await call("GET", `${fabric.urls["run-gateway"]}/v1/runs/${runId}/node-runs`)).body;
    const children = nrs.filter((n) => n.parent_node_run_id === run.root_node_run_id);
    const chats = children.filter((n) => n.node_type_ref.node_type_id === "llm.chat");
    const subtasks = children.filter((n) => n.node_type_ref.node_type_id !== "llm.chat");
    expect(chats).toHaveLength(expected);
    expect(subtasks.map((n) => n.node_type_ref.node_type_id).sort()).toEqual(["demo.echo", "demo.echo", "demo.sleep"]);
    const out = run.extensions["nodefabric.outputs"];
    expect(out.child_node_runs.map((c: Json) => [c.subtask_id, c.state])).toEqual([
      ["slow", "completed"],
      ["fast", "completed"],
      ["last", "completed"],
    ]);
    expect(out.planner_summary).toBe("done: second goal");

    // The key went to the model on every call, and into no log line, run, NodeRun or event.
    expect(llm.calls.every((c) => c.headers.authorization === `Bearer ${KEY}`)).toBe(true);
    const events = await readNdjson(`${fabric.urls["run-gateway"]}/v1/runs/${runId}/events?follow=false`);
    expect(events.lines.length).toBeGreaterThan(20);
    const everything = firstLog + fabric.output() + JSON.stringify(run) + JSON.stringify(nrs) + JSON.stringify(events.lines);
    expect(firstLog.length).toBeGreaterThan(1000);
    expect(everything).not.toContain("CANARY");
  }, 150_000);
});
