/**
 * What the agent's tests share: a fabric (core's fabricFixture) serving llm.chat, llm.agent and the test tools, with an
 * optional Cedar policy, against the scripted OpenAI-compatible stand-in on loopback; the tools; and helpers that start
 * a run, wait for its end or its approval, and read what the model was sent.
 */
import { expect } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { defineAtomic } from "@nodefabric/sdk";
import { fabricFixture, type FabricFixture } from "@nodefabric/core/testing";
import { startLlmStandIn, type ChatRequestBody, type LlmStandIn, type StandInStep } from "@nodefabric/sdk/testing";
import { llmAgent, llmChat, resetLlmConfig } from "../../src/index.js";
import { fx, pay, started, weather, type Json } from "./planner-kit.js";

export { started, type Json };

function tool(id: string, side: "read" | "write", extra: Record<string, unknown> = {}) {
  return defineAtomic<Json, Json>({
    nodeType: {
      node_type_id: id,
      version: "1.0.0",
      description: `Test tool ${id}: takes a text`,
      input_schema: { type: "object", properties: { text: { type: "string", minLength: 1 } }, required: ["text"], additionalProperties: false },
      output_schema: { type: "object" },
      constraints: { gates: { side_effect_class: side, ...extra } },
    },
    handler(inputs) {
      (started[id] ??= []).push(Date.now());
      return { done: inputs.text };
    },
  });
}
const notify = tool("test.notify", "write");
const ship = tool("test.ship", "write", { require_approval: true });
/** Calls of test.meet running now, or since the last reset. */
export const meeting = { count: 0 };
/** Answers once another call of it is running at the same time (met), or after 15 s alone (not met). */
const meet = defineAtomic<Json, Json>({
  nodeType: {
    node_type_id: "test.meet",
    version: "1.0.0",
    description: "Waits for another caller to meet",
    input_schema: { type: "object", properties: { who: { type: "string" } }, required: ["who"], additionalProperties: false },
    output_schema: { type: "object" },
    constraints: { gates: { side_effect_class: "read" } },
  },
  async handler() {
    meeting.count++;
    const until = Date.now() + 15_000;
    while (meeting.count < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    return { met: meeting.count >= 2 };
  },
});

const AGENT = { node_type_id: "llm.agent", version: "1.0.0" };
export const rootError = (run: Json) => run.extensions?.["nodefabric.error"];
export const outputs = (run: Json) => run.extensions?.["nodefabric.outputs"];
/** The tool messages of a request, parsed. */
export const toolResults = (body: ChatRequestBody) => (body.messages ?? []).filter((m) => m.role === "tool").map((m) => ({ id: m.tool_call_id, ...JSON.parse(String(m.content)) }));
/** How many turns the loop took before this request. */
export const turnOf = (body: ChatRequestBody) => (body.messages ?? []).filter((m) => m.role === "assistant").length;

export interface AgentKit {
  fabric: FabricFixture;
  llm: LlmStandIn;
  /** How the model answers (reset before each test). */
  respond: (body: ChatRequestBody) => StandInStep | undefined;
  /** Starts an llm.agent run; waits for its end unless `wait` is false. */
  start(input: Json, o?: { wait?: boolean; constraints?: Json }): Promise<Json>;
  ended(runId: string): Promise<Json>;
  pendingApproval(runId: string): Promise<Json>;
  /** Forgets the calls, the tools' starts and the model's answers. */
  reset(): void;
  close(): Promise<void>;
}

/** Starts the stand-in and a fabric serving llm.chat, llm.agent and the test tools, under `policy` (Cedar) when given. */
export async function startAgentKit(policy?: string): Promise<AgentKit> {
  const saved = { ...process.env };
  const dir = mkdtempSync(path.join(os.tmpdir(), "llm-agent-test-"));
  const kit = { respond: () => undefined } as unknown as AgentKit;
  const llm = await startLlmStandIn({ respond: (b) => kit.respond(b) });
  writeFileSync(path.join(dir, "llm.json"), JSON.stringify({ prices: { "gpt-test": { input_per_million: 100, output_per_million: 200 } } }));
  Object.assign(process.env, { FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "gpt-test", FABRIC_LLM_API_KEY: "sk-agent-test", FABRIC_LLM_CONFIG: path.join(dir, "llm.json") });
  resetLlmConfig();
  let policyFile: string | undefined;
  if (policy) {
    policyFile = path.join(dir, "policy.cedar");
    writeFileSync(policyFile, policy);
  }
  const fabric = await fabricFixture({ definitions: [llmChat, llmAgent, weather, fx, pay, notify, ship, meet], ...(policyFile ? { policy: policyFile } : {}) });
  const gateway = fabric.urls["run-gateway"];
  return Object.assign(kit, {
    fabric,
    llm,
    async start(input: Json, o: { wait?: boolean; constraints?: Json } = {}) {
      const res = await fetch(`${gateway}/v1/runs`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(o.wait === false ? {} : { prefer: "wait=30" }) },
        body: JSON.stringify({ root_node_type_ref: AGENT, input, ...(o.constraints ? { constraints: o.constraints } : {}) }),
      });
      const body: Json = await res.json();
      expect(res.status, JSON.stringify(body)).toBeLessThan(300);
      return body.run ?? body;
    },
    async ended(runId: string) {
      for (let i = 0; i < 400; i++) {
        const run: Json = await (await fetch(`${gateway}/v1/runs/${runId}`)).json();
        if (["completed", "failed", "canceled"].includes(run.state)) return run;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error("the run did not end");
    },
    async pendingApproval(runId: string) {
      for (let i = 0; i < 300; i++) {
        const list: Json[] = await (await fetch(`${gateway}/v1/approvals?run_id=${runId}&state=pending`)).json();
        if (list.length > 0) return list[0];
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`no approval was requested: ${JSON.stringify((await fabric.events(runId)).map((e: Json) => [e.type, e.data]))}`);
    },
    reset() {
      llm.calls.length = 0;
      kit.respond = () => undefined;
      meeting.count = 0;
      for (const k of Object.keys(started)) delete started[k];
    },
    async close() {
      await fabric.close();
      await llm.close();
      process.env = saved;
      resetLlmConfig();
      rmSync(dir, { recursive: true, force: true });
    },
  });
}
