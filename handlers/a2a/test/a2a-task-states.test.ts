/**
 * a2a.send against a real agent built with @a2a-js/sdk's server on loopback, through a whole fabric: each way a remote
 * task can end other than completed (failed, rejected, canceled at the agent, waiting for input or credentials), over
 * a stream and by polling, becomes a named failure of the run.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { skillDefinitionHash } from "../src/index.js";
import { DEFAULT_SKILLS, startA2aAgent } from "./a2a-agent.mjs";
import { a2aBacked, errorOf, openFabric, type TestFabric } from "./a2a-fixtures.js";

let f: TestFabric;
const agents: Array<Awaited<ReturnType<typeof startA2aAgent>>> = [];

beforeAll(async () => {
  let streaming, polling;
  [f, streaming, polling] = await Promise.all([openFabric(), startA2aAgent(), startA2aAgent({ streaming: false })]);
  agents.push(streaming, polling);
  for (const [agent, prefix] of [
    [streaming, "s"],
    [polling, "p"],
  ] as const) {
    for (const skill of DEFAULT_SKILLS) await f.publish(a2aBacked(`${prefix}.${skill.id}`, { card_url: agent.cardUrl, skill: skill.id, skill_hash: skillDefinitionHash(skill) }));
  }
}, 60_000);
afterAll(async () => {
  await f?.close();
  for (const a of agents) await a.close();
});

describe("a2a.send: a task that does not complete", () => {
  const cases: Array<[string, string, string]> = [
    ["fail", "agent_task_failed", "the database is on fire"],
    ["reject", "agent_task_rejected", "I do not do that"],
    ["cancel-self", "agent_task_canceled", "changed my mind"],
    ["ask", "agent_input_required", "Which city?"],
    ["login", "agent_input_required", "Sign in first"],
  ];
  for (const prefix of ["s", "p"]) {
    for (const [skill, code, said] of cases) {
      it(`${skill} (${prefix === "s" ? "streamed" : "polled"}) fails the run with ${code}, naming the task and what the agent said`, async () => {
        const run = await f.run(`${prefix}.${skill}`, {});
        expect(run.state).toBe("failed");
        const error = errorOf(run);
        expect(error.code).toBe(code);
        expect(error.message).toContain(said);
        expect(error.details).toMatchObject({ task_id: expect.any(String), skill, status_message: said });
        if (skill === "ask") expect(error.details.state).toBe("TASK_STATE_INPUT_REQUIRED");
        if (skill === "login") expect(error.details.state).toBe("TASK_STATE_AUTH_REQUIRED");
      });
    }
  }
});
