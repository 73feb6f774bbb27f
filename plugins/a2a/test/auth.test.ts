/**
 * A2A with authentication required, with real JWTs from a test identity provider: the public card says how to
 * authenticate and an authenticated caller gets the extended card; methods need a token; a caller sees, gets and
 * cancels only its own tasks (another's task id is TaskNotFound, never a hint that it exists); ListTasks is per
 * caller; sending a message needs runs:write.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { TaskState, type Task } from "@a2a-js/sdk";
import { startTestIssuer, type TestIssuer } from "../../../core/test/support/test-issuer.js";
import { a2aClient, message, rpc, skillMessage, startA2aFabric, type A2aFabric } from "./support/a2a-fabric.js";

const GW = "nodefabric-run-gateway";
let idp: TestIssuer;
let f: A2aFabric;
let alice: string;
let bob: string;

beforeAll(async () => {
  idp = await startTestIssuer();
  const keyDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-a2a-keys-"));
  const keyFile = path.join(keyDir, "signing-key.json");
  fs.writeFileSync(keyFile, JSON.stringify(idp.keys[0]!.privateJwk));
  f = await startA2aFabric({
    auth: { mode: "required", issuer: idp.issuer, jwks_url: idp.jwksUrl, signing_key_file: keyFile },
    registryToken: await idp.mint({ aud: "nodefabric-node-registry", scope: "node-types:read" }),
  });
  alice = await idp.mint({ aud: GW, scope: "runs:read runs:write", tenant_id: "acme", sub: "alice" });
  bob = await idp.mint({ aud: GW, scope: "runs:read runs:write", tenant_id: "acme", sub: "bob" });
}, 30_000);
afterAll(async () => {
  await f?.close();
  await idp?.close();
});

const send = (m: ReturnType<typeof message>, returnImmediately = false) => ({ tenant: "", message: m, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately }, metadata: undefined });

describe("A2A with --auth", () => {
  it("the public card names the bearer scheme and offers the extended card; the extended card needs a token", async () => {
    const card = (await (await fetch(`${f.gateway}/.well-known/agent-card.json`)).json()) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(card.securitySchemes.bearer).toEqual({ httpAuthSecurityScheme: { scheme: "Bearer", bearerFormat: "JWT", description: expect.any(String) } });
    // An empty scope list is left out on the wire (proto JSON).
    expect(card.securityRequirements).toEqual([{ schemes: { bearer: {} } }]);
    expect(card.capabilities.extendedAgentCard).toBe(true);
    expect((await rpc(f.gateway, "GetExtendedAgentCard", {})).status).toBe(401);
    const ext = await rpc(f.gateway, "GetExtendedAgentCard", {}, { authorization: `Bearer ${alice}` });
    expect(ext.body.result.skills.map((s: { id: string }) => s.id)).toContain("demo.echo");
  });

  it("answers 401 without a token, and to a token meant for another service", async () => {
    expect((await rpc(f.gateway, "SendMessage", { message: skillMessage("demo.echo", {}) })).status).toBe(401);
    const other = await idp.mint({ aud: "nodefabric-node-registry", scope: "runs:read runs:write" });
    expect((await rpc(f.gateway, "GetTask", { id: "a2a-0123456789abcdef0123456789abcdef" }, { authorization: `Bearer ${other}` })).status).toBe(401);
  });

  it("a caller gets, lists and cancels only its own tasks; another's task id is TaskNotFound", async () => {
    const a = await a2aClient(f.gateway, "JSONRPC", alice);
    const b = await a2aClient(f.gateway, "JSONRPC", bob);
    const done = (await a.sendMessage(send(message("demo.echo", { who: "alice" })))) as Task;
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const long = (await a.sendMessage(send(message("demo.sleep", { ms: 60_000 }), true))) as Task;
    await expect(b.getTask({ tenant: "", id: done.id, historyLength: undefined })).rejects.toMatchObject({ name: "TaskNotFoundError" });
    await expect(b.cancelTask({ tenant: "", id: long.id, metadata: undefined })).rejects.toMatchObject({ name: "TaskNotFoundError" });
    const rest = await a2aClient(f.gateway, "HTTP+JSON", bob);
    await expect(rest.getTask({ tenant: "", id: done.id, historyLength: undefined })).rejects.toMatchObject({ name: "TaskNotFoundError" });
    const listAll = { tenant: "", contextId: "", status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 100, pageToken: "", historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: false };
    expect((await b.listTasks(listAll)).tasks.map((t) => t.id)).not.toContain(done.id);
    expect((await a.listTasks(listAll)).tasks.map((t) => t.id)).toEqual(expect.arrayContaining([done.id, long.id]));
    expect((await a.cancelTask({ tenant: "", id: long.id, metadata: undefined })).status?.state).toBe(TaskState.TASK_STATE_CANCELED);
  });

  it("sending a message needs runs:write (403, and no run); reading needs runs:read only", async () => {
    const reader = await idp.mint({ aud: GW, scope: "runs:read", tenant_id: "acme", sub: "carol" });
    const r = await rpc(f.gateway, "SendMessage", { message: skillMessage("demo.echo", {}) }, { authorization: `Bearer ${reader}` });
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe("permission_denied");
    const list = await rpc(f.gateway, "ListTasks", {}, { authorization: `Bearer ${reader}` });
    expect(list.body.result.tasks).toEqual([]);
  });
});
