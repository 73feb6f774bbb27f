import { describe, it, expect, beforeAll, afterAll, beforeEach } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { ServerResponse } from "node:http";
import Fastify, { type FastifyInstance } from "fastify";
import { request } from "undici";
import { validatorFor } from "@nodefabric/schemas";
import { ChildFailedError, defineAtomic, defineComposite, HandlerError, isAtomicDefinition, isCompositeDefinition, isDefinition, SDK_VERSION, type JsonObject } from "@nodefabric/core/sdk";
import { buildCompositeExecutor } from "../src/services/composite-executor/index.js";
import { handlersFromDefinitions } from "../src/services/atomic-executor/handler-loader.js";
import { buildNodeRegistry } from "../src/services/node-registry/index.js";

// The composite executor against a scripted coordinator: the test sees every request the executor makes (creates,
// streams, :complete), and decides how and when each child ends.
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const isBeginResponse = validatorFor("composite_begin_response");
const isEnvelope = validatorFor("error_envelope");
const isCreateRequest = validatorFor("node_runs_create_request");
const isCompleteRequest = validatorFor("node_run_complete_request");
const isHealth = validatorFor("health");

const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };
const HOLD = { node_type_id: "test.hold", version: "1.0.0" };

/** A coordinator that records what it is asked, creates children by idempotency key, and streams events. */
class ScriptedCoordinator {
  readonly app: FastifyInstance = Fastify();
  url = "";
  creates: Array<{ body: Json; auth?: string }> = [];
  completes: Array<{ id: string; body: Json; auth?: string }> = [];
  evaluations: Array<{ id: string; body: Json }> = [];
  streams: Array<{ id: string; after_seq?: number; auth?: string }> = [];
  /** Children by idempotency key. */
  children = new Map<string, Json>();
  events: Json[] = [];
  /** Answers a create instead of creating (status and ErrorEnvelope), when it returns something. */
  refuse?: (body: Json) => { status: number; error: Json } | undefined;
  /** How a new child ends, right after its creation; undefined keeps it open until `end` is called. */
  autoEnd: (spec: Json) => { state: string; outputs?: Json; error?: Json } | undefined = (spec) =>
    spec.node_type_ref.node_type_id === HOLD.node_type_id ? undefined : { state: "completed", outputs: { echo: spec.inputs } };
  private readonly open = new Set<{ res: ServerResponse; root: string }>();
  private readonly ended = new Set<string>();
  private n = 0;

  constructor() {
    const app = this.app;
    app.post("/v1/node-runs", async (req, reply) => {
      const body = req.body as Json;
      this.creates.push({ body, auth: req.headers.authorization });
      const refusal = this.refuse?.(body);
      if (refusal) return reply.code(refusal.status).send({ error: refusal.error });
      const out: Json[] = [];
      for (const spec of body.node_runs) {
        let child = this.children.get(spec.idempotency_key);
        if (!child) {
          child = {
            node_run_id: `nr_child_${++this.n}`,
            run_id: body.run_id,
            parent_node_run_id: body.parent_node_run_id,
            node_type_ref: spec.node_type_ref,
            state: "queued",
            inputs: spec.inputs,
            extensions: { ...(spec.extensions ?? {}), "nodefabric.idempotency_key": spec.idempotency_key },
          };
          this.children.set(spec.idempotency_key, child);
          this.emit(body.run_id, "node_run_created", child.node_run_id, { parent_node_run_id: body.parent_node_run_id, node_type_ref: spec.node_type_ref });
          const end = this.autoEnd(spec);
          const c = child;
          if (end) setImmediate(() => this.end(c.node_run_id, end));
        }
        out.push(child);
      }
      return { node_runs: out };
    });
    app.get("/v1/node-runs/:id/events", (req, reply) => {
      const { id } = req.params as { id: string };
      const q = req.query as { after_seq?: string };
      const after = q.after_seq === undefined ? -1 : Number(q.after_seq);
      this.streams.push({ id, after_seq: q.after_seq === undefined ? undefined : after, auth: req.headers.authorization });
      reply.hijack();
      reply.raw.writeHead(200, { "content-type": "application/x-ndjson" });
      for (const e of this.events) if (e.seq > after) reply.raw.write(`${JSON.stringify(e)}\n`);
      if (this.ended.has(id)) return reply.raw.end();
      const entry = { res: reply.raw, root: id };
      this.open.add(entry);
      reply.raw.on("close", () => this.open.delete(entry));
    });
    app.post("/v1/node-runs/:id(.+)::complete", async (req, reply) => {
      const { id } = req.params as { id: string };
      this.completes.push({ id, body: req.body as Json, auth: req.headers.authorization });
      if (this.ended.has(id)) return reply.code(409).send({ error: { code: "node_run_terminal", message: "ended" } });
      this.emitEnd(id, req.body as Json);
      return reply.code(204).send();
    });
    app.post("/v1/node-runs/:id(.+)::evaluation", async (req, reply) => {
      this.evaluations.push({ id: (req.params as { id: string }).id, body: req.body as Json });
      return reply.code(204).send();
    });
    app.get("/v1/node-runs/:id", async (req, reply) => {
      const child = [...this.children.values()].find((c) => c.node_run_id === (req.params as { id: string }).id);
      return child ?? reply.code(404).send({ error: { code: "node_run_not_found", message: "no such node run" } });
    });
  }

  async start(): Promise<void> {
    await this.app.listen({ host: "127.0.0.1", port: 0 });
    this.url = `http://127.0.0.1:${(this.app.server.address() as { port: number }).port}`;
  }

  emit(runId: string, type: string, nodeRunId: string, data: Json): void {
    const e = { run_id: runId, seq: this.events.length, type, time: new Date().toISOString(), node_run_id: nodeRunId, data };
    this.events.push(e);
    for (const s of this.open) s.res.write(`${JSON.stringify(e)}\n`);
  }

  /** Ends a child, as the coordinator would when its executor answered. */
  end(nodeRunId: string, end: { state: string; outputs?: Json; error?: Json }): void {
    const child = [...this.children.values()].find((c) => c.node_run_id === nodeRunId)!;
    child.state = end.state;
    if (end.outputs) child.outputs = end.outputs;
    this.emit(child.run_id, "node_run_completed", nodeRunId, end);
  }

  /** The composite itself ends (completed by its executor, or canceled): its streams close after the event. */
  emitEnd(id: string, data: Json): void {
    this.ended.add(id);
    this.emit(this.events[0]?.run_id ?? "run_x", "node_run_completed", id, data);
    for (const s of [...this.open]) if (s.root === id) s.res.end();
  }

  /** Drops every open stream, as a broken connection would. */
  breakStreams(): void {
    for (const s of [...this.open]) s.res.destroy();
  }

  keys(): string[] {
    return this.creates.flatMap((c) => c.body.node_runs.map((s: Json) => s.idempotency_key));
  }
}

async function call(base: string, method: string, urlPath: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await request(base + urlPath, {
    method: method as "POST",
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    headers: body === undefined ? {} : { "content-type": "application/json" },
  });
  const text = await res.body.text();
  return { status: res.statusCode, body: text ? JSON.parse(text) : undefined };
}

async function until<T>(fn: () => T | undefined, ms = 10_000, what = "condition"): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`${what} not reached in ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const signals: Record<string, AbortSignal> = {};

const definitions = [
  defineComposite<{ n: number }, { results: unknown[] }>({
    nodeType: { node_type_id: "t.fan", version: "1.0.0", input_schema: { type: "object", required: ["n"], properties: { n: { type: "integer" } } } },
    async run(inputs, ctx) {
      const results = await Promise.all(Array.from({ length: inputs.n }, (_, i) => ctx.call(ECHO, { i })));
      return { results: results.map((r) => (r.echo as JsonObject).i) };
    },
  }),
  defineComposite({
    nodeType: { node_type_id: "t.steps", version: "1.0.0" },
    async run(_inputs, ctx) {
      const a = await ctx.call(ECHO, { step: "a" });
      const b = await ctx.call(ECHO, { step: "b", after: a.echo });
      return { b };
    },
  }),
  defineComposite({
    nodeType: { node_type_id: "t.hold", version: "1.0.0" },
    async run(_inputs, ctx) {
      signals[ctx.node_run_id] = ctx.signal;
      await ctx.call(HOLD, {});
      return { held: true };
    },
  }),
  defineComposite({
    nodeType: { node_type_id: "t.mixed", version: "1.0.0" },
    async run(_inputs, ctx) {
      const calls = [ECHO, { node_type_id: "bad.type", version: "1.0.0" }, ECHO].map((ref, i) => ctx.call(ref, { i }));
      const outcomes = await Promise.all(calls.map((p) => p.then(() => "ok", (err) => (HandlerError.is(err) ? err.code : "other"))));
      return { outcomes };
    },
  }),
  defineComposite({
    nodeType: { node_type_id: "t.bad-result", version: "1.0.0" },
    async run() {
      return ["not", "an", "object"] as unknown as JsonObject;
    },
  }),
  defineComposite({
    nodeType: { node_type_id: "t.throws", version: "1.0.0" },
    async run() {
      throw new HandlerError("quota_exceeded", "no more today", { details: { limit: 3 } });
    },
  }),
  defineComposite({
    nodeType: { node_type_id: "t.child-fails", version: "1.0.0" },
    async run(_inputs, ctx) {
      await ctx.call(ECHO, { fail: true });
      return {};
    },
  }),
];

describe("the composite executor", () => {
  let registry: FastifyInstance;
  let registryUrl: string;
  let fake: ScriptedCoordinator;
  let executor: FastifyInstance;
  let ex: string;
  let seq = 0;

  beforeAll(async () => {
    const dbPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "nf-")), "registry.db");
    registry = await buildNodeRegistry({ logger: false, dbPath });
    await registry.listen({ host: "127.0.0.1", port: 0 });
    registryUrl = `http://127.0.0.1:${(registry.server.address() as { port: number }).port}`;
    executor = await buildCompositeExecutor({ logger: false, handlers: handlersFromDefinitions(definitions), registryUrl });
    await executor.listen({ host: "127.0.0.1", port: 0 });
    ex = `http://127.0.0.1:${(executor.server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await executor?.close();
    await registry?.close();
  });
  beforeEach(async () => {
    await fake?.app.close();
    fake = new ScriptedCoordinator();
    await fake.start();
  });

  function beginBody(node_type_id: string, inputs: Json = {}, extra: Json = {}) {
    seq++;
    return {
      run_id: `run_t${seq}`,
      node_run_id: `nr_t${seq}`,
      node_type_ref: { node_type_id, version: "1.0.0" },
      inputs,
      coordinator_endpoint: fake.url,
      assignment_token: `token-${seq}`,
      ...extra,
    };
  }

  async function begin(body: Json): Promise<Json> {
    const res = await call(ex, "POST", "/v1/composite-node-runs:begin", body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(isBeginResponse(res.body)).toBe(true);
    return res.body;
  }

  const completion = (id: string) => until(() => fake.completes.find((c) => c.id === id), 10_000, `:complete of ${id}`);

  it("accepts a composite at once, creates the calls of one tick in one request with deterministic keys, and completes it", async () => {
    const body = beginBody("t.fan", { n: 3 });
    expect(await begin(body)).toEqual({ accepted: true });
    const done = await completion(body.node_run_id);
    expect(done.body).toEqual({ state: "completed", outputs: { results: [0, 1, 2] } });
    expect(isCompleteRequest(done.body)).toBe(true);
    expect(fake.creates).toHaveLength(1);
    expect(isCreateRequest(fake.creates[0].body)).toBe(true);
    expect(fake.creates[0].body).toMatchObject({ run_id: body.run_id, parent_node_run_id: body.node_run_id });
    expect(fake.keys()).toEqual([0, 1, 2].map((i) => `${body.node_run_id}:${i}`));
    // The assignment token travels on every call to the coordinator, and the composite is followed by one stream.
    const bearer = `Bearer ${body.assignment_token}`;
    expect(fake.creates[0].auth).toBe(bearer);
    expect(done.auth).toBe(bearer);
    expect(fake.streams).toEqual([{ id: body.node_run_id, after_seq: undefined, auth: bearer }]);
  });

  it("chunks the 2,500 calls of one tick into requests of at most 1,000 specs", async () => {
    const body = beginBody("t.fan", { n: 2500 });
    await begin(body);
    const done = await completion(body.node_run_id);
    expect(done.body.state).toBe("completed");
    expect(done.body.outputs.results).toEqual(Array.from({ length: 2500 }, (_, i) => i));
    expect(fake.creates.map((c) => c.body.node_runs.length)).toEqual([1000, 1000, 500]);
    expect(fake.keys()).toEqual(Array.from({ length: 2500 }, (_, i) => `${body.node_run_id}:${i}`));
    expect(fake.streams).toHaveLength(1);
  });

  it("answers a second :begin for a composite it drives with already running, and stops it on :cancel without completing it", async () => {
    const body = beginBody("t.hold");
    await begin(body);
    await until(() => fake.creates.length === 1);
    expect(await begin(body)).toEqual({ accepted: true, message: "already running" });
    const health = await call(ex, "GET", "/v1/health");
    expect(isHealth(health.body)).toBe(true);
    expect(health.body.checks.find((c: Json) => c.name === "driving").details.count).toBe(1);

    const signal = signals[body.node_run_id];
    expect(signal.aborted).toBe(false);
    const cancel = await call(ex, "POST", `/v1/composite-node-runs/${body.node_run_id}:cancel`);
    expect(cancel.status).toBe(204);
    expect(signal.aborted).toBe(true);
    await new Promise((r) => setTimeout(r, 100));
    expect(fake.completes).toEqual([]);
    expect(fake.streams).toHaveLength(1);
    expect(fake.creates).toHaveLength(1);
    const after = await call(ex, "GET", "/v1/health");
    expect(after.body.checks.find((c: Json) => c.name === "driving").details.count).toBe(0);
    // A :begin that arrives after its cancel starts nothing.
    expect(await begin(body)).toMatchObject({ accepted: true });
    await new Promise((r) => setTimeout(r, 50));
    expect(fake.creates).toHaveLength(1);
    // Cancel of a NodeRun it does not drive is still 204.
    expect((await call(ex, "POST", "/v1/composite-node-runs/nr_unknown:cancel")).status).toBe(204);
  });

  it("takes the fresher assignment token of a repeated :begin for the calls that follow", async () => {
    fake.autoEnd = () => undefined;
    const body = beginBody("t.steps");
    await begin(body);
    await until(() => fake.creates.length === 1);
    expect(await begin({ ...body, assignment_token: "token-fresh" })).toEqual({ accepted: true, message: "already running" });
    fake.end(fake.children.get(`${body.node_run_id}:0`)!.node_run_id, { state: "completed", outputs: { echo: { step: "a" } } });
    await until(() => fake.creates.length === 2);
    fake.end(fake.children.get(`${body.node_run_id}:1`)!.node_run_id, { state: "completed", outputs: { echo: { step: "b" } } });
    const done = await completion(body.node_run_id);
    expect(fake.creates.map((c) => c.auth)).toEqual([`Bearer ${body.assignment_token}`, "Bearer token-fresh"]);
    expect(done.auth).toBe("Bearer token-fresh");
  });

  it("stops driving, without completing, when the stream reports the composite ended elsewhere", async () => {
    const body = beginBody("t.hold");
    await begin(body);
    await until(() => fake.creates.length === 1);
    fake.emitEnd(body.node_run_id, { state: "canceled", error: { code: "canceled", message: "the run was canceled" } });
    await until(() => signals[body.node_run_id]?.aborted);
    await new Promise((r) => setTimeout(r, 50));
    expect(fake.completes).toEqual([]);
  });

  it("resumes a broken event stream after the last seq it saw, and misses no child's end", async () => {
    fake.autoEnd = () => undefined;
    const body = beginBody("t.steps");
    await begin(body);
    await until(() => fake.creates.length === 1 && fake.streams.length === 1);
    const seen = fake.events.length - 1;
    fake.breakStreams();
    // The child ends while no stream is open.
    fake.end(fake.children.get(`${body.node_run_id}:0`)!.node_run_id, { state: "completed", outputs: { echo: { step: "a" } } });
    await until(() => fake.creates.length === 2, 10_000, "the second call");
    expect(fake.streams.length).toBe(2);
    expect(fake.streams[1].after_seq).toBe(seen);
    fake.end(fake.children.get(`${body.node_run_id}:1`)!.node_run_id, { state: "completed", outputs: { echo: { step: "b" } } });
    const done = await completion(body.node_run_id);
    expect(done.body).toEqual({ state: "completed", outputs: { b: { echo: { step: "b" } } } });
  });

  it("replays a composite from the start on a new executor: existing children come back and finished ones resolve from the stream", async () => {
    // A first executor drives the composite until it is stopped mid-way (a crash, as far as the coordinator knows).
    fake.autoEnd = () => undefined;
    const first = await buildCompositeExecutor({ logger: false, handlers: handlersFromDefinitions(definitions), registryUrl });
    await first.listen({ host: "127.0.0.1", port: 0 });
    const firstUrl = `http://127.0.0.1:${(first.server.address() as { port: number }).port}`;
    const body = beginBody("t.steps");
    const r = await call(firstUrl, "POST", "/v1/composite-node-runs:begin", body);
    expect(r.body).toEqual({ accepted: true });
    await until(() => fake.creates.length === 1);
    await first.close();
    fake.end(fake.children.get(`${body.node_run_id}:0`)!.node_run_id, { state: "completed", outputs: { echo: { step: "a" } } });

    // The coordinator sends :begin again, to an executor that knows nothing of it.
    fake.autoEnd = (spec) => ({ state: "completed", outputs: { echo: spec.inputs } });
    await begin(body);
    const done = await completion(body.node_run_id);
    expect(done.body).toEqual({ state: "completed", outputs: { b: { echo: { step: "b", after: { step: "a" } } } } });
    // The first call was sent twice with the same key and got the same child; each child exists once.
    expect(fake.keys()).toEqual([`${body.node_run_id}:0`, `${body.node_run_id}:0`, `${body.node_run_id}:1`]);
    expect(fake.children.size).toBe(2);
    expect(fake.events.filter((e) => e.type === "node_run_created")).toHaveLength(2);
    expect(fake.streams.map((s) => s.after_seq)).toEqual([undefined, undefined]);
  });

  it("narrows a refused create down to the call at fault; the other calls of the tick still run", async () => {
    fake.refuse = (b) =>
      b.node_runs.some((s: Json) => s.node_type_ref.node_type_id === "bad.type")
        ? { status: 409, error: { code: "constraint_violation", message: "bad.type is denied (node_type_denied)" } }
        : undefined;
    const body = beginBody("t.mixed");
    await begin(body);
    const done = await completion(body.node_run_id);
    expect(done.body).toEqual({ state: "completed", outputs: { outcomes: ["ok", "constraint_violation", "ok"] } });
    expect(fake.creates[0].body.node_runs).toHaveLength(3);
    expect(fake.children.size).toBe(2);
    expect([...fake.children.keys()].sort()).toEqual([`${body.node_run_id}:0`, `${body.node_run_id}:2`]);
  });

  it("repeats a create the coordinator could not take, with the same keys", async () => {
    let refusals = 1;
    fake.refuse = () => (refusals-- > 0 ? { status: 503, error: { code: "unavailable", message: "overloaded", retryable: true } } : undefined);
    const body = beginBody("t.fan", { n: 2 });
    await begin(body);
    const done = await completion(body.node_run_id);
    expect(done.body).toEqual({ state: "completed", outputs: { results: [0, 1] } });
    expect(fake.creates).toHaveLength(2);
    expect(fake.creates[1].body).toEqual(fake.creates[0].body);
  });

  it("fails the composite with child_failed, with the child's error, when a child's failure is not caught", async () => {
    fake.autoEnd = () => ({ state: "failed", error: { code: "upstream_error", message: "upstream said no" } });
    const body = beginBody("t.child-fails");
    await begin(body);
    const done = await completion(body.node_run_id);
    const child = fake.children.get(`${body.node_run_id}:0`)!;
    expect(done.body.state).toBe("failed");
    expect(done.body.error).toMatchObject({
      code: "child_failed",
      details: { node_run_id: child.node_run_id, error: { code: "upstream_error", message: "upstream said no" } },
    });
    expect(isCompleteRequest(done.body)).toBe(true);
  });

  it("fails with the HandlerError's code, with handler_error for a result that is not an object, and with invalid_inputs before any child", async () => {
    const thrown = beginBody("t.throws");
    await begin(thrown);
    expect((await completion(thrown.node_run_id)).body).toEqual({ state: "failed", error: { code: "quota_exceeded", message: "no more today", details: { limit: 3 } } });

    const bad = beginBody("t.bad-result");
    await begin(bad);
    expect((await completion(bad.node_run_id)).body).toMatchObject({ state: "failed", error: { code: "handler_error", message: expect.stringContaining("an array") } });

    const invalid = beginBody("t.fan", { n: "three" });
    await begin(invalid);
    const done = await completion(invalid.node_run_id);
    expect(done.body).toMatchObject({ state: "failed", error: { code: "invalid_inputs", details: { errors: [{ path: "/n" }] } } });
    expect(fake.creates).toEqual([]);
  });

  it("refuses a node type it neither runs nor finds as a plan with 404 unknown_node_type, and a malformed :begin with 400", async () => {
    const unknown = await call(ex, "POST", "/v1/composite-node-runs:begin", beginBody("t.nowhere"));
    expect(unknown.status).toBe(404);
    expect(isEnvelope(unknown.body)).toBe(true);
    expect(unknown.body.error).toMatchObject({ code: "unknown_node_type", details: { node_type_id: "t.nowhere", version: "1.0.0" } });

    const otherVersion = await call(ex, "POST", "/v1/composite-node-runs:begin", { ...beginBody("t.fan"), node_type_ref: { node_type_id: "t.fan", version: "9.0.0" } });
    expect(otherVersion.status).toBe(404);
    expect(otherVersion.body.error.details.available_versions).toEqual(["1.0.0"]);

    // An atomic node type in the registry is not something to drive either.
    const atomic = await call(registryUrl, "POST", "/v1/node-types", { node_type: { ...ECHO, node_type_id: "t.atomic-only", kind: "atomic" } });
    expect(atomic.status).toBe(200);
    const notComposite = await call(ex, "POST", "/v1/composite-node-runs:begin", beginBody("t.atomic-only"));
    expect(notComposite.status).toBe(404);
    expect(notComposite.body.error.code).toBe("unknown_node_type");

    const { coordinator_endpoint: _, ...missing } = beginBody("t.fan", { n: 1 });
    const malformed = await call(ex, "POST", "/v1/composite-node-runs:begin", missing);
    expect(malformed.status).toBe(400);
    expect(isEnvelope(malformed.body)).toBe(true);
    expect(malformed.body.error.code).toBe("invalid_request");
    expect(malformed.body.error.details.errors).toContainEqual(expect.objectContaining({ path: "/coordinator_endpoint" }));
    const notJson = await call(ex, "POST", "/v1/composite-node-runs:begin", "{ nope");
    expect(notJson.status).toBe(400);
    expect(fake.creates).toEqual([]);
    expect(fake.streams).toEqual([]);
  });

  it("publishes its composite node types and registers in the directory as a composite executor", async () => {
    const entry = await (async () => {
      for (let i = 0; i < 200; i++) {
        const r = await call(registryUrl, "GET", "/v1/executors?node_type_id=t.fan");
        const mine = r.status === 200 ? r.body.find((e: Json) => e.endpoint === ex) : undefined;
        if (mine) return mine;
        await new Promise((res) => setTimeout(res, 25));
      }
      throw new Error("not registered");
    })();
    expect(entry).toMatchObject({ kind: "composite", endpoint: ex });
    expect(entry.node_types).toHaveLength(definitions.length);
    const nt = await call(registryUrl, "GET", "/v1/node-types/t.fan?version=1.0.0");
    expect(nt.body).toMatchObject({ node_type_id: "t.fan", kind: "composite" });
    const h = await call(ex, "GET", "/v1/health");
    expect(h.status).toBe(200);
    expect(isHealth(h.body)).toBe(true);
    const checks = Object.fromEntries(h.body.checks.map((c: Json) => [c.name, c]));
    expect(checks.handlers.details.count).toBe(definitions.length);
    expect(checks.registry_registration.status).toBe("ok");
    expect(checks.driving.status).toBe("ok");
  });

  it("recognises ChildFailedError across copies of the SDK by its brand", () => {
    const err = new ChildFailedError({ node_run_id: "nr_1", node_type_ref: ECHO, error: { code: "timeout", message: "too slow" }, state: "failed" });
    expect(ChildFailedError.is(err)).toBe(true);
    expect(ChildFailedError.is({ ...err })).toBe(false);
    expect(ChildFailedError.is(Object.assign(new Error("x"), { [Symbol.for("nodefabric.ChildFailedError")]: true }))).toBe(true);
    expect(err).toMatchObject({ code: "child_failed", node_run_id: "nr_1", state: "failed", error: { code: "timeout" } });
    expect(err.message).toContain("timeout");
  });
});

describe("defineComposite", () => {
  const nodeType = { node_type_id: "sdk.composite", version: "1.2.3", description: "a composite", input_schema: { type: "object" } };
  const run = async () => ({ ok: true });

  it("returns a branded, frozen composite definition whose nodeType is a valid v1 NodeType with kind composite", () => {
    const def = defineComposite({ nodeType, run });
    expect(def.kind).toBe("composite");
    expect(def.sdkVersion).toBe(SDK_VERSION);
    expect(def.run).toBe(run);
    expect(def.nodeType).toEqual({ ...nodeType, kind: "composite" });
    expect(validatorFor("node_type")(def.nodeType)).toBe(true);
    expect((def as unknown as Record<symbol, unknown>)[Symbol.for("nodefabric.definition")]).toBe(true);
    expect(Object.isFrozen(def)).toBe(true);
    expect(isCompositeDefinition(def)).toBe(true);
    expect(isDefinition(def)).toBe(true);
    expect(isAtomicDefinition(def)).toBe(false);
    expect("kind" in nodeType).toBe(false);
  });

  it("tells composite definitions from atomic ones and look-alikes", () => {
    expect(isCompositeDefinition(defineAtomic({ nodeType, handler: () => ({}) }))).toBe(false);
    expect(isCompositeDefinition({ kind: "composite", sdkVersion: SDK_VERSION, nodeType: { ...nodeType, kind: "composite" }, run })).toBe(false);
    expect(isCompositeDefinition(null)).toBe(false);
  });

  it("refuses a definition without an id, a version or a run function", () => {
    expect(() => defineComposite({ nodeType: { ...nodeType, node_type_id: "" }, run })).toThrow(/node_type_id/);
    expect(() => defineComposite({ nodeType: { ...nodeType, version: "" }, run })).toThrow(/version/);
    expect(() => defineComposite({ nodeType, run: "nope" as never })).toThrow(/run function/);
    expect(() => defineComposite(undefined as never)).toThrow(/nodeType, run/);
  });

  it("is loaded by the handler loader next to atomic definitions, each kind served by its own executor", () => {
    const handlers = handlersFromDefinitions([defineComposite({ nodeType, run }), defineAtomic({ nodeType: { ...nodeType, node_type_id: "sdk.atomic" }, handler: () => ({}) })]);
    expect(handlers.definitions.map((d) => d.definition.kind).sort()).toEqual(["atomic", "composite"]);
    expect(isCompositeDefinition(handlers.find("sdk.composite", "1.2.3")?.definition)).toBe(true);
  });
});
