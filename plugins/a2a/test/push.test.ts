/**
 * Push notifications to a receiver on loopback: the config given with SendMessage and one created on a running task
 * (get, list, delete), each update POSTed with the client's token; allowed only because the operator allows private
 * addresses (executor.egress.allow_private), and never sent where the egress policy refuses.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { TaskState, type Task } from "@a2a-js/sdk";
import { a2aClient, message, startA2aFabric, type A2aFabric } from "./support/a2a-fabric.js";

interface Received {
  path: string;
  token: string | undefined;
  body: { statusUpdate?: { taskId: string; status: { state: string } }; artifactUpdate?: { taskId: string } };
}
let received: Received[] = [];
let receiver: http.Server;
let url: string;
let allowed: A2aFabric;
let refused: A2aFabric;

beforeAll(async () => {
  receiver = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      received.push({ path: req.url ?? "", token: req.headers["x-a2a-notification-token"] as string | undefined, body: JSON.parse(body) });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  allowed = await startA2aFabric({ extraFlags: { executor: { egress: { allow_private: true } } } });
  refused = await startA2aFabric();
}, 60_000);
afterAll(async () => {
  await allowed?.close();
  await refused?.close();
  await new Promise((r) => receiver.close(r));
});

const push = (path: string, token: string, id = "") => ({ tenant: "", id, taskId: "", url: `${url}${path}`, token, authentication: undefined });
const finalOf = (path: string, taskId: string) => received.find((r) => r.path === path && r.body.statusUpdate?.taskId === taskId && r.body.statusUpdate.status.state === "TASK_STATE_COMPLETED");

async function until<T>(find: () => T | undefined): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const v = find();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error("nothing arrived");
}

describe("push notifications", () => {
  it("a config given with SendMessage receives the task's updates with the client's token", async () => {
    const c = await a2aClient(allowed.gateway);
    const t = (await c.sendMessage({ tenant: "", message: message("demo.sleep", { ms: 300 }), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: push("/given", "tok-1"), returnImmediately: true }, metadata: undefined })) as Task;
    const final = await until(() => finalOf("/given", t.id));
    expect(final.token).toBe("tok-1");
    expect(received.some((r) => r.path === "/given" && r.body.artifactUpdate?.taskId === t.id)).toBe(true);
    const list = await c.listTaskPushNotificationConfig({ tenant: "", taskId: t.id, pageSize: 0, pageToken: "" });
    expect(list.configs.map((x) => x.url)).toEqual([`${url}/given`]);
  });

  it("a config created on a running task is kept, listed, read, and deleted; it receives the end", async () => {
    const c = await a2aClient(allowed.gateway);
    const t = (await c.sendMessage({ tenant: "", message: message("demo.sleep", { ms: 800 }), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true }, metadata: undefined })) as Task;
    const created = await c.createTaskPushNotificationConfig({ ...push("/created", "tok-2", "cfg-1"), taskId: t.id });
    expect(created).toMatchObject({ id: "cfg-1", taskId: t.id, url: `${url}/created` });
    expect((await c.getTaskPushNotificationConfig({ tenant: "", taskId: t.id, id: "cfg-1" })).token).toBe("tok-2");
    const final = await until(() => finalOf("/created", t.id));
    expect(final.token).toBe("tok-2");
    await c.deleteTaskPushNotificationConfig({ tenant: "", taskId: t.id, id: "cfg-1" });
    expect((await c.listTaskPushNotificationConfig({ tenant: "", taskId: t.id, pageSize: 0, pageToken: "" })).configs).toEqual([]);
    await expect(c.createTaskPushNotificationConfig({ ...push("/x", "t"), taskId: "a2a-0123456789abcdef0123456789abcdef" })).rejects.toMatchObject({ name: "TaskNotFoundError" });
  });

  it("a blocking send of a quick run still pushes its end", async () => {
    const c = await a2aClient(allowed.gateway);
    const t = (await c.sendMessage({ tenant: "", message: message("demo.echo", { quick: true }), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: push("/quick", "tok-4"), returnImmediately: false }, metadata: undefined })) as Task;
    expect(t.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect((await until(() => finalOf("/quick", t.id))).token).toBe("tok-4");
  });

  it("without the operator's allowance, nothing is sent to a loopback address", async () => {
    received = [];
    const c = await a2aClient(refused.gateway);
    const t = (await c.sendMessage({ tenant: "", message: message("demo.sleep", { ms: 100 }), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: push("/refused", "tok-3"), returnImmediately: false }, metadata: undefined })) as Task;
    expect(t.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    await new Promise((r) => setTimeout(r, 1000));
    expect(received.filter((r) => r.path === "/refused")).toEqual([]);
  });
});
