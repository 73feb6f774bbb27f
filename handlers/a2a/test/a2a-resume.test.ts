/**
 * The remote task outlives the execution that started it: its id, saved with the NodeRun as soon as the agent names
 * it, lets a second execution (after the executor was lost) resume that task (GetTask, then SubscribeToTask or
 * polling) instead of sending the message again. Played here as two executions of one NodeRun of a2a.send, the first
 * losing its connections once the checkpoint is saved, against a real @a2a-js/sdk agent.
 */
import { describe, it, expect, afterAll, beforeAll } from "vitest";
import { HandlerError, type JsonObject } from "@nodefabric/sdk";
import { callAgentSkill, compileA2aConfig, skillDefinitionHash } from "../src/index.js";
import { DEFAULT_SKILLS, startA2aAgent } from "./a2a-agent.mjs";
import { a2aBacked, executionContext } from "./a2a-fixtures.js";

let streaming: Awaited<ReturnType<typeof startA2aAgent>>;
let polling: Awaited<ReturnType<typeof startA2aAgent>>;

beforeAll(async () => {
  [streaming, polling] = await Promise.all([startA2aAgent({ slowMs: 1_000 }), startA2aAgent({ slowMs: 1_000, streaming: false })]);
});
afterAll(async () => {
  await streaming?.close();
  await polling?.close();
});

const slow = DEFAULT_SKILLS.find((s) => s.id === "slow")!;

describe("a2a.send resumes the remote task after a lost execution", () => {
  for (const [name, agent] of [
    ["streamed: SubscribeToTask", () => streaming],
    ["polled: GetTask", () => polling],
  ] as const) {
    it(`sends one message only (${name})`, async () => {
      const nodeType = a2aBacked("t.slow", { card_url: agent().cardUrl, skill: "slow", skill_hash: skillDefinitionHash(slow) });
      const config = compileA2aConfig(nodeType, nodeType.extensions["nodefabric.a2a"]);
      const before = agent().state.messages.length;
      const saved: JsonObject[] = [];
      const lost = await callAgentSkill(config, { word: "once" }, executionContext(nodeType, { saved, breakAfterSave: true })).catch((e: unknown) => e);
      // The first execution lost its connections after the checkpoint: a retryable failure, the remote task untouched.
      expect(HandlerError.is(lost), String(lost)).toBe(true);
      expect((lost as HandlerError).code).toBe("upstream_unavailable");
      expect((lost as HandlerError).retryable).toBe(true);
      expect(saved).toHaveLength(1);
      expect(saved[0]!.a2a_task).toMatchObject({ card_url: agent().cardUrl, skill: "slow", task_id: expect.any(String) });
      expect(agent().state.cancels).toBe(0);

      const outputs = await callAgentSkill(config, { word: "once" }, executionContext(nodeType, { checkpoint: saved[0] }));
      expect(outputs).toMatchObject({ echo: { word: "once" } });
      expect(agent().state.messages.length - before).toBe(1);
    }, 20_000);
  }

  it("resumes a task that ended while no execution followed it, and maps its end as usual", async () => {
    const nodeType = a2aBacked("t.fail", { card_url: polling.cardUrl, skill: "fail" });
    const config = compileA2aConfig(nodeType, nodeType.extensions["nodefabric.a2a"]);
    const saved: JsonObject[] = [];
    await callAgentSkill(config, {}, executionContext(nodeType, { saved })).catch(() => undefined);
    const before = polling.state.messages.length;
    const again = await callAgentSkill(config, {}, executionContext(nodeType, { checkpoint: saved[0] })).catch((e: unknown) => e);
    expect((again as HandlerError).code).toBe("agent_task_failed");
    expect(polling.state.messages.length).toBe(before);
  });

  it("sends the message anew when the checkpoint is of another skill or agent", async () => {
    const nodeType = a2aBacked("t.echo", { card_url: polling.cardUrl, skill: "echo" });
    const config = compileA2aConfig(nodeType, nodeType.extensions["nodefabric.a2a"]);
    const before = polling.state.messages.length;
    const outputs = await callAgentSkill(config, { word: "fresh" }, executionContext(nodeType, { checkpoint: { a2a_task: { card_url: streaming.cardUrl, skill: "echo", task_id: "elsewhere" } } }));
    expect(outputs).toMatchObject({ echo: { word: "fresh" } });
    expect(polling.state.messages.length).toBe(before + 1);
  });
});
