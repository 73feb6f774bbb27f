import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { request } from "undici";
import { validatorFor } from "@nodefabric/schemas";
import { defineAtomic, HandlerError } from "@nodefabric/core/sdk";
import { fabricFixture, type FabricFixture } from "@nodefabric/core/testing";

// ctx.saveCheckpoint / ctx.checkpoint: what an execution saves is kept on the NodeRun and given to its next
// execution, so a retry resumes (an upstream task's id) instead of starting again.
const isEnvelope = validatorFor("error_envelope");
const seen: Array<{ attempt: number; checkpoint: unknown }> = [];

const resumable = defineAtomic({
  nodeType: {
    node_type_id: "checkpoint.resumable",
    version: "1.0.0",
    description: "starts a job once, fails retryably, and finishes it on the retry",
    input_schema: { type: "object" },
    output_schema: { type: "object", required: ["job"], properties: { job: { type: "string" } } },
  },
  async handler(_inputs, ctx) {
    seen.push({ attempt: ctx.attempt, checkpoint: ctx.checkpoint });
    if (ctx.checkpoint) return { job: String(ctx.checkpoint.job) };
    await ctx.saveCheckpoint({ job: `job-of-${ctx.node_run_id}` });
    throw new HandlerError("upstream_unavailable", "the connection dropped after the job started", { retryable: true });
  },
});

describe("NodeRun checkpoints", () => {
  let fabric: FabricFixture;
  beforeAll(async () => {
    fabric = await fabricFixture({ definitions: [resumable] });
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  it("gives the retry what the first execution saved, kept on the NodeRun", async () => {
    const run = await fabric.run({ node_type_id: "checkpoint.resumable", version: "1.0.0" }, {});
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    const job = `job-of-${run.root_node_run_id}`;
    expect(run.extensions?.["nodefabric.outputs"]).toEqual({ job });
    expect(seen).toEqual([
      { attempt: 1, checkpoint: undefined },
      { attempt: 2, checkpoint: { job } },
    ]);
    const [nodeRun] = await fabric.nodeRuns(run.run_id);
    expect(nodeRun!.extensions?.["nodefabric.checkpoint"]).toMatchObject({ data: { job }, attempt: 1 });
  });

  it("refuses a checkpoint for a NodeRun that is not running, one that is not an object, and one too large", async () => {
    const coordinator = fabric.urls["run-coordinator"];
    const post = async (id: string, body: unknown) => {
      const res = await request(`${coordinator}/v1/node-runs/${encodeURIComponent(id)}:checkpoint`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      return { status: res.statusCode, body: (await res.body.json()) as { error: { code: string } } };
    };
    const run = await fabric.run({ node_type_id: "checkpoint.resumable", version: "1.0.0" }, {});
    const ended = await post(run.root_node_run_id, { checkpoint: { job: "x" } });
    expect(ended.status).toBe(409);
    expect(ended.body.error.code).toBe("node_run_terminal");
    for (const body of [{ checkpoint: "x" }, { checkpoint: { big: "x".repeat(20_000) } }]) {
      const bad = await post(run.root_node_run_id, body);
      expect(bad.status).toBe(400);
      expect(isEnvelope(bad.body)).toBe(true);
    }
    expect((await post("nr_unknown", { checkpoint: {} })).status).toBe(404);
  });
});
