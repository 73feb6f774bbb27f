/**
 * The LLM node types through the fabric's A2A server (the A2A plugin loaded from source), against the scripted
 * OpenAI-compatible stand-in on loopback: a message naming no skill is a goal for `llm.planner`, whose run is the
 * task, completed with the plan's outputs as its artifact; and `llm.agent` named as a skill runs its loop, its answer
 * the task's artifact (a data part and a text part).
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startLlmStandIn, type ChatRequestBody, type LlmStandIn, type StandInStep } from "@nodefabric/sdk/testing";
import { loadConfig } from "../../../core/src/config.js";
import { startFabric, type RunningFabric } from "../../../core/src/fabric.js";
import type { LoadedPlugin } from "../../../core/src/plugin-loader.js";
import { SERVICE_NAMES } from "../../../core/src/http/service.js";
import a2aPlugin from "../../../plugins/a2a/src/index.js";
import { functionNameOf, llmAgent, llmChat, llmPlanner, planApproval, resetLlmConfig } from "../src/index.js";
import { brain, fx, report, weather, type Json } from "./support/planner-kit.js";

const repoRoot = fileURLToPath(new URL("../../..", import.meta.url));
const ECHO = functionNameOf("demo.echo", new Set());
let fabric: RunningFabric;
let llm: LlmStandIn;
let gateway: string;
let dataDir: string;
const saved = { ...process.env };

/** The planner plans one subtask (the weather); the agent calls demo.echo once, then answers. */
const planner = brain({ plan: () => ({ content: { subtasks: [{ id: "w", goal: "current weather in Oslo", after: [] }] } }), evaluate: () => ({ content: { summary: "Oslo is at 4 degrees.", success: true, recovery: [] } }) });
function respond(body: ChatRequestBody): StandInStep | undefined {
  if (body.tools?.some((t) => t.function.name === ECHO)) {
    const tool = (body.messages ?? []).find((m) => m.role === "tool");
    return tool ? { content: `The echo said ${JSON.stringify(JSON.parse(String(tool.content)).echo)}.` } : { tool_calls: [{ name: ECHO, arguments: { said: "hi" } }] };
  }
  return planner(body);
}

beforeAll(async () => {
  llm = await startLlmStandIn({ respond });
  Object.assign(process.env, { FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "gpt-test", FABRIC_LLM_API_KEY: "sk-a2a-test" });
  resetLlmConfig();
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "llm-a2a-"));
  const config = loadConfig({ cwd: repoRoot, env: {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"] } as never });
  const loaded: LoadedPlugin = { definition: a2aPlugin as never, source: "@nodefabric/plugin-a2a", file: fileURLToPath(new URL("../../../plugins/a2a/src/index.ts", import.meta.url)), discovered: false };
  fabric = await startFabric(config, SERVICE_NAMES, { plugins: [loaded], definitions: [llmChat, llmPlanner, planApproval, llmAgent, weather, fx, report] });
  const url = (n: string) => fabric.services.find((s) => s.name === n)!.url;
  gateway = url("run-gateway");
  for (const id of ["llm.planner", "llm.agent", "demo.echo", "test.weather"]) {
    for (let i = 0; i < 300; i++) {
      const res = await fetch(`${url("node-registry")}/v1/node-types/${id}`).catch(() => undefined);
      if (res?.status === 200) break;
      await new Promise((r) => setTimeout(r, 30));
    }
  }
}, 30_000);

afterAll(async () => {
  await fabric?.close();
  await llm?.close();
  process.env = saved;
  resetLlmConfig();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/** SendMessage over JSON-RPC (A2A 1.0), blocking; the task it answers, followed with GetTask until it ends. */
async function send(message: Json): Promise<Json> {
  const post = async (method: string, params: Json) => {
    const res = await fetch(`${gateway}/a2a`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) });
    expect(res.status).toBe(200);
    const body: Json = await res.json();
    expect(body.error, JSON.stringify(body.error)).toBeUndefined();
    return body.result;
  };
  let task = (await post("SendMessage", { message: { messageId: `m-${Math.random().toString(16).slice(2)}`, role: "ROLE_USER", ...message } })).task;
  for (let i = 0; i < 600 && !/COMPLETED|FAILED|CANCELED|REJECTED|INPUT_REQUIRED/.test(task.status.state); i++) {
    await new Promise((r) => setTimeout(r, 50));
    task = await post("GetTask", { id: task.id });
  }
  return task;
}

describe("the LLM node types through A2A", () => {
  it("a text message naming no skill is a goal for llm.planner: the task is its run, completed with the plan's outputs as the artifact", async () => {
    const task = await send({ parts: [{ text: "How warm is it in Oslo?" }] });
    expect(task.status.state, JSON.stringify(task.status)).toBe("TASK_STATE_COMPLETED");
    const run: Json = await (await fetch(`${gateway}/v1/runs/${task.id}`)).json();
    const nrs: Json[] = await (await fetch(`${gateway}/v1/runs/${task.id}/node-runs`)).json();
    expect(nrs.filter((n) => n.node_type_ref.node_type_id !== "llm.chat").map((n) => n.node_type_ref.node_type_id).sort()).toEqual(["llm.planner", "test.weather"]);
    expect(run.state).toBe("completed");
    const outputs = run.extensions["nodefabric.outputs"];
    expect(outputs.planner_summary).toBe("Oslo is at 4 degrees.");
    expect(outputs.child_node_runs.map((c: Json) => [c.subtask_id, c.node_type_ref.node_type_id, c.state])).toEqual([["w", "test.weather", "completed"]]);
    expect(task.artifacts).toHaveLength(1);
    expect(task.artifacts[0].parts[0].data).toEqual(outputs);
    expect(task.artifacts[0].parts.find((p: Json) => typeof p.text === "string")?.text).toBe("Oslo is at 4 degrees.");
    expect(task.history[0].parts[0].text).toBe("How warm is it in Oslo?");
  });

  it("llm.agent named as a skill runs the agent's loop with its tools; its answer is the artifact, as data and as text", async () => {
    const task = await send({ parts: [{ data: { goal: "Echo hi, then tell me what it said", tools: ["demo.echo"] } }], metadata: { skillId: "llm.agent" } });
    expect(task.status.state, JSON.stringify(task.status)).toBe("TASK_STATE_COMPLETED");
    const run: Json = await (await fetch(`${gateway}/v1/runs/${task.id}`)).json();
    expect(run.state).toBe("completed");
    const nrs: Json[] = await (await fetch(`${gateway}/v1/runs/${task.id}/node-runs`)).json();
    expect(nrs.map((n) => n.node_type_ref.node_type_id).sort()).toEqual(["demo.echo", "llm.agent", "llm.chat", "llm.chat"]);
    const data = task.artifacts[0].parts[0].data;
    expect(data).toMatchObject({ answer: 'The echo said {"said":"hi"}.', ended_by: "final", usage: { model_calls: 2, tool_calls: 1 } });
    expect(task.artifacts[0].parts.find((p: Json) => typeof p.text === "string")?.text).toBe('The echo said {"said":"hi"}.');
  });
});
