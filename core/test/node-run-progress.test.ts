import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { request } from "undici";
import { validatorFor } from "@nodefabric/schemas";
import { defineAtomic } from "@nodefabric/core/sdk";
import { fabricFixture, type FabricFixture } from "@nodefabric/core/testing";

// ctx.reportProgress: an atomic handler's progress reaches the run as node_run_progress events (an extension event
// type), sent by the executor to the coordinator that dispatched it, with the NodeRun's assignment token.
const isEvent = validatorFor("run_event");
const isEnvelope = validatorFor("error_envelope");
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const steps = defineAtomic({
  nodeType: {
    node_type_id: "progress.steps",
    version: "1.0.0",
    description: "reports its steps as progress",
    input_schema: { type: "object", required: ["steps"], properties: { steps: { type: "integer", minimum: 1, maximum: 10 }, burst: { type: "boolean" } } },
    output_schema: { type: "object", required: ["done"], properties: { done: { type: "integer" } } },
  },
  async handler(inputs: { steps: number; burst?: boolean }, ctx) {
    if (inputs.burst) {
      // 200 reports at once: throttled, so only a few reach the run, the latest among them.
      for (let i = 1; i <= 200; i++) ctx.reportProgress(i, 200, `burst ${i}`);
      await sleep(400);
      return { done: 200 };
    }
    for (let i = 1; i <= inputs.steps; i++) {
      ctx.reportProgress(i, inputs.steps, `step ${i} of ${inputs.steps}`);
      // Spaced past the throttle, and on until the report is in the run: a report still on its way when the handler
      // returns is dropped as late (best effort), which a loaded machine made happen to the last one.
      await sleep(300);
      await reached(ctx.run_id, i);
    }
    return { done: inputs.steps };
  },
});

/** Waits until the run holds `count` progress events (or 20 s, after which the test's assertions say what is missing). */
async function reached(runId: string, count: number): Promise<void> {
  const end = Date.now() + 20_000;
  while (Date.now() < end) {
    const events = await fabric.events(runId);
    if (events.filter((e) => e.type === "node_run_progress").length >= count) return;
    await sleep(50);
  }
}

const badArgs = defineAtomic({
  nodeType: {
    node_type_id: "progress.bad",
    version: "1.0.0",
    description: "reports a progress that is not a number",
    input_schema: { type: "object" },
    output_schema: { type: "object" },
  },
  handler(_inputs, ctx) {
    ctx.reportProgress(Number.NaN);
    return {};
  },
});

let fabric: FabricFixture;

describe("node_run_progress events", () => {
  beforeAll(async () => {
    fabric = await fabricFixture({ definitions: [steps, badArgs] });
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  it("records each report as a node_run_progress event of the NodeRun, between its start and its end", async () => {
    const run = await fabric.run({ node_type_id: "progress.steps", version: "1.0.0" }, { steps: 3 });
    expect(run.state).toBe("completed");
    const events = await fabric.events(run.run_id);
    for (const e of events) expect(isEvent(e), JSON.stringify(isEvent.errors)).toBe(true);
    const progress = events.filter((e) => e.type === "node_run_progress");
    expect(progress.map((e) => e.data)).toEqual([
      { progress: 1, total: 3, message: "step 1 of 3", attempt: 1 },
      { progress: 2, total: 3, message: "step 2 of 3", attempt: 1 },
      { progress: 3, total: 3, message: "step 3 of 3", attempt: 1 },
    ]);
    expect(new Set(progress.map((e) => e.node_run_id))).toEqual(new Set([run.root_node_run_id]));
    const seqOf = (type: string) => events.find((e) => e.type === type)!.seq;
    expect(progress[0]!.seq).toBeGreaterThan(seqOf("node_run_started"));
    expect(progress[2]!.seq).toBeLessThan(seqOf("node_run_completed"));
  });

  it("throttles a burst: a few events reach the run, the first and the latest of those sent", async () => {
    const run = await fabric.run({ node_type_id: "progress.steps", version: "1.0.0" }, { steps: 1, burst: true });
    expect(run.state).toBe("completed");
    const progress = (await fabric.events(run.run_id)).filter((e) => e.type === "node_run_progress");
    expect(progress.length).toBeGreaterThanOrEqual(1);
    expect(progress.length).toBeLessThanOrEqual(3);
    expect(progress[0]!.data).toMatchObject({ progress: 1, total: 200 });
    expect(progress.at(-1)!.data).toMatchObject({ progress: 200, total: 200, message: "burst 200" });
  });

  it("fails the handler that reports a progress that is not a finite number, with a clear message", async () => {
    const run = await fabric.run({ node_type_id: "progress.bad", version: "1.0.0" }, {});
    expect(run.state).toBe("failed");
    expect(JSON.stringify(run.extensions?.["nodefabric.error"])).toContain("ctx.reportProgress takes a finite progress");
  });

  it("the coordinator refuses a bad report with an ErrorEnvelope, and drops one for a NodeRun that has ended", async () => {
    const coordinator = fabric.urls["run-coordinator"];
    const post = async (id: string, body: unknown) => {
      const res = await request(`${coordinator}/v1/node-runs/${encodeURIComponent(id)}:progress`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      const text = await res.body.text();
      return { status: res.statusCode, body: text ? JSON.parse(text) : undefined };
    };
    const bad = await post("nr_nothing", { progress: "half" });
    expect(bad.status).toBe(400);
    expect(isEnvelope(bad.body)).toBe(true);
    const unknown = await post("nr_nothing", { progress: 1 });
    expect(unknown.status).toBe(404);
    expect(isEnvelope(unknown.body)).toBe(true);

    const run = await fabric.run({ node_type_id: "progress.steps", version: "1.0.0" }, { steps: 1 });
    const before = (await fabric.events(run.run_id)).length;
    const late = await post(run.root_node_run_id, { progress: 5, total: 5 });
    expect(late.status).toBe(204);
    expect((await fabric.events(run.run_id)).length).toBe(before);
  });
});
