/**
 * The coordinator checks every completed NodeRun's outputs against its node type's output_schema, compiling the schema
 * at the node type's first answer. The first answers of a new node type often arrive together (a burst of runs, a
 * fan-out): they must share one compile, not build an Ajv instance each. Counted here through the NodeType the
 * coordinator's resolver hands out: a compile reads its `output_schema` once.
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
import { eventually } from "../../test/run-client.js";
import { HttpExecutorCaller, LocalFirstExecutorCaller } from "../src/clients/executor-client.js";
import { ATOMIC_EXECUTOR_API, inProcessApi } from "../src/in-process.js";

const RUNS = 48;
const REF = { node_type_id: "burst.echo", version: "1.0.0" };
const OUTPUT_SCHEMA = { type: "object", properties: { i: { type: "integer" } }, required: ["i"], additionalProperties: false };

/** Holds every execution until `runs` of them are running, then lets them all answer in the same turn. */
function gate(runs: number) {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return {
    async pass() {
      if (++arrived === runs) open();
      await opened;
    },
  };
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("a node type's output schema is compiled once, however many of its first answers arrive together", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "nf-compile-once-"));
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

  /** A coordinator whose NodeType counts the reads of its output_schema, and a real executor that holds the burst. */
  async function setUp(name: string, outputSchema: () => unknown, handler: (i: number) => Promise<Record<string, unknown>>, o: { runs?: number } = {}) {
    const runs = o.runs ?? RUNS;
    const held = gate(runs);
    const echo = defineAtomic<{ i: number }>({
      // The executor checks nothing of its own answers: what the coordinator checks is what counts (as with a peer's).
      nodeType: { ...REF, description: "answers its input once every run of the burst is running", input_schema: { type: "object" }, output_schema: { type: "object" } },
      async handler(inputs) {
        await held.pass();
        return handler(inputs.i);
      },
    });
    const executorApp = await buildAtomicExecutor({ logger: false, handlers: handlersFromDefinitions([echo]) });
    const executor = await listen(executorApp);
    // Called in process, as `fabric dev` wires it: the answers of the burst then reach the coordinator in one turn.
    const executors = new LocalFirstExecutorCaller(new Map([[executor, inProcessApi(executorApp, ATOMIC_EXECUTOR_API)!]]), new HttpExecutorCaller());
    let reads = 0;
    const nodeType = { ...echo.nodeType } as NodeType;
    Object.defineProperty(nodeType, "output_schema", {
      enumerable: true,
      get() {
        reads++;
        return outputSchema();
      },
    });
    const resolver: NodeTypeResolver = {
      nodeType: async () => nodeType,
      executorFor: async () => ({ executor_instance_id: "ae-burst", endpoint: executor }),
    };
    const coordinator = await listen(await buildRunCoordinator({ logger: false, dbPath: path.join(dir, `${name}.db`), registryUrl: "http://127.0.0.1:9", resolver, executors, tickMs: 20 }));
    const start = (i: number, headers: Record<string, string>) => post(`${coordinator}/v1/runs`, { root_node_type_ref: REF, input: { i } }, headers);
    const burst = () => Promise.all(Array.from({ length: runs }, (_, i) => start(i, { prefer: "wait=60" })));
    return { start, burst, reads: () => reads };
  }

  it("completes every run of the burst, its outputs checked, with one compile", async () => {
    const { burst, reads } = await setUp("valid", () => OUTPUT_SCHEMA, async (i) => ({ i }));
    const runs = await burst();
    for (const [i, r] of runs.entries()) {
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.state).toBe("completed");
      expect((r.body.extensions as Record<string, unknown>)["nodefabric.outputs"]).toEqual({ i });
    }
    expect(reads()).toBe(1);
  }, 60_000);

  it("still refuses outputs that break the schema, for every run of the burst", async () => {
    const { burst, reads } = await setUp("invalid", () => OUTPUT_SCHEMA, async () => ({ i: "not a number" }));
    const runs = await burst();
    for (const r of runs) {
      expect(r.body.state, JSON.stringify(r.body)).toBe("failed");
      expect((r.body.extensions as Record<string, Record<string, unknown>>)["nodefabric.error"]?.code).toBe("invalid_outputs");
    }
    expect(reads()).toBe(1);
  }, 60_000);

  it("does not keep a compile that failed: the node type's next answer compiles again", async () => {
    let failures = 1;
    const flaky = () => {
      if (failures-- > 0) throw new Error("the registry's answer could not be read");
      return OUTPUT_SCHEMA;
    };
    const { start, reads } = await setUp("retried", flaky, async (i) => ({ i }), { runs: 1 });
    // The first run's answer cannot be checked, so it is not recorded (its NodeRun waits for its lease to run out).
    const first = await start(0, {});
    expect(first.status).toBe(200);
    await eventually(async () => (reads() >= 1 ? true : undefined), 20_000, "the first answer's compile");
    const second = await start(1, { prefer: "wait=60" });
    expect(second.body.state, JSON.stringify(second.body)).toBe("completed");
    expect((second.body.extensions as Record<string, unknown>)["nodefabric.outputs"]).toEqual({ i: 1 });
    expect(reads()).toBe(2);
  }, 60_000);
});
