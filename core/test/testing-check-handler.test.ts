import { describe, it, expect } from "vitest";
import { MockAgent } from "undici";
import { validatorFor } from "@nodefabric/schemas";
import { defineAtomic, HandlerError } from "@nodefabric/core/sdk";
import { assertHandlerProperties, checkHandler, runHandler, sampleInputs } from "@nodefabric/core/testing";

// Property checks: inputs generated from a node type's input_schema, each run through a real executor, and every
// result held to the contract: completed with valid outputs, or failed with a HandlerError the handler threw.
const isResult = validatorFor("atomic_execute_result");

const statsType = {
  node_type_id: "text.stats",
  version: "1.0.0",
  description: "counts the words of a text",
  input_schema: {
    type: "object",
    required: ["text", "mode"],
    properties: {
      text: { type: "string", maxLength: 40 },
      mode: { enum: ["count", "refuse", "crash", "wrong"] },
      limit: { type: "integer", minimum: 1, maximum: 5 },
    },
    additionalProperties: false,
  },
  output_schema: {
    type: "object",
    required: ["words"],
    properties: { words: { type: "integer", minimum: 0 } },
    additionalProperties: false,
  },
  constraints: { gates: { side_effect_class: "read" as const } },
};

interface StatsInputs {
  text: string;
  mode: "count" | "refuse" | "crash" | "wrong";
  limit?: number;
}

const words = (text: string) => text.split(/\s+/).filter(Boolean).length;

/** Keeps its contract: counts, or refuses with a HandlerError (the generic code included). */
const wellBehaved = defineAtomic({
  nodeType: statsType,
  handler(inputs: StatsInputs) {
    if (inputs.mode === "refuse") throw new HandlerError("refused", "asked to refuse");
    if (inputs.mode === "crash") throw new HandlerError("handler_error", "a chosen generic failure");
    return { words: Math.min(words(inputs.text), inputs.limit ?? Infinity) };
  },
});

/** Breaks it two ways: a plain TypeError for "crash", and outputs its schema refuses for "wrong". */
const buggy = defineAtomic({
  nodeType: statsType,
  handler(inputs: StatsInputs) {
    if (inputs.mode === "crash") (undefined as unknown as { length: number }).length;
    if (inputs.mode === "wrong") return { words: String(words(inputs.text)) };
    if (inputs.mode === "refuse") throw new HandlerError("refused", "asked to refuse");
    return { words: words(inputs.text) };
  },
});

describe("checkHandler", () => {
  it("finds nothing wrong with a handler that completes or throws HandlerErrors, and counts each", async () => {
    const report = await checkHandler(wellBehaved, { cases: 60, seed: 3 });
    expect(report.cases).toBe(60);
    expect(report.violations).toEqual([]);
    // Every mode came up, so the check saw both sides of the contract.
    expect(report.completed).toBeGreaterThan(0);
    expect(report.handlerErrors.refused).toBeGreaterThan(0);
    expect(report.handlerErrors.handler_error).toBeGreaterThan(0);
    expect(report.completed + report.handlerErrors.refused + report.handlerErrors.handler_error).toBe(60);
  });

  it("reports outputs that break the output_schema and plain errors, each with its inputs and the executor's result", async () => {
    const report = await checkHandler(buggy, { cases: 60, seed: 3 });
    expect(report.cases).toBe(60);
    const wrong = report.violations.filter((v) => (v.inputs as StatsInputs).mode === "wrong");
    const crashed = report.violations.filter((v) => (v.inputs as StatsInputs).mode === "crash");
    expect(wrong.length).toBeGreaterThan(0);
    expect(crashed.length).toBeGreaterThan(0);
    expect(wrong.length + crashed.length).toBe(report.violations.length);
    expect(report.completed + (report.handlerErrors.refused ?? 0) + report.violations.length).toBe(60);

    for (const v of wrong) {
      expect(isResult(v.result)).toBe(true);
      expect(v.result).toMatchObject({ state: "failed", error: { code: "invalid_outputs" } });
      expect(v.reason).toBe("the outputs of text.stats@1.0.0 do not match its output_schema: /words must be integer");
    }
    for (const v of crashed) {
      expect(v.result).toMatchObject({ state: "failed", error: { code: "handler_error" } });
      expect(v.reason).toMatch(/^the handler threw TypeError: Cannot read properties of undefined \(reading 'length'\), not a HandlerError$/);
      expect(v.thrown).toBeInstanceOf(TypeError);
    }
    // The reported inputs reproduce the failure on their own.
    expect((await runHandler(buggy, wrong[0].inputs as Record<string, unknown>)).error?.code).toBe("invalid_outputs");
  });

  it("gives the same inputs for the same seed, and others for another seed", async () => {
    const seen: unknown[][] = [[], [], []];
    let slot = 0;
    const recording = defineAtomic({
      nodeType: { ...statsType, node_type_id: "text.recording" },
      handler(inputs: StatsInputs) {
        seen[slot].push(inputs);
        return { words: 0 };
      },
    });
    await checkHandler(recording, { cases: 20, seed: 42 });
    slot = 1;
    await checkHandler(recording, { cases: 20, seed: 42 });
    slot = 2;
    await checkHandler(recording, { cases: 20, seed: 43 });

    expect(seen[0]).toHaveLength(20);
    expect(seen[1]).toEqual(seen[0]);
    expect(seen[0]).toEqual(await sampleInputs(recording, { cases: 20, seed: 42 }));
    expect(seen[2]).toHaveLength(20);
    expect(seen[2]).not.toEqual(seen[0]);
    // Different cases within one check, too.
    expect(new Set(seen[0].map((i) => JSON.stringify(i))).size).toBeGreaterThan(10);
  });

  it("runs the given inputs first, and names the ones that do not match the input_schema", async () => {
    const report = await checkHandler(wellBehaved, { cases: 0, inputs: [{ text: "one two three", mode: "count", limit: 2 }, { text: 3, mode: "count" }] });
    expect(report.cases).toBe(2);
    expect(report.completed).toBe(1);
    expect(report.violations).toHaveLength(1);
    expect(report.violations[0]).toMatchObject({
      inputs: { text: 3, mode: "count" },
      result: { state: "failed", error: { code: "invalid_inputs" } },
      reason: "these inputs do not match the input_schema: /text must be string",
    });
  });

  it("reports a handler that does not finish within the timeout", async () => {
    const stuck = defineAtomic({
      nodeType: { ...statsType, node_type_id: "text.stuck" },
      async handler(inputs: StatsInputs, ctx) {
        if (inputs.mode === "refuse") await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
        return { words: 1 };
      },
    });
    const report = await checkHandler(stuck, { cases: 12, seed: 5, runOptions: { timeoutMs: 50 } });
    expect(report.violations.length).toBeGreaterThan(0);
    for (const v of report.violations) {
      expect((v.inputs as StatsInputs).mode).toBe("refuse");
      expect(v.reason).toBe("the executor ended it failed with timeout: text.stuck@1.0.0 did not finish within 50 ms");
    }
    expect(report.completed + report.violations.length).toBe(12);
  });

  it("tells apart inputs the generator got wrong: json-schema-faker's floats miss a multipleOf that Ajv checks", async () => {
    const ratio = defineAtomic({
      nodeType: {
        ...statsType,
        node_type_id: "ratio.percent",
        input_schema: { type: "object", required: ["ratio"], properties: { ratio: { type: "number", minimum: 0, maximum: 1, multipleOf: 0.01 } } },
        output_schema: { type: "object" },
      },
      handler: () => ({}),
    });
    const report = await checkHandler(ratio, { cases: 80, seed: 1 });
    expect(report.violations.length).toBeGreaterThan(0);
    for (const v of report.violations) {
      expect(v.result?.error?.code).toBe("invalid_inputs");
      expect(v.reason).toMatch(/^json-schema-faker generated inputs the input_schema rejects: \/ratio must be multiple of 0.01 \(/);
    }
  });

  it("runs every case with the MockAgent of runOptions serving the upstream", async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    agent.get("https://counter.test").intercept({ path: /^\/words\?/ }).reply(200, { words: 2 }).persist();
    const remote = defineAtomic({
      nodeType: { ...statsType, node_type_id: "text.remote" },
      async handler(inputs: StatsInputs, ctx) {
        const res = await ctx.request(`https://counter.test/words?text=${encodeURIComponent(inputs.text)}`);
        if (res.statusCode !== 200) throw new HandlerError("upstream_error", `answered ${res.statusCode}`);
        return (await res.json()) as { words: number };
      },
    });
    try {
      const report = await assertHandlerProperties(remote, { cases: 15, runOptions: { mockAgent: agent } });
      expect(report).toEqual({ cases: 15, completed: 15, handlerErrors: {}, violations: [] });
    } finally {
      await agent.close();
    }
  });
});

describe("assertHandlerProperties", () => {
  it("resolves with the report when every case keeps the contract", async () => {
    const report = await assertHandlerProperties(wellBehaved, { cases: 10 });
    expect(report.cases).toBe(10);
    expect(report.violations).toEqual([]);
  });

  it("throws an Error listing the first violations with their inputs", async () => {
    const failure = await assertHandlerProperties(buggy, { cases: 60, seed: 3 }).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(failure).toBeInstanceOf(Error);
    const report = await checkHandler(buggy, { cases: 60, seed: 3 });
    const lines = failure!.message.split("\n");
    expect(lines[0]).toBe(`text.stats@1.0.0: ${report.violations.length} of 60 cases broke the handler's contract (seed 3):`);
    // The first violation's inputs, then its reason, are listed as they are in the report.
    expect(lines[1]).toBe(`  1. inputs ${JSON.stringify(report.violations[0].inputs)}`);
    expect(lines[2]).toBe(`     ${report.violations[0].reason}`);
    expect(failure!.message.match(/^ {2}\d+\. inputs /gm)).toHaveLength(Math.min(5, report.violations.length));
    expect(report.violations.length).toBeGreaterThan(5);
    expect(lines.at(-1)).toBe(`  … and ${report.violations.length - 5} more`);
    // A plain error's message points at the line of the handler that threw.
    expect(failure!.message).toMatch(/the handler threw TypeError: .*, not a HandlerError\n {7}at .*testing-check-handler\.test\.ts:\d+:\d+/);
  });

  it("refuses a definition whose schemas do not compile, naming the problem", async () => {
    const broken = defineAtomic({ nodeType: { ...statsType, node_type_id: "text.broken", input_schema: { type: "no-such-type" } }, handler: () => ({ words: 0 }) });
    await expect(assertHandlerProperties(broken, { cases: 1 })).rejects.toThrow(/text\.broken@1\.0\.0.*input_schema/);
  });
});

