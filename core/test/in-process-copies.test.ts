import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defineAtomic, HandlerError } from "@nodefabric/core/sdk";
import { fabricFixture, type FabricFixture } from "@nodefabric/core/testing";

// With every service in one process the coordinator calls the executor without a socket. What crosses that call
// must behave as if it had been sent: a handler that changes its inputs, or the object it returned after returning
// it, changes nothing the fabric stored or answers (core/src/clients/executor-client.ts).
let later: Promise<void> = Promise.resolve();
const retriesSaw: unknown[] = [];

const meddler = defineAtomic({
  nodeType: {
    node_type_id: "copies.meddler",
    version: "1.0.0",
    description: "changes its inputs, and its outputs after returning them",
    input_schema: { type: "object", required: ["list"], properties: { list: { type: "array", items: { type: "string" } } } },
    output_schema: { type: "object", required: ["seen"], properties: { seen: { type: "array" } } },
  },
  async handler(inputs: { list: string[] }) {
    const seen = [...inputs.list];
    inputs.list.push("added by the handler");
    (inputs as Record<string, unknown>).extra = true;
    const outputs = { seen };
    later = new Promise((resolve) =>
      setTimeout(() => {
        outputs.seen.push("changed after returning");
        resolve();
      }, 5),
    );
    return outputs;
  },
});

const flaky = defineAtomic({
  nodeType: {
    node_type_id: "copies.flaky",
    version: "1.0.0",
    description: "changes its inputs and fails retryably on its first attempt",
    input_schema: { type: "object", required: ["list"], properties: { list: { type: "array", items: { type: "string" } } } },
    output_schema: { type: "object" },
  },
  async handler(inputs: { list: string[] }, ctx) {
    retriesSaw.push(structuredClone(inputs));
    inputs.list.length = 0;
    if (ctx.attempt === 1) throw new HandlerError("upstream_unavailable", "try again", { retryable: true });
    return {};
  },
});

describe("an in-process executor call", () => {
  let fabric: FabricFixture;
  beforeAll(async () => {
    fabric = await fabricFixture({ definitions: [meddler, flaky] });
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  it("keeps the stored inputs and outputs as they were sent and returned", async () => {
    const run = await fabric.run({ node_type_id: "copies.meddler", version: "1.0.0" }, { list: ["a", "b"] });
    await later;
    expect(run.state).toBe("completed");
    expect(run.extensions?.["nodefabric.outputs"]).toEqual({ seen: ["a", "b"] });
    const [nodeRun] = await fabric.nodeRuns(run.run_id);
    expect(nodeRun!.inputs).toEqual({ list: ["a", "b"] });
    expect(nodeRun!.outputs).toEqual({ seen: ["a", "b"] });
    // Read again after the handler's late change: still what it returned.
    const again = await fabric.run({ node_type_id: "copies.meddler", version: "1.0.0" }, { list: ["c"] });
    await later;
    const [stored] = await fabric.nodeRuns(again.run_id);
    expect(stored!.outputs).toEqual({ seen: ["c"] });
    expect(stored!.inputs).toEqual({ list: ["c"] });
  });

  it("gives a retry the inputs the run was started with, whatever the first attempt did to them", async () => {
    const run = await fabric.run({ node_type_id: "copies.flaky", version: "1.0.0" }, { list: ["x", "y"] });
    expect(run.state).toBe("completed");
    expect(retriesSaw).toEqual([{ list: ["x", "y"] }, { list: ["x", "y"] }]);
  });
});
