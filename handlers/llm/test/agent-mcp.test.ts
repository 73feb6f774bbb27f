/**
 * An agent is a tool: `llm.agent` served as is through the fabric's /mcp (the MCP plugin loaded from source), listed
 * with its input schema and called with the official MCP client; the call is an ordinary run whose agent called its
 * own tool, against the scripted OpenAI-compatible stand-in on loopback.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { startLlmStandIn, type LlmStandIn } from "@nodefabric/sdk/testing";
import { loadConfig } from "../../../core/src/config.js";
import { startFabric, type RunningFabric } from "../../../core/src/fabric.js";
import type { LoadedPlugin } from "../../../core/src/plugin-loader.js";
import { SERVICE_NAMES } from "../../../core/src/http/service.js";
import mcpPlugin from "../../../plugins/mcp/src/index.js";
import { llmAgent, llmChat, resetLlmConfig } from "../src/index.js";
import { weather, type Json } from "./support/planner-kit.js";

const repoRoot = fileURLToPath(new URL("../../..", import.meta.url));
let fabric: RunningFabric;
let llm: LlmStandIn;
let client: Client;
let gateway: string;
let dataDir: string;
const saved = { ...process.env };

beforeAll(async () => {
  llm = await startLlmStandIn({
    respond: (b) => ((b.messages ?? []).some((m) => m.role === "tool") ? { content: `It is ${JSON.parse(String(b.messages!.at(-1)!.content)).temp_c} degrees.` } : { tool_calls: [{ name: "test_weather", arguments: { city: "Oslo" } }] }),
  });
  Object.assign(process.env, { FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "gpt-test", FABRIC_LLM_API_KEY: "sk-agent-mcp" });
  resetLlmConfig();
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "llm-agent-mcp-"));
  const config = loadConfig({ cwd: repoRoot, env: {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: [] } as never });
  const loaded: LoadedPlugin = { definition: mcpPlugin as never, source: "@nodefabric/plugin-mcp", file: fileURLToPath(new URL("../../../plugins/mcp/src/index.ts", import.meta.url)), discovered: false };
  fabric = await startFabric(config, SERVICE_NAMES, { plugins: [loaded], definitions: [llmChat, llmAgent, weather] });
  const url = (n: string) => fabric.services.find((s) => s.name === n)!.url;
  gateway = url("run-gateway");
  for (let i = 0; i < 300; i++) {
    const res = await fetch(`${url("node-registry")}/v1/node-types/llm.agent`).catch(() => undefined);
    if (res?.status === 200) break;
    await new Promise((r) => setTimeout(r, 30));
  }
  client = new Client({ name: "llm-agent-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway}/mcp`)) as never);
});

afterAll(async () => {
  await client?.close();
  await fabric?.close();
  await llm?.close();
  process.env = saved;
  resetLlmConfig();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe("llm.agent through /mcp", () => {
  it("is listed as a tool with its input schema, and a call runs the agent's loop as a run", async () => {
    const { tools } = await client.listTools();
    const agent = tools.find((t) => t.name === "llm.agent");
    expect(agent).toBeDefined();
    expect(agent!.inputSchema).toMatchObject({ type: "object", properties: { goal: { type: "string" }, tools: { type: "array" }, max_turns: { type: "integer" } } });

    const result = await client.callTool({ name: "llm.agent", arguments: { goal: "How warm is Oslo?", tools: ["test.weather"] } });
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ answer: "It is 4 degrees.", ended_by: "final", usage: { model_calls: 2, tool_calls: 1 } });
    const runId = (result._meta as Record<string, string>)["dev.nodefabric/run_id"];
    const nrs: Json[] = await (await fetch(`${gateway}/v1/runs/${runId}/node-runs`)).json();
    expect(nrs.map((n) => n.node_type_ref.node_type_id).sort()).toEqual(["llm.agent", "llm.chat", "llm.chat", "test.weather"]);
    expect(llm.calls).toHaveLength(2);
  });
});
