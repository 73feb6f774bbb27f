/**
 * The atomic executor remembers each execution's result by Idempotency-Key, so a repeated delivery of the same
 * attempt gets it again instead of running the handler twice (docs/memory.md, `executor.result_cache`). Called over
 * HTTP it keeps them for the coordinator's retry window (10,000 and 10 minutes by default). Called by a coordinator
 * of its own process, it is told when the answer is recorded (the NodeRun ended or moved on to another attempt, so
 * the key never comes again) and lets the result go: it then holds only what is in flight. The executor's health
 * says how many it holds (`remembered_results` in its load check).
 */
import { describe, it, expect, afterAll } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import type { NodeType } from "@nodefabric/schemas";
import { defineAtomic } from "@nodefabric/sdk";
import { buildAtomicExecutor } from "../src/services/atomic-executor/index.js";
import { handlersFromDefinitions } from "../src/services/atomic-executor/handler-loader.js";
import { buildRunCoordinator } from "../src/services/run-coordinator/index.js";
import type { NodeTypeResolver } from "../src/engine/node-type-resolver.js";
import { HttpExecutorCaller, LocalFirstExecutorCaller } from "../src/clients/executor-client.js";
import { ATOMIC_EXECUTOR_API, inProcessApi } from "../src/in-process.js";
import { eventually } from "../../test/run-client.js";

const REF = { node_type_id: "remember.echo", version: "1.0.0" };
const RUNS = 12;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(method: string, url: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method, headers: body === undefined ? headers : { "content-type": "application/json", ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Json };
}

describe("what the atomic executor remembers of finished executions", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "nf-remembered-"));
  const open: FastifyInstance[] = [];
  afterAll(async () => {
    for (const app of open.reverse()) await app.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const listen = async (app: FastifyInstance) => {
    open.push(app);
    await app.listen({ host: "127.0.0.1", port: 0 });
    return `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  };

  async function setUp(name: string, inProcess: boolean) {
    let calls = 0;
    const echo = defineAtomic<{ i: number }>({
      nodeType: { ...REF, description: "answers its input", input_schema: { type: "object" }, output_schema: { type: "object" } },
      async handler(inputs) {
        calls++;
        return { i: inputs.i };
      },
    });
    const app = await buildAtomicExecutor({ logger: false, handlers: handlersFromDefinitions([echo]) });
    const executor = await listen(app);
    const resolver: NodeTypeResolver = { nodeType: async () => echo.nodeType as NodeType, executorFor: async () => ({ executor_instance_id: "ae-remember", endpoint: executor }) };
    const executors = inProcess ? new LocalFirstExecutorCaller(new Map([[executor, inProcessApi(app, ATOMIC_EXECUTOR_API)!]]), new HttpExecutorCaller()) : undefined;
    const coordinator = await listen(await buildRunCoordinator({ logger: false, dbPath: path.join(dir, `${name}.db`), registryUrl: "http://127.0.0.1:9", resolver, executors }));
    const runs = await Promise.all(Array.from({ length: RUNS }, (_, i) => call("POST", `${coordinator}/v1/runs`, { root_node_type_ref: REF, input: { i } }, { prefer: "wait=30" })));
    for (const [i, r] of runs.entries()) {
      expect(r.body.state, JSON.stringify(r.body)).toBe("completed");
      expect(r.body.extensions["nodefabric.outputs"]).toEqual({ i });
    }
    const remembered = async () => (await call("GET", `${executor}/v1/health`)).body.checks.find((c: Json) => c.name === "load").details.remembered_results as number;
    return { executor, runs, remembered, calls: () => calls };
  }

  it("called in process, lets each result go once the coordinator has recorded it", async () => {
    const { remembered, calls } = await setUp("in-process", true);
    await eventually(async () => ((await remembered()) === 0 ? true : undefined), 10_000, "no result remembered");
    expect(calls()).toBe(RUNS);
  }, 30_000);

  it("called over HTTP, keeps them, and answers a repeated delivery from memory without running the handler", async () => {
    const { executor, runs, remembered, calls } = await setUp("over-http", false);
    expect(await remembered()).toBe(RUNS);
    const run = runs[0]!.body;
    const again = await call(
      "POST",
      `${executor}/v1/atomic-node-runs:execute`,
      { run_id: run.run_id, node_run_id: run.root_node_run_id, node_type_ref: REF, inputs: { i: 0 } },
      { "idempotency-key": `${run.root_node_run_id}:1` },
    );
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ node_run_id: run.root_node_run_id, state: "completed", outputs: { i: 0 } });
    expect(calls()).toBe(RUNS);
  }, 30_000);
});
