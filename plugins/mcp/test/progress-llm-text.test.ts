/**
 * An LLM's answer reaches an MCP client as it is written: a tools/call of `llm.chat` (the fabric's MCP server, the
 * official client) against the scripted stand-in streaming slowly on loopback gets progress notifications whose
 * messages, joined, are the answer, before the result carries it whole.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { startLlmStandIn, type LlmStandIn } from "@nodefabric/sdk/testing";
import { connect, startMcpFabric, type McpFabric } from "./support/mcp-fabric.js";

const WORDS = Array.from({ length: 30 }, (_, i) => `word${i}`).join(" ");
const saved = { ...process.env };
let f: McpFabric;
let llm: LlmStandIn;

beforeAll(async () => {
  llm = await startLlmStandIn();
  Object.assign(process.env, { FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "gpt-test", FABRIC_LLM_API_KEY: "sk-mcp" });
  delete process.env.FABRIC_LLM_CONFIG;
  delete process.env.FABRIC_LLM_PROFILE;
  f = await startMcpFabric({ handlers: ["@nodefabric/handler-demo", "@nodefabric/handler-llm"], mcp: { progressIntervalMs: 50 } });
}, 60_000);

afterAll(async () => {
  await f?.close();
  await llm?.close();
  process.env = saved;
});

describe("MCP progress carries streamed text", () => {
  it("sends llm.chat's answer in progress messages as the model writes it", async () => {
    llm.script({ content: WORDS, stream: { chunk_chars: 5, delay_ms: 20 } });
    const client = await connect(f.mcpUrl, "2026-07-28");
    const seen: Array<{ progress: number; message?: string }> = [];
    const result = (await client.callTool({ name: "llm.chat", arguments: { messages: [{ role: "user", content: "Count." }] } }, { onprogress: (p: { progress: number; message?: string }) => seen.push(p) } as never)) as {
      isError?: boolean;
      structuredContent?: { content?: string };
    };
    await client.close();
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent?.content).toBe(WORDS);
    const text = seen.filter((p) => p.message !== undefined && !/^NodeRun /.test(p.message)).map((p) => p.message).join("");
    expect(text).toBe(WORDS);
    expect(seen.map((p) => p.progress)).toEqual([...seen.map((p) => p.progress)].sort((a, b) => a - b));
  });
});
