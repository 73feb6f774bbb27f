/**
 * The scripted profile: with FABRIC_LLM_PROFILE=scripted and no model at all, llm.planner runs its shipped demo plan
 * (scripted/demo-fixtures.json) over the demo node types; what the fixtures leave out is answered to fit the schema.
 * A fixtures file of one's own (FABRIC_LLM_FIXTURES) replaces them.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fabricFixture, type FabricFixture } from "@nodefabric/core/testing";
import { llmChat, llmPlanner, planApproval, resetLlmConfig } from "../src/index.js";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

let fabric: FabricFixture;
let dir: string;
const saved = { ...process.env };

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "llm-scripted-"));
  for (const k of Object.keys(process.env)) if (k.startsWith("FABRIC_LLM_") || k.startsWith("ARP_LLM_")) delete process.env[k];
  process.env.FABRIC_LLM_PROFILE = "scripted";
  resetLlmConfig();
  fabric = await fabricFixture({ definitions: [llmChat, llmPlanner, planApproval], handlers: ["@nodefabric/handler-demo"] });
});

afterAll(async () => {
  await fabric?.close();
  process.env = saved;
  resetLlmConfig();
  rmSync(dir, { recursive: true, force: true });
});

describe("the scripted profile", () => {
  it("runs the demo plan with no model: three subtasks, eight llm.chat NodeRuns with usage", async () => {
    const run: Json = await fabric.run("llm.planner", { goal: "Greet the team, then pause" });
    expect(run.state, JSON.stringify(run.extensions["nodefabric.error"])).toBe("completed");
    const out = run.extensions["nodefabric.outputs"];
    expect(out.success).toBe(true);
    expect(out.planner_summary).toMatch(/^The scripted plan ran/);
    expect(out.child_node_runs.map((c: Json) => [c.subtask_id, c.node_type_ref.node_type_id, c.state])).toEqual([
      ["greet", "demo.echo", "completed"],
      ["pause", "demo.sleep", "completed"],
      ["recap", "demo.echo", "completed"],
    ]);
    const chats = (await fabric.nodeRuns(run.run_id)).filter((n: Json) => n.node_type_ref.node_type_id === "llm.chat");
    expect(chats.length).toBe(out.usage.model_calls);
    for (const c of chats as Json[]) expect(c.outputs).toMatchObject({ profile: "scripted", model: "scripted-model", cost: 0 });
  });

  it("takes JARVIS's input names: prompt for goal, with context, max_steps and max_depth; and refuses neither", async () => {
    const run: Json = await fabric.run("llm.planner", { prompt: "Greet the team, then pause", context: { team: "core" }, max_steps: 3, max_depth: 0 });
    expect(run.state, JSON.stringify(run.extensions["nodefabric.error"])).toBe("completed");
    const none: Json = await fabric.run("llm.planner", { context: {} });
    expect(none.state).toBe("failed");
    expect(none.extensions["nodefabric.error"].code).toBe("invalid_inputs");
  });

  it("answers llm.chat from a fixtures file of one's own", async () => {
    const file = path.join(dir, "fixtures.json");
    writeFileSync(file, JSON.stringify([{ contains: "capital of Norway", content: "Oslo" }]));
    process.env.FABRIC_LLM_FIXTURES = file;
    resetLlmConfig();
    const run: Json = await fabric.run("llm.chat", { messages: [{ role: "user", content: "What is the capital of Norway?" }] });
    expect(run.extensions["nodefabric.outputs"]).toMatchObject({ content: "Oslo", finish_reason: "stop", profile: "scripted" });
    delete process.env.FABRIC_LLM_FIXTURES;
    resetLlmConfig();
  });
});
