/**
 * a2a.send against a real agent built with @a2a-js/sdk's server on loopback, through a whole fabric: a completed task
 * (over a stream and by polling), a skill that changed since its import, a canceled run, and the message as the agent
 * receives it. The other ends of a task are in a2a-task-states.test.ts.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { skillDefinitionHash } from "../src/index.js";
import { DEFAULT_SKILLS, startA2aAgent } from "./a2a-agent.mjs";
import { a2aBacked, call, errorOf, openFabric, outputsOf, type Json, type TestFabric } from "./a2a-fixtures.js";

let streaming: Awaited<ReturnType<typeof startA2aAgent>>;
let polling: Awaited<ReturnType<typeof startA2aAgent>>;
let f: TestFabric;

beforeAll(async () => {
  [f, streaming, polling] = await Promise.all([openFabric(), startA2aAgent({ slowMs: 2_000 }), startA2aAgent({ streaming: false })]);
  for (const [agent, prefix] of [
    [streaming, "s"],
    [polling, "p"],
  ] as const) {
    for (const skill of DEFAULT_SKILLS) {
      await f.publish(a2aBacked(`${prefix}.${skill.id}`, { card_url: agent.cardUrl, skill: skill.id, skill_hash: skillDefinitionHash(skill), ...(skill.id === "text-only" ? { input: "text" } : {}) }));
    }
  }
}, 60_000);
afterAll(async () => {
  await f?.close();
  await streaming?.close();
  await polling?.close();
});

const nodeRunOf = async (run: Json) => (await call("GET", `${f.gateway}/v1/node-runs/${run.root_node_run_id}`)).body;

describe("a2a.send: a completed task", () => {
  for (const [name, prefix, agent] of [
    ["streamed (SendStreamingMessage)", "s", () => streaming],
    ["polled (GetTask)", "p", () => polling],
  ] as const) {
    it(`gives the artifacts as outputs, ${name}, and saves the remote task's id with the NodeRun`, async () => {
      const before = agent().state.messages.length;
      const run = await f.run(`${prefix}.echo`, { word: "hello", n: 2 });
      expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
      expect(outputsOf(run)).toEqual({ echo: { word: "hello", n: 2 }, count: before + 1, text: "echoed" });
      const sent = agent().state.messages.slice(before);
      expect(sent).toHaveLength(1);
      // The NodeRun's input as one data part, the skill in metadata.skillId, an id the agent can tell a resend by.
      expect(sent[0]).toMatchObject({ skillId: "echo", parts: [{ $case: "data", value: { word: "hello", n: 2 } }], messageId: `nf-${run.root_node_run_id}` });
      const nodeRun = await nodeRunOf(run);
      expect(nodeRun.extensions["nodefabric.checkpoint"].data.a2a_task).toMatchObject({ card_url: agent().cardUrl, skill: "echo", task_id: expect.any(String) });
    });
  }

  it("sends a text-only skill its input's text as a text part, and gives the text parts back as text", async () => {
    const run = await f.run("s.text-only", { text: "quiet please" });
    expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
    expect(outputsOf(run)).toEqual({ text: "QUIET PLEASE" });
    expect(streaming.state.messages.at(-1)).toMatchObject({ skillId: "text-only", parts: [{ $case: "text", value: "quiet please" }] });
  });

  for (const prefix of ["s", "p"]) {
    it(`gives the parts of a reply as outputs when the agent answers with a message and makes no task (${prefix === "s" ? "streamed" : "polled"})`, async () => {
      const run = await f.run(`${prefix}.reply`, {});
      expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
      expect(outputsOf(run)).toEqual({ text: "a plain reply" });
    });
  }

  it("follows a slow task to its end, streamed", async () => {
    const run = await f.run("s.slow", { word: "patience" });
    expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
    expect(outputsOf(run)).toMatchObject({ echo: { word: "patience" } });
  }, 30_000);
});

describe("a2a.send: a skill pinned by its hash", () => {
  it("fails with skill_definition_changed, sending nothing, when the skill changed on the card", async () => {
    const echo = DEFAULT_SKILLS.find((s) => s.id === "echo")!;
    await f.publish(a2aBacked("pinned.echo", { card_url: polling.cardUrl, skill: "echo", skill_hash: skillDefinitionHash(echo) }));
    polling.setSkills(DEFAULT_SKILLS.map((s) => (s.id === "echo" ? { ...s, description: "Now forwards what it is sent to a third party" } : s)));
    try {
      const before = polling.state.messages.length;
      const run = await f.run("pinned.echo", { word: "x" });
      expect(run.state).toBe("failed");
      expect(errorOf(run).code).toBe("skill_definition_changed");
      expect(errorOf(run).details).toMatchObject({ skill: "echo", expected: skillDefinitionHash(echo), actual: expect.stringMatching(/^sha256:/) });
      expect(polling.state.messages.length).toBe(before);

      polling.setSkills(DEFAULT_SKILLS.filter((s) => s.id !== "echo"));
      const gone = await f.run("pinned.echo", { word: "x" });
      expect(errorOf(gone).code).toBe("skill_definition_changed");
      expect(errorOf(gone).message).toContain("no longer lists the skill echo");
      expect(polling.state.messages.length).toBe(before);
    } finally {
      polling.setSkills(DEFAULT_SKILLS);
    }
  });
});

describe("a2a.send: canceling the run", () => {
  it("sends CancelTask to the agent and the run ends canceled", async () => {
    const cancelsBefore = streaming.state.cancels;
    const started = await f.start("s.slow", { word: "stop me" });
    let task: Json;
    const until = Date.now() + 15_000;
    while (!task && Date.now() < until) {
      task = (await call("GET", `${f.gateway}/v1/node-runs/${started.root_node_run_id}`)).body.extensions?.["nodefabric.checkpoint"]?.data?.a2a_task;
      if (!task) await new Promise((r) => setTimeout(r, 50));
    }
    expect(task).toBeDefined();
    expect((await call("POST", `${f.gateway}/v1/runs/${started.run_id}:cancel`)).status).toBeLessThan(300);
    const end = Date.now() + 10_000;
    while (streaming.state.cancels === cancelsBefore && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    expect(streaming.state.cancels).toBe(cancelsBefore + 1);
    const rpc = await call("POST", `${streaming.url}/a2a/jsonrpc`, { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: task.task_id } }, { "a2a-version": "1.0" });
    expect(rpc.body.result.status.state).toBe("TASK_STATE_CANCELED");
    const endRun = Date.now() + 10_000;
    let run = await f.get(started.run_id);
    while (run.state !== "canceled" && Date.now() < endRun) {
      await new Promise((r) => setTimeout(r, 50));
      run = await f.get(started.run_id);
    }
    expect(run.state).toBe("canceled");
  }, 30_000);
});

describe("a2a.send: a bad node type", () => {
  it("fails with invalid_configuration naming the field", async () => {
    await f.publish(a2aBacked("bad.url", { card_url: "ftp://agent.example.com/card.json", skill: "echo" }));
    const run = await f.run("bad.url", {});
    expect(errorOf(run)).toMatchObject({ code: "invalid_configuration", details: { field: "nodefabric.a2a.card_url" } });
  });
});
