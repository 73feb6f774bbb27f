/**
 * What the tests of a2a.send share: a whole fabric serving a2a.send whose egress policy allows loopback (as an operator
 * running agents beside it would set), node types naming an agent's skill, and an execution context of a2a.send
 * alone (a real egress fetch over undici) for the tests that play a second attempt of one NodeRun.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "vitest";
import { Agent } from "undici";
import { loadConfig, SERVICE_NAMES, startFabric, type RunningFabric } from "@nodefabric/core";
import type { AtomicContext, JsonObject } from "@nodefabric/sdk";
import { createHandlerEgress, SecretBindings } from "@nodefabric/sdk/runtime";
import { a2aSend } from "../src/index.js";

export type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

export async function call(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Json }> {
  const res = await fetch(url, { method, headers: body === undefined ? headers : { "content-type": "application/json", ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

export interface TestFabric {
  fabric: RunningFabric;
  registry: string;
  gateway: string;
  publish(nodeType: Json): Promise<void>;
  /** Runs a node type through the gateway (waiting up to 20 s) and answers the Run. */
  run(id: string, input?: Record<string, unknown>, extra?: Record<string, unknown>): Promise<Json>;
  /** Starts a run without waiting. */
  start(id: string, input?: Record<string, unknown>): Promise<Json>;
  get(runId: string): Promise<Json>;
  close(): Promise<void>;
}

/** A whole fabric serving a2a.send; loopback egress allowed unless `flags` say otherwise; secrets as FABRIC_SECRET_*. */
export async function openFabric(options: { flags?: Record<string, unknown>; secrets?: Record<string, string> } = {}): Promise<TestFabric> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-a2a-"));
  const config = loadConfig({
    cwd: dataDir,
    env: {},
    flags: { port_base: 0, data_dir: dataDir, log_level: "silent", executor: { egress: { allow_cidrs: ["127.0.0.1/32"] } }, ...options.flags } as never,
  });
  for (const [name, value] of Object.entries(options.secrets ?? {})) process.env[`FABRIC_SECRET_${name}`] = value;
  let fabric: RunningFabric;
  try {
    fabric = await startFabric(config, SERVICE_NAMES, { definitions: [a2aSend] });
  } finally {
    for (const name of Object.keys(options.secrets ?? {})) delete process.env[`FABRIC_SECRET_${name}`];
  }
  const registry = fabric.urls["node-registry"]!;
  const gateway = fabric.urls["run-gateway"]!;
  const end = Date.now() + 15_000;
  for (;;) {
    const r = await call("GET", `${registry}/v1/executors?node_type_id=a2a.send`);
    if (r.status === 200 && r.body.length > 0) break;
    if (Date.now() > end) throw new Error("the executor did not register a2a.send");
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return {
    fabric,
    registry,
    gateway,
    async publish(nodeType) {
      const r = await call("POST", `${registry}/v1/node-types`, { node_type: nodeType });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    },
    async run(id, input = {}, extra = {}) {
      const r = await call("POST", `${gateway}/v1/runs`, { root_node_type_ref: { node_type_id: id, version: "1.0.0" }, input, ...extra }, { prefer: "wait=20" });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(["completed", "failed"]).toContain(r.body.state);
      return r.body;
    },
    async start(id, input = {}) {
      const r = await call("POST", `${gateway}/v1/runs`, { root_node_type_ref: { node_type_id: id, version: "1.0.0" }, input });
      expect([200, 201, 202], JSON.stringify(r.body)).toContain(r.status);
      return r.body;
    },
    async get(runId) {
      return (await call("GET", `${gateway}/v1/runs/${runId}`)).body;
    },
    async close() {
      await fabric.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A NodeType implemented by a2a.send@1.0.0 with `a2a` as its nodefabric.a2a. */
export function a2aBacked(id: string, a2a: Record<string, unknown>, extra: Record<string, unknown> = {}): Json {
  return {
    node_type_id: id,
    version: "1.0.0",
    kind: "atomic",
    description: `${id}, an A2A skill`,
    input_schema: { type: "object" },
    output_schema: { type: "object" },
    extensions: { "nodefabric.implementation": { node_type_id: "a2a.send", version: "1.0.0" }, "nodefabric.a2a": a2a },
    ...extra,
  };
}

export const errorOf = (run: Json) => run.extensions?.["nodefabric.error"];
export const outputsOf = (run: Json) => run.extensions?.["nodefabric.outputs"];

const dispatcher = new Agent();

/**
 * The context of one execution of a2a.send for `nodeType`: a real egress fetch (no policy: loopback allowed),
 * `checkpoint` from an earlier execution, `saved` collecting what this one saves; `breakAfterSave` makes every request
 * after the first checkpoint fail as a lost executor's would.
 */
export function executionContext(nodeType: Json, options: { checkpoint?: JsonObject; saved?: JsonObject[]; breakAfterSave?: boolean; controller?: AbortController } = {}): AtomicContext {
  const controller = options.controller ?? new AbortController();
  const saved = options.saved ?? [];
  const egress = createHandlerEgress(controller.signal, 30_000, dispatcher, { get: () => undefined }, new SecretBindings());
  const fetch = (async (input: Json, init?: Json) => {
    const died = () => Object.assign(new Error("the executor died"), { cause: { code: "ECONNRESET" } });
    if (options.breakAfterSave && saved.length > 0) throw died();
    const res = await egress.fetch(input, init);
    if (!options.breakAfterSave || !res.body) return res;
    // A stream open when the checkpoint is saved breaks at its next chunk, as a lost executor's connection would.
    const reader = res.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (saved.length > 0 && !done) {
          await reader.cancel().catch(() => undefined);
          controller.error(died());
          return;
        }
        if (done) controller.close();
        else controller.enqueue(value);
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  }) as typeof globalThis.fetch;
  return {
    run_id: "run_1",
    node_run_id: "nr_1",
    node_type_ref: { node_type_id: nodeType.node_type_id, version: nodeType.version },
    attempt: options.checkpoint ? 2 : 1,
    signal: controller.signal,
    deadline: Date.now() + 60_000,
    log: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
    fetch: globalThis.fetch,
    request: (() => Promise.reject(new Error("unused"))) as never,
    secrets: { get: () => undefined },
    nodeType,
    reportCost: () => undefined,
    reportProgress: () => undefined,
    ...(options.checkpoint ? { checkpoint: options.checkpoint } : {}),
    saveCheckpoint: async (data: JsonObject) => {
      saved.push(data);
    },
    egress: { fetch, secretFor: egress.secretFor },
  } as AtomicContext;
}
