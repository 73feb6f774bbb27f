/**
 * The A2A server with the official client (@a2a-js/sdk/client) against a fabric on loopback: the Agent Card, a
 * message as a run (blocking and not), streaming, GetTask, ListTasks by context, CancelTask and SubscribeToTask, over
 * JSON-RPC and HTTP+JSON; a message naming no skill on a fabric without a model.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import http from "node:http";
import { TaskState, type StreamResponse, type Task } from "@a2a-js/sdk";
import { a2aClient, message, startA2aFabric, type A2aFabric } from "./support/a2a-fabric.js";

let f: A2aFabric;
beforeAll(async () => {
  f = await startA2aFabric();
}, 30_000);
afterAll(async () => f?.close());

/** A GET with its own Host header (fetch may not set one). */
function getWithHost(url: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { host } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
  });
}

const send = (m: Message, returnImmediately = false) => ({ tenant: "", message: m, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately }, metadata: undefined });

async function until(read: () => Promise<Task>, ok: (t: Task) => boolean): Promise<Task> {
  for (let i = 0; i < 400; i++) {
    const t = await read();
    if (ok(t)) return t;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error("the task never reached the expected state");
}

describe("the Agent Card", () => {
  it("is served at /.well-known/agent-card.json and under the JSON-RPC path, with URLs from the request's Host", async () => {
    for (const p of ["/.well-known/agent-card.json", "/a2a/.well-known/agent-card.json"]) {
      const res = await getWithHost(`${f.gateway}${p}`, "localhost:8443");
      expect(res.status).toBe(200);
      const card = JSON.parse(res.body) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
      expect(card.supportedInterfaces).toEqual([
        { url: "http://localhost:8443/a2a", protocolBinding: "JSONRPC", protocolVersion: "1.0" },
        { url: "http://localhost:8443/a2a/rest", protocolBinding: "HTTP+JSON", protocolVersion: "1.0" },
        { url: "http://localhost:8443/a2a", protocolBinding: "JSONRPC", protocolVersion: "0.3" },
      ]);
      expect(card.capabilities).toMatchObject({ streaming: true, pushNotifications: true });
      expect(card.defaultInputModes).toContain("application/json");
      const echo = card.skills.find((s: { id: string }) => s.id === "demo.echo");
      expect(echo.description).toContain("Echo");
      expect(echo.tags).toContain("atomic");
      expect(echo.examples[0]).toContain("demo.echo");
      expect(JSON.stringify(card)).not.toContain("grpc");
    }
  });
});

describe("a message is a run", () => {
  it("SendMessage (blocking) of demo.echo answers the completed task with the outputs as an artifact; the task is the run", async () => {
    const c = await a2aClient(f.gateway);
    const t = (await c.sendMessage(send(message("demo.echo", { who: "ada" })))) as Task;
    expect(t.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(t.artifacts[0]!.parts[0]!.content).toEqual({ $case: "data", value: { echo: { who: "ada" } } });
    expect(t.contextId).not.toBe("");
    const run = await fetch(`${f.gateway}/v1/runs/${t.id}`);
    expect(run.status).toBe(200);
    expect(((await run.json()) as { state: string }).state).toBe("completed");
    const got = await c.getTask({ tenant: "", id: t.id, historyLength: undefined });
    expect(got.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(got.history[0]!.parts[0]!.content).toEqual({ $case: "data", value: { who: "ada" } });
  });

  it("SendMessage with returnImmediately answers at once; GetTask follows the run to its end", async () => {
    const c = await a2aClient(f.gateway);
    const t = (await c.sendMessage(send(message("demo.sleep", { ms: 300, value: "v" }), true))) as Task;
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]).toContain(t.status?.state);
    const done = await until(() => c.getTask({ tenant: "", id: t.id, historyLength: undefined }), (x) => x.status?.state === TaskState.TASK_STATE_COMPLETED);
    expect(done.artifacts[0]!.parts[0]!.content).toEqual({ $case: "data", value: { slept_ms: 300, value: "v" } });
  });

  it("SendStreamingMessage streams the task, then the artifact and the final status", async () => {
    const c = await a2aClient(f.gateway);
    const events: StreamResponse[] = [];
    for await (const e of c.sendMessageStream(send(message("demo.sleep", { ms: 200 })))) events.push(e);
    expect(events[0]!.payload?.$case).toBe("task");
    const artifact = events.find((e) => e.payload?.$case === "artifactUpdate");
    expect(artifact?.payload?.value).toMatchObject({ artifact: { parts: [{ content: { $case: "data", value: { slept_ms: 200 } } }] } });
    const last = events.at(-1)!;
    expect(last.payload?.$case).toBe("statusUpdate");
    expect((last.payload!.value as { status: { state: TaskState } }).status.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("SubscribeToTask follows a running task to its end; a text part fills a node type's one required string", async () => {
    const c = await a2aClient(f.gateway);
    const t = (await c.sendMessage(send(message("demo.sleep", { ms: 400 }), true))) as Task;
    const states: TaskState[] = [];
    for await (const e of c.resubscribeTask({ tenant: "", id: t.id })) {
      if (e.payload?.$case === "task") states.push(e.payload.value.status!.state);
      if (e.payload?.$case === "statusUpdate") states.push(e.payload.value.status!.state);
    }
    expect(states.at(-1)).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("ListTasks lists the caller's tasks of a context", async () => {
    const c = await a2aClient(f.gateway);
    const ctx = `ctx-${Date.now()}`;
    const a = (await c.sendMessage(send(message("demo.echo", { i: 1 }, { contextId: ctx })))) as Task;
    const b = (await c.sendMessage(send(message("demo.echo", { i: 2 }, { contextId: ctx })))) as Task;
    await c.sendMessage(send(message("demo.echo", { i: 3 })));
    const list = await c.listTasks({ tenant: "", contextId: ctx, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 10, pageToken: "", historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: true });
    expect(list.tasks.map((t) => t.id).sort()).toEqual([a.id, b.id].sort());
    expect(list.tasks.every((t) => t.contextId === ctx)).toBe(true);
    expect(list.tasks[0]!.artifacts.length).toBe(1);
  });

  it("CancelTask cancels the run; a second cancel is TaskNotCancelable", async () => {
    const c = await a2aClient(f.gateway);
    const t = (await c.sendMessage(send(message("demo.sleep", { ms: 60_000 }), true))) as Task;
    const canceled = await c.cancelTask({ tenant: "", id: t.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const run = (await (await fetch(`${f.gateway}/v1/runs/${t.id}`)).json()) as { state: string };
    expect(run.state).toBe("canceled");
    await expect(c.cancelTask({ tenant: "", id: t.id, metadata: undefined })).rejects.toMatchObject({ name: "TaskNotCancelableError" });
  });

  it("serves the same over HTTP+JSON", async () => {
    const c = await a2aClient(f.gateway, "HTTP+JSON");
    const t = (await c.sendMessage(send(message("demo.echo", { via: "rest" })))) as Task;
    expect(t.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect((await c.getTask({ tenant: "", id: t.id, historyLength: undefined })).artifacts[0]!.parts[0]!.content).toEqual({ $case: "data", value: { echo: { via: "rest" } } });
    const events: StreamResponse[] = [];
    for await (const e of c.sendMessageStream(send(message("demo.echo", { s: 1 })))) events.push(e);
    expect((events.at(-1)!.payload!.value as { status: { state: TaskState } }).status.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const s = (await c.sendMessage(send(message("demo.sleep", { ms: 60_000 }), true))) as Task;
    expect((await c.cancelTask({ tenant: "", id: s.id, metadata: undefined })).status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    await expect(c.getTask({ tenant: "", id: "a2a-00000000000000000000000000000000", historyLength: undefined })).rejects.toMatchObject({ name: "TaskNotFoundError" });
    // The same operations answer at the gateway's root, for clients that join the paths to the host.
    const root = await fetch(`${f.gateway}/message:send`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ message: { messageId: "r1", role: "ROLE_USER", parts: [{ data: { at: "root" } }], metadata: { skillId: "demo.echo" } } }) });
    expect(root.status).toBe(200);
    const rootTask = ((await root.json()) as { task: { id: string; status: { state: string } } }).task;
    expect(rootTask.status.state).toBe("TASK_STATE_COMPLETED");
    expect((await fetch(`${f.gateway}/tasks/${rootTask.id}`)).status).toBe(200);
  });

  it("a message naming no skill, on a fabric without a model, is a task in INPUT_REQUIRED listing the skills", async () => {
    const c = await a2aClient(f.gateway);
    const t = (await c.sendMessage(send(message(undefined, undefined, { text: "hello" })))) as Task;
    expect(t.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const text = t.status!.message!.parts[0]!.content as { value: string };
    expect(text.value).toContain("metadata.skillId");
    expect(text.value).toContain("demo.echo");
    expect((await c.getTask({ tenant: "", id: t.id, historyLength: undefined })).status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    // A reply naming no skill is kept in the task's history; the task still asks.
    const again = (await c.sendMessage(send(message(undefined, undefined, { text: "still no skill", taskId: t.id, contextId: t.contextId })))) as Task;
    expect(again.id).toBe(t.id);
    expect(again.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const got = await c.getTask({ tenant: "", id: t.id, historyLength: 5 });
    expect(got.history.map((m) => (m.parts[0]!.content as { value: string }).value)).toEqual(["hello", "still no skill"]);
    const listed = await c.listTasks({ tenant: "", contextId: t.contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 10, pageToken: "", historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: false });
    expect(listed.tasks.map((x) => x.id)).toEqual([t.id]);
    expect(listed.pageSize).toBe(1);
    // A reply naming a skill runs it, as the same task.
    const ran = (await c.sendMessage(send(message("demo.echo", { now: "named" }, { taskId: t.id })))) as Task;
    expect(ran.id).toBe(t.id);
    expect(ran.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(((await (await fetch(`${f.gateway}/v1/runs/${t.id}`)).json()) as { state: string }).state).toBe("completed");
    // Another one is canceled.
    const other = (await c.sendMessage(send(message(undefined, undefined, { text: "hi" })))) as Task;
    expect((await c.cancelTask({ tenant: "", id: other.id, metadata: undefined })).status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect((await c.getTask({ tenant: "", id: other.id, historyLength: undefined })).status?.state).toBe(TaskState.TASK_STATE_CANCELED);
  });
});
