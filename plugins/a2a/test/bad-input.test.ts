/**
 * Bad input never answers 500 and starts no run: malformed JSON-RPC, unknown methods, unknown skills, parts that do
 * not validate against the input schema, oversized messages, unknown task ids; and the protocol versions: a 0.3
 * request (by method name or A2A-Version header) through the SDK's compat layer, a version not served refused.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { rpc, skillMessage, startA2aFabric, type A2aFabric } from "./support/a2a-fabric.js";

let f: A2aFabric;
beforeAll(async () => {
  f = await startA2aFabric({ a2a: { maxMessageBytes: 4096 } });
}, 30_000);
afterAll(async () => f?.close());

const runCount = async () => ((await (await fetch(`${f.gateway}/v1/runs?limit=1000`)).json()) as unknown[]).length;

describe("bad input", () => {
  it("malformed JSON is a parse error (-32700), not a 500", async () => {
    const res = await fetch(`${f.gateway}/a2a`, { method: "POST", headers: { "content-type": "application/json" }, body: "{not json" });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32700);
  });

  it("a request that is not JSON-RPC is an invalid request (-32600); an unknown method -32601", async () => {
    expect((await fetch(`${f.gateway}/a2a`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ hello: 1 }) }).then((r) => r.json())) as object).toMatchObject({ error: { code: -32600 } });
    const badId = await fetch(`${f.gateway}/a2a`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", method: "SendMessage", params: {}, id: { bad: "type" } }) });
    expect(((await badId.json()) as { error: { code: number } }).error.code).toBe(-32600);
    const r = await rpc(f.gateway, "NoSuchMethod", {});
    expect(r.status).toBe(200);
    expect(r.body.error.code).toBe(-32601);
  });

  it("an unknown skill, or parts that do not match the input schema, are invalid params (-32602) and start no run", async () => {
    const before = await runCount();
    const unknown = await rpc(f.gateway, "SendMessage", { message: skillMessage("no.such.skill", {}) });
    expect(unknown.body.error.code).toBe(-32602);
    expect(unknown.body.error.message).toContain("unknown skill");
    const invalid = await rpc(f.gateway, "SendMessage", { message: skillMessage("demo.sleep", { ms: "soon" }) });
    expect(invalid.body.error.code).toBe(-32602);
    expect(invalid.body.error.message).toContain("invalid_inputs");
    const notObject = await rpc(f.gateway, "SendMessage", { message: skillMessage("demo.echo", [1, 2]) });
    expect(notObject.body.error.code).toBe(-32602);
    const noParts = await rpc(f.gateway, "SendMessage", { message: { messageId: "x", role: "ROLE_USER", parts: [], metadata: { skillId: "demo.echo" } } });
    expect(noParts.body.error.code).toBe(-32602);
    expect(await runCount()).toBe(before);
  });

  it("an oversized message is refused with 413 and starts no run", async () => {
    const before = await runCount();
    const res = await fetch(`${f.gateway}/a2a`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: skillMessage("demo.echo", { big: "x".repeat(10_000) }) } }) });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBeDefined();
    expect(await runCount()).toBe(before);
  });

  it("an unknown task id is TaskNotFound (-32001), on every task method", async () => {
    for (const [method, params] of [
      ["GetTask", { id: "a2a-0123456789abcdef0123456789abcdef" }],
      ["CancelTask", { id: "nope" }],
      ["GetTask", { id: "../../v1/runs" }],
    ] as const) {
      const r = await rpc(f.gateway, method, params);
      expect(r.status).toBe(200);
      expect(r.body.error.code).toBe(-32001);
    }
    // A stream's error is the stream's one event.
    const sub = await fetch(`${f.gateway}/a2a`, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" }, body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "SubscribeToTask", params: { id: "a2a-0123456789abcdef0123456789abcdef" } }) });
    expect(sub.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(await sub.text()).toContain('"code":-32001');
    const list = await rpc(f.gateway, "ListTasks", { status: "NOT_A_STATE" });
    expect(list.body.error.code).toBe(-32602);
    for (const when of ["-1", "yesterday", "2026-13-45"]) expect((await rpc(f.gateway, "ListTasks", { statusTimestampAfter: when })).body.error.code).toBe(-32602);
    expect((await rpc(f.gateway, "ListTasks", { statusTimestampAfter: "2026-01-01T00:00:00Z" })).body.result).toBeDefined();
    const rest = await fetch(`${f.gateway}/a2a/rest/tasks/a2a-0123456789abcdef0123456789abcdef`);
    expect(rest.status).toBe(404);
  });

  it("a run that is not an A2A task (started on the Run API) is not found through A2A", async () => {
    const run = (await (await fetch(`${f.gateway}/v1/runs`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: {} }) })).json()) as { run_id: string };
    expect(run.run_id).toBeDefined();
    expect((await rpc(f.gateway, "GetTask", { id: run.run_id })).body.error.code).toBe(-32001);
  });
});

describe("protocol versions", () => {
  it("1.0 by method name without A2A-Version; 0.3 by method name, through the compat layer", async () => {
    const v1 = await rpc(f.gateway, "SendMessage", { message: skillMessage("demo.echo", { v: 1 }) });
    expect(v1.body.result.task.status.state).toBe("TASK_STATE_COMPLETED");
    const v03 = await rpc(f.gateway, "message/send", { message: { kind: "message", messageId: "m03", role: "user", parts: [{ kind: "data", data: { v: "0.3" } }], metadata: { skillId: "demo.echo" } } });
    expect(v03.body.result.kind).toBe("task");
    expect(v03.body.result.status.state).toBe("completed");
    const got = await rpc(f.gateway, "tasks/get", { id: v03.body.result.id });
    expect(got.body.result.artifacts[0].parts[0]).toMatchObject({ kind: "data", data: { echo: { v: "0.3" } } });
  });

  it("an A2A-Version the fabric does not serve is VersionNotSupported (-32009)", async () => {
    const r = await rpc(f.gateway, "GetTask", { id: "a2a-0123456789abcdef0123456789abcdef" }, { "a2a-version": "9.9" });
    expect(r.body.error.code).toBe(-32009);
  });
});
