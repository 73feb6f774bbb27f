/**
 * A run waiting for an approval is a task in INPUT_REQUIRED; a message to that task carrying the decision answers the
 * approval through the approvals API with the caller's rights, and the task goes on to its end (or is rejected).
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { TaskState, type StreamResponse, type Task } from "@a2a-js/sdk";
import { a2aClient, message, startA2aFabric, type A2aFabric } from "./support/a2a-fabric.js";

const POLICY = `
@id("allow-the-rest")
permit(principal, action, resource);

@id("approve-sleep-execute")
@require_approval("true")
permit(principal, action == NodeFabric::Action::"node.run.execute", resource == NodeFabric::NodeType::"demo.sleep");
`;

let f: A2aFabric;
beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-a2a-policy-"));
  fs.writeFileSync(path.join(dir, "policy.cedar"), POLICY);
  f = await startA2aFabric({ policy: path.join(dir, "policy.cedar") });
}, 30_000);
afterAll(async () => f?.close());

const send = (m: ReturnType<typeof message>, returnImmediately = false) => ({ tenant: "", message: m, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately }, metadata: undefined });

describe("approvals through INPUT_REQUIRED", () => {
  it("a blocking SendMessage answers INPUT_REQUIRED naming the approval; a reply with the decision approves it, and the task completes", async () => {
    const c = await a2aClient(f.gateway);
    const t = (await c.sendMessage(send(message("demo.sleep", { ms: 10, value: "ok" })))) as Task;
    expect(t.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect((t.status!.message!.parts[0]!.content as { value: string }).value).toContain("waiting for approval");
    expect((await c.getTask({ tenant: "", id: t.id, historyLength: undefined })).status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const after = (await c.sendMessage(send(message(undefined, { decision: "approve" }, { taskId: t.id, contextId: t.contextId })))) as Task;
    expect(after.id).toBe(t.id);
    expect(after.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(after.artifacts[0]!.parts[0]!.content).toEqual({ $case: "data", value: { slept_ms: 10, value: "ok" } });
  });

  it("a stream ends at INPUT_REQUIRED; rejecting by text fails the task as REJECTED", async () => {
    const c = await a2aClient(f.gateway);
    const events: StreamResponse[] = [];
    for await (const e of c.sendMessageStream(send(message("demo.sleep", { ms: 10 })))) events.push(e);
    const last = events.at(-1)!;
    expect((last.payload!.value as { status: { state: TaskState } }).status.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const taskId = (events[0]!.payload!.value as Task).id;
    const after = (await c.sendMessage(send(message(undefined, undefined, { text: "reject: not today", taskId })))) as Task;
    expect(after.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
  });

  it("a message to a task that waits for nothing is refused and changes nothing", async () => {
    const c = await a2aClient(f.gateway);
    const done = (await c.sendMessage(send(message("demo.echo", { a: 1 })))) as Task;
    await expect(c.sendMessage(send(message(undefined, { decision: "approve" }, { taskId: done.id })))).rejects.toMatchObject({ name: "UnsupportedOperationError" });
    expect((await c.getTask({ tenant: "", id: done.id, historyLength: undefined })).status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });
});
