/**
 * Search mode, for a catalogue larger than the card lists (here a low `maxSkills` over the demo handlers): the card
 * lists the `fabric.search` skill instead of every node type, a message to it is answered by a COMPLETED task whose
 * artifact lists the matching skills (found through Selection) with their input schemas, and naming a node type it
 * found in metadata.skillId still runs it; what the PDP would not let the caller start is not found.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { TaskState, type Task } from "@a2a-js/sdk";
import { a2aClient, message, rpc, skillMessage, startA2aFabric, type A2aFabric } from "./support/a2a-fabric.js";

let f: A2aFabric;
beforeAll(async () => {
  f = await startA2aFabric({ a2a: { maxSkills: 3 } });
}, 30_000);
afterAll(async () => f?.close());

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const send = (m: ReturnType<typeof message>) => ({ tenant: "", message: m, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: false }, metadata: undefined });

describe("search mode", () => {
  it("the card of a catalogue over maxSkills lists the search skill, not every node type", async () => {
    const res = await fetch(`${f.gateway}/.well-known/agent-card.json`);
    expect(res.status).toBe(200);
    const card: Json = await res.json();
    expect(card.skills.map((s: Json) => s.id)).toEqual(["fabric.search"]);
    expect(card.skills[0].description).toContain("query");
    expect(card.description).toContain("fabric.search");
    expect(card.description).toContain("metadata.skillId");
  });

  it("a message to fabric.search is a COMPLETED task listing the matching skills with their input schemas; the task stays readable", async () => {
    const c = await a2aClient(f.gateway);
    const t = (await c.sendMessage(send(message("fabric.search", undefined, { text: "echo the input back" })))) as Task;
    expect(t.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const found = (t.artifacts[0]!.parts[0]!.content as { value: { skills: Json[] } }).value.skills;
    const echo = found.find((s) => s.id === "demo.echo");
    expect(echo, JSON.stringify(found)).toBeDefined();
    expect(echo.input_schema).toMatchObject({ type: "object" });
    expect(typeof echo.description).toBe("string");
    const got = await c.getTask({ tenant: "", id: t.id, historyLength: undefined });
    expect(got.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(got.artifacts[0]!.parts[0]!.content).toEqual(t.artifacts[0]!.parts[0]!.content);
    await expect(c.cancelTask({ tenant: "", id: t.id, metadata: undefined })).rejects.toMatchObject({ name: "TaskNotCancelableError" });
    // A data part {query, limit} bounds the answer.
    const one = await rpc(f.gateway, "SendMessage", { message: skillMessage("fabric.search", { query: "echo the input back", limit: 1 }) });
    expect(one.status).toBe(200);
    expect(one.body.result.task.artifacts[0].parts[0].data.skills).toHaveLength(1);
  });

  it("naming a node type the card does not list still runs it", async () => {
    const c = await a2aClient(f.gateway);
    const t = (await c.sendMessage(send(message("demo.echo", { found: "by search" })))) as Task;
    expect(t.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(t.artifacts[0]!.parts[0]!.content).toEqual({ $case: "data", value: { echo: { found: "by search" } } });
  });

  it("a search without a query is invalid params and keeps no task", async () => {
    const bad = await rpc(f.gateway, "SendMessage", { message: skillMessage("fabric.search", { limit: 3 }) });
    expect(bad.status).toBe(200);
    expect(bad.body.error.code).toBe(-32602);
    expect(bad.body.error.message).toContain("query");
  });
});

describe("search mode under a policy", () => {
  let p: A2aFabric;
  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-a2a-search-policy-"));
    fs.writeFileSync(path.join(dir, "policy.cedar"), `permit(principal, action, resource);\nforbid(principal, action == NodeFabric::Action::"run.start", resource == NodeFabric::NodeType::"demo.echo");\n`);
    p = await startA2aFabric({ a2a: { mode: "search" }, policy: path.join(dir, "policy.cedar") });
  }, 30_000);
  afterAll(async () => p?.close());

  it("mode search lists the search skill whatever the catalogue's size; the search leaves out what the caller may not start", async () => {
    const card: Json = await (await fetch(`${p.gateway}/.well-known/agent-card.json`)).json();
    expect(card.skills.map((s: Json) => s.id)).toEqual(["fabric.search"]);
    const found = async (query: string): Promise<string[]> => {
      const res = await rpc(p.gateway, "SendMessage", { message: skillMessage("fabric.search", { query, limit: 50 }) });
      expect(res.body.result.task.status.state).toBe("TASK_STATE_COMPLETED");
      return res.body.result.task.artifacts[0].parts[0].data.skills.map((s: Json) => s.id);
    };
    expect(await found("sleep")).toContain("demo.sleep");
    expect(await found("echo the input back")).not.toContain("demo.echo");
  });
});
