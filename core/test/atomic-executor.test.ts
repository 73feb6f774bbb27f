import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import { MockAgent, request } from "undici";
import type { FastifyInstance } from "fastify";
import { validatorFor, type AtomicExecuteResult } from "@nodefabric/schemas";
import { defineAtomic, HandlerError, SDK_VERSION } from "@nodefabric/core/sdk";
import { runHandler } from "@nodefabric/core/testing";
import { buildAtomicExecutor } from "../src/services/atomic-executor/index.js";
import { handlersFromDefinitions, loadHandlers, type LoadedHandlers } from "../src/services/atomic-executor/handler-loader.js";
import { buildNodeRegistry } from "../src/services/node-registry/index.js";

const isResult = validatorFor("atomic_execute_result");
const isEnvelope = validatorFor("error_envelope");
const isHealth = validatorFor("health");
const repoRoot = new URL("../../", import.meta.url).pathname;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  ms: number;
}

async function call(base: string, method: string, urlPath: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const started = Date.now();
  const res = await request(base + urlPath, {
    method: method as "POST",
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body: text ? JSON.parse(text) : undefined, ms: Date.now() - started };
}

let seq = 0;
function execBody(node_type_id: string, inputs: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  seq++;
  return { run_id: `run_test${seq}`, node_run_id: `nr_test${seq}`, node_type_ref: { node_type_id, version: "1.0.0" }, inputs, ...extra };
}

/** Executes and checks the answer is a 200 AtomicExecuteResult valid under the v1 schema. */
async function execute(base: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer & { body: AtomicExecuteResult & Record<string, any> }> {
  const res = await call(base, "POST", "/v1/atomic-node-runs:execute", body, headers);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(isResult(res.body), JSON.stringify(isResult.errors)).toBe(true);
  return res;
}

function expectEnvelope(res: Answer, status: number, code: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(isEnvelope(res.body), JSON.stringify(isEnvelope.errors)).toBe(true);
  expect(res.body.error.code).toBe(code);
}

async function health(base: string) {
  const res = await call(base, "GET", "/v1/health");
  expect(isHealth(res.body), JSON.stringify(isHealth.errors)).toBe(true);
  return res.body as { status: string; checks: Array<{ name: string; status: string; message?: string; details?: any }> };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await delay(25);
  }
}

function baseOf(app: FastifyInstance): string {
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

// Fixture node types next to the demo package: each records what the executor did with it.
const calls = { counted: 0, wrongShape: 0 };
const signals = new Map<string, { aborted: boolean; reason?: string }>();

const counted = defineAtomic<{ n: number; ms?: number }>({
  nodeType: {
    node_type_id: "fixture.counted",
    version: "1.0.0",
    input_schema: { type: "object", properties: { n: { type: "integer" }, ms: { type: "integer" } }, required: ["n"] },
    output_schema: { type: "object", properties: { calls: { type: "integer" }, n: { type: "integer" } }, required: ["calls", "n"] },
  },
  async handler(inputs, ctx) {
    calls.counted++;
    const mine = calls.counted;
    if (inputs.ms) await delay(inputs.ms, undefined, { signal: ctx.signal });
    return { calls: mine, n: inputs.n };
  },
});

const wrongShape = defineAtomic({
  nodeType: {
    node_type_id: "fixture.wrong-shape",
    version: "1.0.0",
    output_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"], additionalProperties: false },
  },
  handler: () => {
    calls.wrongShape++;
    return { n: "seven", secret: "must not leak" } as never;
  },
});

const notAnObject = defineAtomic({
  nodeType: { node_type_id: "fixture.not-an-object", version: "1.0.0" },
  handler: () => [1, 2, 3] as never,
});

const throwsPlain = defineAtomic({
  nodeType: { node_type_id: "fixture.throws", version: "1.0.0" },
  handler: () => {
    throw new Error("kaboom at /srv/app/secret.js");
  },
});

const throwsWithCause = defineAtomic({
  nodeType: { node_type_id: "fixture.throws-with-cause", version: "1.0.0" },
  handler: () => {
    throw new HandlerError("bad_city", "no such city", { details: { city: "Atlantis" }, cause: Object.assign(new Error("404 from geocoder"), { code: "not_found" }) });
  },
});

/** Ignores its signal and answers late: its result must be discarded at the node type's timeout. */
const stubborn = defineAtomic<{ key: string; ms: number }>({
  nodeType: { node_type_id: "fixture.stubborn", version: "1.0.0", extensions: { "nodefabric.timeout_ms": 150 } },
  async handler(inputs, ctx) {
    ctx.signal.addEventListener("abort", () => signals.set(inputs.key, { aborted: true, reason: (ctx.signal.reason as Error).name }));
    await delay(inputs.ms);
    return { late: true };
  },
});

/** Waits for its signal and records why it fired. */
const watcher = defineAtomic<{ key: string }>({
  nodeType: { node_type_id: "fixture.watcher", version: "1.0.0" },
  async handler(inputs, ctx) {
    await new Promise<void>((_resolve, reject) => {
      ctx.signal.addEventListener("abort", () => {
        signals.set(inputs.key, { aborted: true, reason: `${(ctx.signal.reason as Error).name}: ${(ctx.signal.reason as Error).message}` });
        reject(ctx.signal.reason);
      });
    });
    return {};
  },
});

const context = defineAtomic({
  nodeType: { node_type_id: "fixture.context", version: "1.0.0" },
  handler: (_inputs, ctx) => {
    ctx.log.info({ step: "inside" }, "handler log line");
    return {
      run_id: ctx.run_id,
      node_run_id: ctx.node_run_id,
      node_type_ref: ctx.node_type_ref,
      attempt: ctx.attempt,
      deadline_in_ms: ctx.deadline - Date.now(),
      aborted: ctx.signal.aborted,
      secret: ctx.secrets.get("API_KEY") ?? null,
      missing: ctx.secrets.get("NOPE") ?? null,
      inherited: ctx.secrets.get("toString") ?? null,
    };
  },
});

const fixtures = [counted, wrongShape, notAnObject, throwsPlain, throwsWithCause, stubborn, watcher, context];

function combined(demo: LoadedHandlers): LoadedHandlers {
  return handlersFromDefinitions([...demo.definitions.map((d) => ({ definition: d.definition, source: d.source })), ...fixtures]);
}

describe("the Atomic Executor over HTTP", () => {
  let demo: LoadedHandlers;
  let app: FastifyInstance;
  let base: string;
  let upstream: http.Server;
  let upstreamBase: string;
  const upstreamSeen: Array<{ url?: string; ua?: string }> = [];

  beforeAll(async () => {
    demo = await loadHandlers({ handlers: ["@nodefabric/handler-demo"], cwd: repoRoot });
    app = await buildAtomicExecutor({ logger: false, handlers: combined(demo), secrets: { API_KEY: "k-123" }, concurrency: 64 });
    await app.listen({ host: "127.0.0.1", port: 0 });
    base = baseOf(app);
    upstream = http.createServer((req, res) => {
      upstreamSeen.push({ url: req.url, ua: req.headers["user-agent"] });
      if (req.url === "/weather") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ temperature_c: 21.5, city: "Oslo" }));
      } else if (req.url === "/text") {
        res.writeHead(200, { "content-type": "text/plain" }).end("plain words");
      } else if (req.url === "/down") {
        res.writeHead(503, { "content-type": "text/plain" }).end("down for maintenance");
      } else {
        res.writeHead(404).end("no such thing");
      }
    });
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    upstreamBase = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await app?.close();
    await new Promise((resolve) => upstream?.close(resolve));
  });

  describe("results", () => {
    it("completes demo.echo with its inputs as outputs", async () => {
      const body = execBody("demo.echo", { hello: "world", n: [1, 2] });
      const res = await execute(base, body);
      expect(res.body).toEqual({
        node_run_id: body.node_run_id,
        state: "completed",
        outputs: { echo: { hello: "world", n: [1, 2] } },
        started_at: expect.any(String),
        ended_at: expect.any(String),
        extensions: { "nodefabric.attempt": 1, "nodefabric.duration_ms": expect.any(Number) },
      });
      expect(Date.parse(res.body.ended_at!)).toBeGreaterThanOrEqual(Date.parse(res.body.started_at!));
    });

    it("fails with invalid_inputs listing each violation, without calling the handler", async () => {
      const before = calls.counted;
      const res = await execute(base, execBody("fixture.counted", { n: "three" }));
      expect(res.body.state).toBe("failed");
      expect(res.body.outputs).toBeUndefined();
      expect(res.body.error).toEqual({
        code: "invalid_inputs",
        message: "the inputs do not match the input_schema of fixture.counted@1.0.0",
        details: { errors: [{ path: "/n", message: "must be integer" }] },
        retryable: false,
      });
      expect(calls.counted).toBe(before);

      const sleep = await execute(base, execBody("demo.sleep", { ms: -5, extra: true }));
      expect(sleep.body.error.code).toBe("invalid_inputs");
      expect(sleep.body.error.details.errors).toEqual(
        expect.arrayContaining([
          { path: "/ms", message: "must be >= 0" },
          { path: "/extra", message: "is not a known field" },
        ]),
      );
    });

    it("fails with invalid_outputs when the handler's outputs break its output_schema, and never passes them on", async () => {
      const res = await execute(base, execBody("fixture.wrong-shape", {}));
      expect(calls.wrongShape).toBe(1);
      expect(res.body.state).toBe("failed");
      expect(res.body.outputs).toBeUndefined();
      expect(JSON.stringify(res.body)).not.toContain("must not leak");
      expect(res.body.error).toEqual({
        code: "invalid_outputs",
        message: "the outputs of fixture.wrong-shape@1.0.0 do not match its output_schema",
        details: { errors: expect.arrayContaining([{ path: "/n", message: "must be integer" }, { path: "/secret", message: "is not a known field" }]) },
        retryable: false,
      });
    });

    it("fails with invalid_outputs when the handler returns something other than an object", async () => {
      const res = await execute(base, execBody("fixture.not-an-object", {}));
      expect(res.body.state).toBe("failed");
      expect(res.body.error).toEqual({ code: "invalid_outputs", message: "the handler of fixture.not-an-object@1.0.0 returned an array, not a JSON object", retryable: false });
    });

    it("turns a plain thrown error into handler_error with its message and no stack", async () => {
      const res = await execute(base, execBody("fixture.throws", {}));
      expect(res.body.state).toBe("failed");
      expect(res.body.error).toEqual({ code: "handler_error", message: "kaboom at /srv/app/secret.js" });
      expect(JSON.stringify(res.body)).not.toContain("at Object");
    });

    it("passes a HandlerError's code, message, retryable, details and cause through", async () => {
      const custom = await execute(base, execBody("demo.fail", { code: "quota_exceeded", message: "over quota", retryable: true }));
      expect(custom.body.state).toBe("failed");
      expect(custom.body.error).toEqual({ code: "quota_exceeded", message: "over quota", retryable: true });

      const notRetryable = await execute(base, execBody("demo.fail", { code: "bad_input", retryable: false }));
      expect(notRetryable.body.error).toEqual({ code: "bad_input", message: "failed on purpose", retryable: false });

      const defaults = await execute(base, execBody("demo.fail", {}));
      expect(defaults.body.error).toEqual({ code: "handler_error", message: "failed on purpose" });

      const withCause = await execute(base, execBody("fixture.throws-with-cause", {}));
      expect(withCause.body.error).toEqual({
        code: "bad_city",
        message: "no such city",
        details: { city: "Atlantis" },
        cause: { code: "not_found", message: "404 from geocoder" },
      });
    });

    it("takes the attempt from the request extension, else from the Idempotency-Key, else 1", async () => {
      const first = await execute(base, execBody("demo.fail", { succeed_on_attempt: 2 }));
      expect(first.body.state).toBe("failed");
      expect(first.body.extensions!["nodefabric.attempt"]).toBe(1);

      const body = execBody("demo.fail", { succeed_on_attempt: 2 });
      const second = await execute(base, body, { "idempotency-key": `${body.node_run_id}:2` });
      expect(second.body.state).toBe("completed");
      expect(second.body.outputs).toEqual({ attempt: 2 });
      expect(second.body.extensions!["nodefabric.attempt"]).toBe(2);

      const third = await execute(base, execBody("demo.fail", { succeed_on_attempt: 2 }, { extensions: { "nodefabric.attempt": 3 } }));
      expect(third.body.outputs).toEqual({ attempt: 3 });
    });

    it("gives the handler its context: ids, attempt, deadline, a live signal, a logger and only its own secrets", async () => {
      const body = execBody("fixture.context", {}, { extensions: { "nodefabric.attempt": 4 } });
      const res = await execute(base, body);
      expect(res.body.state).toBe("completed");
      expect(res.body.outputs).toEqual({
        run_id: body.run_id,
        node_run_id: body.node_run_id,
        node_type_ref: { node_type_id: "fixture.context", version: "1.0.0" },
        attempt: 4,
        deadline_in_ms: expect.any(Number),
        aborted: false,
        secret: "k-123",
        missing: null,
        inherited: null,
      });
      expect(res.body.outputs!.deadline_in_ms).toBeGreaterThan(25_000);
      expect(res.body.outputs!.deadline_in_ms).toBeLessThanOrEqual(30_000);
    });
  });

  describe("time limits and cancel", () => {
    it("times out at the node type's nodefabric.timeout_ms and does not wait for a handler that ignores its signal", async () => {
      const res = await execute(base, execBody("fixture.stubborn", { key: "t1", ms: 1500 }));
      expect(res.body.state).toBe("failed");
      expect(res.body.error).toEqual({ code: "timeout", message: "fixture.stubborn@1.0.0 did not finish within 150 ms", retryable: true });
      expect(res.body.outputs).toBeUndefined();
      expect(res.ms).toBeLessThan(1000);
      expect(signals.get("t1")).toEqual({ aborted: true, reason: "TimeoutError" });
      // The abandoned handler shows in the load check until it finally returns.
      const load = (await health(base)).checks.find((c) => c.name === "load")!;
      expect(load.details.abandoned).toBeGreaterThanOrEqual(1);
      await until("the stubborn handler to finish", async () => ((await health(base)).checks.find((c) => c.name === "load")!.details.abandoned === 0 ? true : undefined));
    });

    it("times out at the request's nodefabric.deadline, and demo.sleep stops at once", async () => {
      const deadline = new Date(Date.now() + 200).toISOString();
      const res = await execute(base, execBody("demo.sleep", { ms: 10_000 }, { extensions: { "nodefabric.deadline": deadline } }));
      expect(res.body.state).toBe("failed");
      expect(res.body.error.code).toBe("timeout");
      expect(res.body.error.retryable).toBe(true);
      expect(res.ms).toBeLessThan(2000);
      // demo.sleep honours its signal: nothing is left running.
      expect((await health(base)).checks.find((c) => c.name === "load")!.details).toMatchObject({ in_flight: 0, abandoned: 0 });
    });

    it("does not call the handler when the deadline has already passed", async () => {
      const before = calls.counted;
      const deadline = new Date(Date.now() - 1000).toISOString();
      const res = await execute(base, execBody("fixture.counted", { n: 1 }, { extensions: { "nodefabric.deadline": deadline } }));
      expect(res.body.state).toBe("failed");
      expect(res.body.error.code).toBe("timeout");
      expect(calls.counted).toBe(before);
    });

    it("answers 400 for a deadline or attempt that is not well formed", async () => {
      const badDeadline = await call(base, "POST", "/v1/atomic-node-runs:execute", execBody("demo.echo", {}, { extensions: { "nodefabric.deadline": "tomorrow" } }));
      expectEnvelope(badDeadline, 400, "invalid_request");
      expect(badDeadline.body.error.details.errors).toEqual([{ path: "/extensions/nodefabric.deadline", message: "must be an RFC 3339 date-time" }]);
      const badAttempt = await call(base, "POST", "/v1/atomic-node-runs:execute", execBody("demo.echo", {}, { extensions: { "nodefabric.attempt": 0 } }));
      expectEnvelope(badAttempt, 400, "invalid_request");
      expect(badAttempt.body.error.details.errors).toEqual([{ path: "/extensions/nodefabric.attempt", message: "must be an integer >= 1" }]);
    });

    it("cancels demo.sleep in flight: 204, the execution answers canceled, and the handler's signal fired", async () => {
      const body = execBody("demo.sleep", { ms: 20_000 });
      const pending = execute(base, body);
      await until("the sleep to start", async () => ((await health(base)).checks.find((c) => c.name === "load")!.details.in_flight === 1 ? true : undefined));
      const cancel = await call(base, "POST", `/v1/atomic-node-runs/${body.node_run_id}:cancel`);
      expect(cancel.status).toBe(204);
      expect(cancel.body).toBeUndefined();
      const res = await pending;
      expect(res.ms).toBeLessThan(5000);
      expect(res.body).toMatchObject({ node_run_id: body.node_run_id, state: "canceled", error: { code: "canceled", message: "the node run was canceled" } });
      expect(res.body.outputs).toBeUndefined();
      // demo.sleep rejected on its signal, so no handler is left behind.
      expect((await health(base)).checks.find((c) => c.name === "load")!.details).toMatchObject({ in_flight: 0, abandoned: 0 });
    });

    it("fires the handler's signal with the cancel as its reason", async () => {
      const body = execBody("fixture.watcher", { key: "c1" });
      const pending = execute(base, body);
      await until("the watcher to start", async () => ((await health(base)).checks.find((c) => c.name === "load")!.details.in_flight === 1 ? true : undefined));
      expect((await call(base, "POST", `/v1/atomic-node-runs/${body.node_run_id}:cancel`)).status).toBe(204);
      expect((await pending).body.state).toBe("canceled");
      expect(signals.get("c1")).toEqual({ aborted: true, reason: "AbortError: the node run was canceled" });
    });

    it("answers 204 to a cancel when nothing runs, and an execute that arrives after its cancel does not run", async () => {
      const body = execBody("fixture.counted", { n: 5 });
      const cancel = await call(base, "POST", `/v1/atomic-node-runs/${body.node_run_id}:cancel`, "", { "content-type": "application/json" });
      expect(cancel.status).toBe(204);
      const before = calls.counted;
      const late = await execute(base, body);
      expect(late.body.state).toBe("canceled");
      expect(calls.counted).toBe(before);

      // Ids with colons work too: the action is the last ":" suffix.
      const colons = { ...execBody("fixture.counted", { n: 6 }), node_run_id: "nr:with:colons" };
      expect((await call(base, "POST", "/v1/atomic-node-runs/nr:with:colons:cancel")).status).toBe(204);
      expect((await execute(base, colons)).body.state).toBe("canceled");
      expect(calls.counted).toBe(before);
    });
  });

  describe("unknown node types", () => {
    it("answers 404 unknown_node_type for an id it does not serve", async () => {
      const res = await call(base, "POST", "/v1/atomic-node-runs:execute", execBody("no.such.type", {}));
      expectEnvelope(res, 404, "unknown_node_type");
      expect(res.body.error).toEqual({ code: "unknown_node_type", message: "this executor does not serve node type no.such.type", details: { node_type_id: "no.such.type", version: "1.0.0" } });
    });

    it("lists the available versions for a version it does not serve", async () => {
      const body = { ...execBody("demo.echo", {}), node_type_ref: { node_type_id: "demo.echo", version: "9.9.9" } };
      const res = await call(base, "POST", "/v1/atomic-node-runs:execute", body);
      expectEnvelope(res, 404, "unknown_node_type");
      expect(res.body.error.details).toEqual({ node_type_id: "demo.echo", version: "9.9.9", available_versions: ["1.0.0"] });
    });
  });

  describe("Idempotency-Key", () => {
    it("returns the first result again without running the handler twice", async () => {
      const body = execBody("fixture.counted", { n: 7 });
      const key = `${body.node_run_id}:1`;
      const before = calls.counted;
      const first = await execute(base, body, { "idempotency-key": key });
      const again = await execute(base, body, { "idempotency-key": key });
      expect(first.body.state).toBe("completed");
      expect(again.body).toEqual(first.body);
      expect(calls.counted).toBe(before + 1);
      // Same inputs with keys in another order are the same request.
      const reordered = await execute(base, { ...body, inputs: { n: 7 }, node_type_ref: { version: "1.0.0", node_type_id: "fixture.counted" } }, { "idempotency-key": key });
      expect(reordered.body).toEqual(first.body);
      // A new attempt is a new key, and runs.
      const retry = await execute(base, body, { "idempotency-key": `${body.node_run_id}:2` });
      expect(retry.body.extensions!["nodefabric.attempt"]).toBe(2);
      expect(calls.counted).toBe(before + 2);
    });

    it("makes a duplicate that arrives while the first runs wait for the same result", async () => {
      const body = execBody("fixture.counted", { n: 8, ms: 200 });
      const key = `${body.node_run_id}:1`;
      const before = calls.counted;
      const [a, b] = await Promise.all([execute(base, body, { "idempotency-key": key }), execute(base, body, { "idempotency-key": key })]);
      expect(a.body.state).toBe("completed");
      expect(b.body).toEqual(a.body);
      expect(calls.counted).toBe(before + 1);
    });

    it("answers 409 idempotency_conflict for the same key with a different request", async () => {
      const body = execBody("fixture.counted", { n: 9 });
      const key = `${body.node_run_id}:1`;
      await execute(base, body, { "idempotency-key": key });
      const before = calls.counted;
      const conflict = await call(base, "POST", "/v1/atomic-node-runs:execute", { ...body, inputs: { n: 10 } }, { "idempotency-key": key });
      expectEnvelope(conflict, 409, "idempotency_conflict");
      const otherRun = await call(base, "POST", "/v1/atomic-node-runs:execute", { ...body, node_run_id: "nr_other" }, { "idempotency-key": key });
      expectEnvelope(otherRun, 409, "idempotency_conflict");
      expect(calls.counted).toBe(before);
    });
  });

  describe("bad requests", () => {
    it("answers 400 invalid_request for missing inputs, an unknown field and malformed JSON", async () => {
      const { inputs: _omit, ...noInputs } = execBody("demo.echo", {});
      const missing = await call(base, "POST", "/v1/atomic-node-runs:execute", noInputs);
      expectEnvelope(missing, 400, "invalid_request");
      expect(missing.body.error.details.errors).toContainEqual({ path: "/inputs", message: "is required", location: "body" });

      const unknown = await call(base, "POST", "/v1/atomic-node-runs:execute", { ...execBody("demo.echo", {}), priority: 1 });
      expectEnvelope(unknown, 400, "invalid_request");
      expect(unknown.body.error.details.errors).toContainEqual({ path: "/priority", message: "is not a known field", location: "body" });

      const notObject = await call(base, "POST", "/v1/atomic-node-runs:execute", execBody("demo.echo", [] as never));
      expectEnvelope(notObject, 400, "invalid_request");

      const malformed = await call(base, "POST", "/v1/atomic-node-runs:execute", '{"run_id": "r1",', { "content-type": "application/json" });
      expectEnvelope(malformed, 400, "invalid_request");
    });

    it("answers 415 for a body that is not JSON, and 405 for a wrong method", async () => {
      const text = await call(base, "POST", "/v1/atomic-node-runs:execute", "hello", { "content-type": "text/plain" });
      expectEnvelope(text, 415, "unsupported_media_type");
      const get = await call(base, "GET", "/v1/atomic-node-runs:execute");
      expectEnvelope(get, 405, "method_not_allowed");
      expect(get.headers.allow).toBe("POST");
      const getCancel = await call(base, "GET", "/v1/atomic-node-runs/nr_1:cancel");
      expectEnvelope(getCancel, 405, "method_not_allowed");
    });
  });

  describe("demo.upstream against a real local server", () => {
    it("answers the upstream's status and JSON body, with a nodefabric user agent", async () => {
      const res = await execute(base, execBody("demo.upstream", { url: `${upstreamBase}/weather` }));
      expect(res.body.state).toBe("completed");
      expect(res.body.outputs).toEqual({ status: 200, body: { temperature_c: 21.5, city: "Oslo" } });
      expect(upstreamSeen.at(-1)).toEqual({ url: "/weather", ua: `nodefabric/${SDK_VERSION}` });
      const text = await execute(base, execBody("demo.upstream", { url: `${upstreamBase}/text` }));
      expect(text.body.outputs).toEqual({ status: 200, body: "plain words" });
    });

    it("fails with a retryable upstream_error on a 503, and a final one on a 404", async () => {
      const down = await execute(base, execBody("demo.upstream", { url: `${upstreamBase}/down` }));
      expect(down.body.state).toBe("failed");
      expect(down.body.error).toEqual({
        code: "upstream_error",
        message: `${upstreamBase}/down answered 503`,
        retryable: true,
        details: { status: 503, body: "down for maintenance" },
      });
      const missing = await execute(base, execBody("demo.upstream", { url: `${upstreamBase}/nope` }));
      expect(missing.body.error).toMatchObject({ code: "upstream_error", retryable: false, details: { status: 404 } });
    });

    it("fails with a retryable upstream_unavailable naming host and port when the upstream cannot be reached", async () => {
      const closed = http.createServer();
      await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
      const port = (closed.address() as AddressInfo).port;
      await new Promise((resolve) => closed.close(resolve));
      const res = await execute(base, execBody("demo.upstream", { url: `http://127.0.0.1:${port}/` }));
      expect(res.body.state).toBe("failed");
      expect(res.body.error).toMatchObject({
        code: "upstream_unavailable",
        message: `connection refused by 127.0.0.1:${port} (ECONNREFUSED)`,
        retryable: true,
        details: { code: "ECONNREFUSED", host: "127.0.0.1", port },
        cause: { code: "ECONNREFUSED" },
      });
    });
  });

  describe("health", () => {
    it("reports the loaded handlers with their package, the registration and the load", async () => {
      const h = await health(base);
      expect(h.status).toBe("ok");
      const handlers = h.checks.find((c) => c.name === "handlers")!;
      expect(handlers.status).toBe("ok");
      expect(handlers.details.count).toBe(4 + fixtures.length);
      expect(handlers.details.node_types).toContainEqual({ node_type_id: "demo.echo", version: "1.0.0", package: "@nodefabric/handler-demo", package_version: "0.1.0" });
      expect(h.checks.find((c) => c.name === "registry_registration")).toMatchObject({ status: "ok", message: "no registry configured" });
      expect(h.checks.find((c) => c.name === "load")).toMatchObject({ status: "ok", details: { in_flight: 0, concurrency: 64 } });
    });
  });
});

describe("load shedding", () => {
  let app: FastifyInstance;
  let base: string;

  beforeAll(async () => {
    const demo = await loadHandlers({ handlers: ["@nodefabric/handler-demo"], cwd: repoRoot });
    app = await buildAtomicExecutor({ logger: false, handlers: demo, concurrency: 2 });
    await app.listen({ host: "127.0.0.1", port: 0 });
    base = baseOf(app);
  });
  afterAll(async () => {
    await app?.close();
  });

  it("answers 503 unavailable with Retry-After past the concurrency limit, and accepts work again after", async () => {
    const a = execBody("demo.sleep", { ms: 20_000 });
    const b = execBody("demo.sleep", { ms: 20_000 });
    const running = [execute(base, a), execute(base, b)];
    await until("two executions in flight", async () => ((await health(base)).checks.find((c) => c.name === "load")!.details.in_flight === 2 ? true : undefined));
    const load = (await health(base)).checks.find((c) => c.name === "load")!;
    expect(load.status).toBe("degraded");

    const shed = await call(base, "POST", "/v1/atomic-node-runs:execute", execBody("demo.echo", { x: 1 }));
    expectEnvelope(shed, 503, "unavailable");
    expect(shed.headers["retry-after"]).toBe("1");
    expect(shed.body.error.retryable).toBe(true);

    for (const body of [a, b]) expect((await call(base, "POST", `/v1/atomic-node-runs/${body.node_run_id}:cancel`)).status).toBe(204);
    for (const r of await Promise.all(running)) expect(r.body.state).toBe("canceled");
    const ok = await execute(base, execBody("demo.echo", { x: 2 }));
    expect(ok.body.state).toBe("completed");
  });
});

describe("ctx.request, the fast upstream client", () => {
  it("goes through the executor's upstream dispatcher, so a MockAgent can stand in for the upstream", async () => {
    const mock = new MockAgent();
    mock.disableNetConnect();
    mock.get("https://api.weather.example").intercept({ path: "/now?city=Oslo", method: "GET" }).reply(200, { temp: 7 }, { headers: { "content-type": "application/json" } });
    mock.get("https://api.weather.example").intercept({ path: "/now?city=Nowhere", method: "GET" }).reply(503, "try later");
    const weather = defineAtomic<{ city: string }, { temperature_c: number }>({
      nodeType: {
        node_type_id: "fixture.weather",
        version: "1.0.0",
        input_schema: { type: "object", required: ["city"], properties: { city: { type: "string" } } },
        output_schema: { type: "object", required: ["temperature_c"], properties: { temperature_c: { type: "number" } } },
      },
      async handler(inputs, ctx) {
        const res = await ctx.request(`https://api.weather.example/now?city=${encodeURIComponent(inputs.city)}`);
        if (res.statusCode !== 200) throw new HandlerError("upstream_error", `weather answered ${res.statusCode}: ${await res.text()}`, { retryable: res.statusCode >= 500 });
        return { temperature_c: ((await res.json()) as { temp: number }).temp };
      },
    });
    const app = await buildAtomicExecutor({ logger: false, handlers: handlersFromDefinitions([weather]), upstreamDispatcher: mock });
    try {
      const ok = await app.inject({ method: "POST", url: "/v1/atomic-node-runs:execute", payload: execBody("fixture.weather", { city: "Oslo" }) });
      expect(ok.json()).toMatchObject({ state: "completed", outputs: { temperature_c: 7 } });
      const down = await app.inject({ method: "POST", url: "/v1/atomic-node-runs:execute", payload: execBody("fixture.weather", { city: "Nowhere" }) });
      expect(down.json()).toMatchObject({ state: "failed", error: { code: "upstream_error", message: "weather answered 503: try later", retryable: true } });
      expect(isResult(down.json())).toBe(true);
      mock.assertNoPendingInterceptors();
    } finally {
      await app.close();
      await mock.close();
    }
  });
});

describe("shutdown", () => {
  it("aborts every running handler's signal when the executor closes", async () => {
    const app = await buildAtomicExecutor({ logger: false, handlers: handlersFromDefinitions([watcher]) });
    await app.ready();
    const pending = app.inject({
      method: "POST",
      url: "/v1/atomic-node-runs:execute",
      payload: execBody("fixture.watcher", { key: "shutdown1" }),
    });
    await until("the watcher to start", async () => (JSON.parse((await app.inject({ method: "GET", url: "/v1/health" })).body).checks.find((c: { name: string }) => c.name === "load").details.in_flight === 1 ? true : undefined));
    await app.close();
    expect(signals.get("shutdown1")).toEqual({ aborted: true, reason: "AbortError: the executor is shutting down" });
    const res = await pending;
    const body = res.json();
    expect(isResult(body)).toBe(true);
    expect(body.error).toEqual({ code: "executor_unavailable", message: "the executor shut down while the handler was running", retryable: true });
  });
});

describe("runHandler (@nodefabric/core/testing)", () => {
  it("runs one handler through a real executor, with schema validation", async () => {
    const ok = await runHandler(counted, { n: 3 });
    expect(isResult(ok)).toBe(true);
    expect(ok.state).toBe("completed");
    expect(ok.outputs).toMatchObject({ n: 3 });

    const bad = await runHandler(counted, { n: "x" });
    expect(isResult(bad)).toBe(true);
    expect(bad.error?.code).toBe("invalid_inputs");

    const wrong = await runHandler(wrongShape, {});
    expect(wrong.error?.code).toBe("invalid_outputs");
  });

  it("passes attempt and secrets, and applies timeout and cancel", async () => {
    const ctx = await runHandler(context, {}, { attempt: 2, secrets: { API_KEY: "s" } });
    expect(ctx.outputs).toMatchObject({ attempt: 2, secret: "s" });

    const slow = await runHandler(watcher, { key: "rh-timeout" }, { timeoutMs: 100 });
    expect(isResult(slow)).toBe(true);
    expect(slow.error).toEqual({ code: "timeout", message: "fixture.watcher@1.0.0 did not finish within 100 ms", retryable: true });

    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const canceled = await runHandler(watcher, { key: "rh-cancel" }, { signal: controller.signal });
    expect(canceled.state).toBe("canceled");
    expect(signals.get("rh-cancel")).toEqual({ aborted: true, reason: "AbortError: the node run was canceled" });
  });
});

describe("registration with the Node Registry", () => {
  const opened: FastifyInstance[] = [];
  afterAll(async () => {
    for (const a of opened.reverse()) await a.close();
  });

  async function registryOn(port: number): Promise<{ app: FastifyInstance; base: string }> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-"));
    const app = await buildNodeRegistry({ logger: false, dbPath: path.join(dir, "registry.db") });
    await app.listen({ host: "127.0.0.1", port });
    opened.push(app);
    return { app, base: baseOf(app) };
  }

  async function registrationCheck(base: string) {
    return (await health(base)).checks.find((c) => c.name === "registry_registration")!;
  }

  it("publishes its node types and registers itself once it listens", async () => {
    const registry = await registryOn(0);
    const demo = await loadHandlers({ handlers: ["@nodefabric/handler-demo"], cwd: repoRoot });
    const app = await buildAtomicExecutor({ logger: false, handlers: demo, registryUrl: registry.base, executorInstanceId: "atomic-test-1" });
    opened.push(app);
    await app.listen({ host: "127.0.0.1", port: 0 });
    const base = baseOf(app);
    const check = await until("registration", async () => {
      const c = await registrationCheck(base);
      return c.status === "ok" ? c : undefined;
    });
    expect(check.details).toMatchObject({ executor_instance_id: "atomic-test-1", endpoint: base, node_types: 4 });

    const echo = await call(registry.base, "GET", "/v1/node-types/demo.echo");
    expect(echo.status).toBe(200);
    expect(echo.body).toEqual(demo.find("demo.echo", "1.0.0")!.definition.nodeType);
    const executors = await call(registry.base, "GET", "/v1/executors");
    expect(executors.status).toBe(200);
    const me = (executors.body as Array<Record<string, any>>).find((e) => e.executor_instance_id === "atomic-test-1");
    expect(me).toMatchObject({ endpoint: base, kind: "atomic" });
    expect(me!.node_types.map((r: { node_type_id: string }) => r.node_type_id).sort()).toEqual(["demo.echo", "demo.fail", "demo.sleep", "demo.upstream"]);
  });

  it("closes at once even while a registry request hangs", async () => {
    const hanging = http.createServer(() => undefined);
    await new Promise<void>((resolve) => hanging.listen(0, "127.0.0.1", resolve));
    try {
      const app = await buildAtomicExecutor({ logger: false, handlers: handlersFromDefinitions([counted]), registryUrl: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}` });
      await app.listen({ host: "127.0.0.1", port: 0 });
      const base = baseOf(app);
      expect((await registrationCheck(base)).message).toMatch(/^registering with /);
      expect((await execute(base, execBody("fixture.counted", { n: 1 }))).body.state).toBe("completed");
      const started = Date.now();
      await app.close();
      expect(Date.now() - started).toBeLessThan(1000);
    } finally {
      hanging.closeAllConnections();
      await new Promise((resolve) => hanging.close(resolve));
    }
  });

  it("keeps retrying while the registry is down, and reports a version conflict once it is up", async () => {
    // A port that nothing listens on yet.
    const probe = http.createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));

    const demo = await loadHandlers({ handlers: ["@nodefabric/handler-demo"], cwd: repoRoot });
    const app = await buildAtomicExecutor({ logger: false, handlers: demo, registryUrl: `http://127.0.0.1:${port}`, executorInstanceId: "atomic-test-2" });
    opened.push(app);
    await app.listen({ host: "127.0.0.1", port: 0 });
    const base = baseOf(app);

    const pending = await until("a failed attempt", async () => {
      const c = await registrationCheck(base);
      return c.details.attempts >= 1 && c.message?.includes("last attempt failed") ? c : undefined;
    });
    expect(pending.status).toBe("degraded");
    expect((await health(base)).status).toBe("degraded");
    // Serving does not wait for the registry.
    expect((await execute(base, execBody("demo.echo", {}))).body.state).toBe("completed");

    const registry = await registryOn(port);
    // Someone else published different content under demo.fail@1.0.0.
    const other = { ...demo.find("demo.fail", "1.0.0")!.definition.nodeType, description: "another demo.fail" };
    expect((await call(registry.base, "POST", "/v1/node-types", { node_type: other })).status).toBe(200);

    const done = await until("registration to finish", async () => {
      const c = await registrationCheck(base);
      return c.details.problems && !c.message?.startsWith("registering") ? c : undefined;
    }, 20_000);
    expect(done.status).toBe("degraded");
    expect(done.message).toContain("demo.fail@1.0.0: node_type_version_conflict");
    expect((await call(registry.base, "GET", "/v1/node-types/demo.echo")).status).toBe(200);
    const executors = await call(registry.base, "GET", "/v1/executors");
    expect((executors.body as Array<{ executor_instance_id: string }>).map((e) => e.executor_instance_id)).toContain("atomic-test-2");
  });
});
