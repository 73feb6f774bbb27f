import { describe, it, expect } from "vitest";
import type { NodeTypeRef } from "@nodefabric/schemas";
import {
  runPlan,
  validatePlan,
  validateNodeTypePlan,
  compilePlan,
  PlanEvaluationError,
  PlanInvalidError,
  type PlanContext,
} from "../src/services/composite-executor/plan/index.js";
import { ChildFailedError } from "@nodefabric/sdk";
import type { JsonObject } from "@nodefabric/sdk";

const P = "/node_type/extensions/nodefabric.plan";

function ref(id: string): NodeTypeRef {
  return { node_type_id: id, version: "1.0.0" };
}

interface RecordedCall {
  ref: NodeTypeRef;
  inputs: JsonObject;
  resolve(outputs: JsonObject): void;
  reject(err: unknown): void;
  settled: boolean;
}

/** A PlanContext that records every call in order; each call stays pending until the test settles it. */
class FakeContext implements PlanContext {
  readonly calls: RecordedCall[] = [];
  readonly controller = new AbortController();
  readonly signal = this.controller.signal;
  /** When set, every call is answered by it after `delay(call)` milliseconds. */
  constructor(private readonly auto?: { answer: (ref: NodeTypeRef, inputs: JsonObject) => JsonObject; delay: (ref: NodeTypeRef, inputs: JsonObject) => number }) {}

  call(r: NodeTypeRef, inputs: JsonObject): Promise<JsonObject> {
    return new Promise((resolve, reject) => {
      const rec: RecordedCall = {
        ref: r,
        inputs,
        settled: false,
        resolve: (o) => {
          rec.settled = true;
          resolve(o);
        },
        reject: (e) => {
          rec.settled = true;
          reject(e);
        },
      };
      this.calls.push(rec);
      if (this.auto) {
        const { answer, delay } = this.auto;
        setTimeout(() => rec.resolve(answer(r, inputs)), delay(r, inputs));
      }
    });
  }

  ids(): string[] {
    return this.calls.map((c) => c.ref.node_type_id);
  }

  find(id: string): RecordedCall {
    const found = this.calls.find((c) => c.ref.node_type_id === id);
    if (!found) throw new Error(`no call to ${id}; calls so far: ${this.ids().join(", ")}`);
    return found;
  }
}

/** Lets every pending promise chain and timer-free continuation run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

describe("runPlan: scheduling", () => {
  it("starts two independent steps before either finishes", async () => {
    const ctx = new FakeContext();
    const plan = {
      steps: [
        { id: "a", node_type_ref: ref("t.a"), inputs: { city: "{% inputs.city %}" } },
        { id: "b", node_type_ref: ref("t.b"), inputs: { n: 1 } },
      ],
      outputs: { a: "{% steps.a.outputs %}", b: "{% steps.b.outputs.v %}" },
    };
    const result = runPlan(plan, { city: "Oslo" }, ctx);
    await settle();
    expect(ctx.ids()).toEqual(["t.a", "t.b"]);
    expect(ctx.calls.every((c) => !c.settled)).toBe(true);
    expect(ctx.calls.map((c) => c.inputs)).toEqual([{ city: "Oslo" }, { n: 1 }]);
    ctx.find("t.b").resolve({ v: 2 });
    ctx.find("t.a").resolve({ echo: { city: "Oslo" } });
    await expect(result).resolves.toEqual({ a: { echo: { city: "Oslo" } }, b: 2 });
  });

  it("starts a step only when the step it reads has finished, and passes that step's outputs", async () => {
    const ctx = new FakeContext();
    const plan = {
      steps: [
        { id: "b", node_type_ref: ref("t.b"), inputs: { v: "{% steps.a.outputs.x * 10 %}" } },
        { id: "a", node_type_ref: ref("t.a"), inputs: {} },
      ],
      outputs: { y: "{% steps.b.outputs.y %}" },
    };
    const result = runPlan(plan, {}, ctx);
    await settle();
    expect(ctx.ids()).toEqual(["t.a"]);
    ctx.find("t.a").resolve({ x: 4 });
    await settle();
    expect(ctx.ids()).toEqual(["t.a", "t.b"]);
    expect(ctx.find("t.b").inputs).toEqual({ v: 40 });
    ctx.find("t.b").resolve({ y: "done" });
    await expect(result).resolves.toEqual({ y: "done" });
  });

  it("honours after even when no expression reads the step", async () => {
    const ctx = new FakeContext();
    const plan = {
      steps: [
        { id: "write", node_type_ref: ref("t.write"), inputs: { k: "v" } },
        { id: "read", node_type_ref: ref("t.read"), inputs: { k: "v" }, after: ["write"] },
      ],
      outputs: { value: "{% steps.read.outputs.value %}" },
    };
    const result = runPlan(plan, {}, ctx);
    await settle();
    expect(ctx.ids()).toEqual(["t.write"]);
    ctx.find("t.write").resolve({});
    await settle();
    expect(ctx.ids()).toEqual(["t.write", "t.read"]);
    ctx.find("t.read").resolve({ value: 7 });
    await expect(result).resolves.toEqual({ value: 7 });
  });

  it("skips a step whose when is falsy; later references see null outputs", async () => {
    const plan = {
      steps: [
        { id: "maybe", node_type_ref: ref("t.maybe"), when: "{% inputs.go %}", inputs: {} },
        { id: "next", node_type_ref: ref("t.next"), inputs: { prev: "{% steps.maybe.outputs %}" } },
      ],
      outputs: { maybe: "{% steps.maybe.outputs %}", skipped: "{% steps.maybe.outputs = null %}" },
    };
    for (const go of [false, 0, "", [], {}, null]) {
      const ctx = new FakeContext({ answer: () => ({ ok: true }), delay: () => 0 });
      await expect(runPlan(plan, { go }, ctx)).resolves.toEqual({ maybe: null, skipped: true });
      expect(ctx.ids()).toEqual(["t.next"]);
      expect(ctx.find("t.next").inputs).toEqual({ prev: null });
    }
    const missing = new FakeContext({ answer: () => ({ ok: true }), delay: () => 0 });
    await expect(runPlan(plan, {}, missing)).resolves.toEqual({ maybe: null, skipped: true });

    const ctx = new FakeContext({ answer: () => ({ ok: true }), delay: () => 0 });
    await expect(runPlan(plan, { go: true }, ctx)).resolves.toEqual({ maybe: { ok: true }, skipped: false });
    expect(ctx.ids()).toEqual(["t.maybe", "t.next"]);
    expect(ctx.find("t.next").inputs).toEqual({ prev: { ok: true } });
  });

  it("fans out one child per item, in item order, and keeps outputs in item order whatever finishes first", async () => {
    const ctx = new FakeContext();
    const plan = {
      steps: [
        { id: "each", node_type_ref: ref("t.each"), for_each: "{% inputs.items %}", inputs: { v: "{% item %}", i: "{% index %}", city: "{% inputs.city %}" } },
      ],
      outputs: { all: "{% steps.each.outputs %}", firsts: "{% steps.each.outputs.r %}" },
    };
    const result = runPlan(plan, { items: ["x", { deep: [1] }, 3], city: "Rome" }, ctx);
    await settle();
    expect(ctx.calls.map((c) => c.inputs)).toEqual([
      { v: "x", i: 0, city: "Rome" },
      { v: { deep: [1] }, i: 1, city: "Rome" },
      { v: 3, i: 2, city: "Rome" },
    ]);
    expect(ctx.calls.every((c) => !c.settled)).toBe(true);
    [2, 0, 1].forEach((i) => ctx.calls[i]!.resolve({ r: i }));
    await expect(result).resolves.toEqual({ all: [{ r: 0 }, { r: 1 }, { r: 2 }], firsts: [0, 1, 2] });
  });

  it("treats an empty fan-out as no children with outputs [], and a single value as one item", async () => {
    const plan = {
      steps: [{ id: "each", node_type_ref: ref("t.each"), for_each: "{% inputs.items %}", inputs: { v: "{% item %}" } }],
      outputs: { all: "{% steps.each.outputs %}", n: "{% $count(steps.each.outputs) %}" },
    };
    const none = new FakeContext({ answer: (_r, i) => i, delay: () => 0 });
    await expect(runPlan(plan, { items: [] }, none)).resolves.toEqual({ all: [], n: 0 });
    await expect(runPlan(plan, {}, none)).resolves.toEqual({ all: [], n: 0 });
    expect(none.calls).toHaveLength(0);
    const one = new FakeContext({ answer: (_r, i) => i, delay: () => 0 });
    await expect(runPlan(plan, { items: "solo" }, one)).resolves.toEqual({ all: [{ v: "solo" }], n: 1 });
  });

  it("mixes literals and expressions at any depth and leaves strings that are not wholly {% … %} alone", async () => {
    const ctx = new FakeContext({ answer: (_r, i) => ({ got: i }), delay: () => 0 });
    const plan = {
      steps: [
        {
          id: "a",
          node_type_ref: ref("t.a"),
          inputs: {
            fixed: 1,
            flag: false,
            none: null,
            text: "price is {% inputs.p %}",
            nested: { sum: "{% inputs.p + 1 %}", list: [1, "{% inputs.p %}", "{% inputs.missing %}", "lit"] },
            gone: "{% inputs.missing %}",
            upper: "{% $uppercase(inputs.name) %}",
          },
        },
      ],
      outputs: { echoed: "{% steps.a.outputs.got %}", constant: { k: [true] } },
    };
    const out = await runPlan(plan, { p: 41, name: "ada" }, ctx);
    const expected = {
      fixed: 1,
      flag: false,
      none: null,
      text: "price is {% inputs.p %}",
      nested: { sum: 42, list: [1, 41, null, "lit"] },
      upper: "ADA",
    };
    expect(ctx.calls[0]!.inputs).toEqual(expected);
    expect(Object.keys(ctx.calls[0]!.inputs)).not.toContain("gone");
    expect(out).toEqual({ echoed: expected, constant: { k: [true] } });
  });

  it("follows JSONata's path semantics: paths map over arrays and a sequence of one is its single value", async () => {
    const ctx = new FakeContext({ answer: (_r, i) => i, delay: () => 0 });
    const plan = {
      steps: [
        {
          id: "a",
          node_type_ref: ref("t.a"),
          inputs: { ids: "{% inputs.orders.id %}", one: "{% inputs.single.id %}", whole: "{% inputs.orders %}", nested: "{% inputs.deep.list %}", text: "{% inputs.s.x %}" },
        },
      ],
      outputs: { got: "{% steps.a.outputs %}" },
    };
    const inputs = { orders: [{ id: 1 }, { id: 2 }], single: [{ id: 5 }], deep: { list: [[1, 2], [3]] }, s: "str" };
    await expect(runPlan(plan, inputs, ctx)).resolves.toEqual({
      got: { ids: [1, 2], one: 5, whole: [{ id: 1 }, { id: 2 }], nested: [[1, 2], [3]] },
    });
  });

  it("takes whole inputs and outputs from one expression each", async () => {
    const ctx = new FakeContext({ answer: (_r, i) => ({ ...i, seen: true }), delay: () => 0 });
    const plan = {
      steps: [{ id: "a", node_type_ref: ref("t.a"), inputs: "{% inputs.payload %}" }],
      outputs: "{% $merge([steps.a.outputs, {'extra': 1}]) %}",
    };
    await expect(runPlan(plan, { payload: { q: "x" } }, ctx)).resolves.toEqual({ q: "x", seen: true, extra: 1 });
    expect(ctx.calls[0]!.inputs).toEqual({ q: "x" });
  });

  it("invokes ctx.call in the same order on two runs whose children finish in opposite orders", async () => {
    const plan = {
      steps: [
        { id: "a", node_type_ref: ref("t.a"), inputs: { n: "{% inputs.n %}" } },
        { id: "b", node_type_ref: ref("t.b"), inputs: { n: "{% inputs.n %}" } },
        { id: "c", node_type_ref: ref("t.c"), for_each: "{% inputs.items %}", inputs: { a: "{% steps.a.outputs.v %}", item: "{% item %}" } },
        { id: "d", node_type_ref: ref("t.d"), inputs: { b: "{% steps.b.outputs.v %}" } },
        { id: "e", node_type_ref: ref("t.e"), inputs: { c: "{% steps.c.outputs.v %}", d: "{% steps.d.outputs.v %}" } },
      ],
      outputs: { e: "{% steps.e.outputs.v %}" },
    };
    const answer = (r: NodeTypeRef, inputs: JsonObject): JsonObject => ({ v: `${r.node_type_id}:${JSON.stringify(inputs)}` });
    const slowA = new FakeContext({ answer, delay: (r, i) => (r.node_type_id === "t.a" ? 40 : r.node_type_id === "t.c" ? 30 - 10 * Number(i.item) : 1) });
    const slowB = new FakeContext({ answer, delay: (r, i) => (r.node_type_id === "t.b" ? 40 : r.node_type_id === "t.c" ? 10 * Number(i.item) : 1) });
    const first = await runPlan(plan, { n: 1, items: [0, 1, 2] }, slowA);
    const second = await runPlan(plan, { n: 1, items: [0, 1, 2] }, slowB);
    expect(second).toEqual(first);
    const sequence = (ctx: FakeContext) => ctx.calls.map((c) => [c.ref.node_type_id, c.inputs]);
    expect(sequence(slowA)).toEqual(sequence(slowB));
    expect(slowA.ids()).toEqual(["t.a", "t.b", "t.c", "t.c", "t.c", "t.d", "t.e"]);
  });
});

describe("runPlan: failures", () => {
  it("rejects with the child's ChildFailedError and starts nothing after it", async () => {
    const ctx = new FakeContext();
    const plan = {
      steps: [
        { id: "a", node_type_ref: ref("t.a"), inputs: {} },
        { id: "slow", node_type_ref: ref("t.slow"), inputs: {} },
        { id: "b", node_type_ref: ref("t.b"), inputs: { x: "{% steps.slow.outputs %}" } },
      ],
      outputs: {},
    };
    const result = runPlan(plan, {}, ctx);
    await settle();
    const failure = new ChildFailedError({ node_run_id: "nr_1", node_type_ref: ref("t.a"), error: { code: "handler_error", message: "boom" }, state: "failed" });
    ctx.find("t.a").reject(failure);
    await expect(result).rejects.toBe(failure);
    ctx.find("t.slow").resolve({});
    await settle();
    expect(ctx.ids()).toEqual(["t.a", "t.slow"]);
  });

  it("rejects a fan-out when one of its children fails", async () => {
    const ctx = new FakeContext();
    const plan = { steps: [{ id: "each", node_type_ref: ref("t.each"), for_each: [1, 2], inputs: { v: "{% item %}" } }], outputs: {} };
    const result = runPlan(plan, {}, ctx);
    await settle();
    const failure = new Error("child two failed");
    ctx.calls[1]!.reject(failure);
    await expect(result).rejects.toBe(failure);
  });

  it("names the step and the field when an expression fails at run time", async () => {
    const ctx = new FakeContext({ answer: () => ({ v: "text" }), delay: () => 0 });
    const plan = {
      steps: [
        { id: "first", node_type_ref: ref("t.first"), inputs: {} },
        { id: "calc", node_type_ref: ref("t.calc"), inputs: { deep: { total: "{% steps.first.outputs.v + 1 %}" } } },
      ],
      outputs: {},
    };
    const err = await runPlan(plan, {}, ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PlanEvaluationError);
    expect((err as Error).message).toMatch(/^plan step "calc": inputs\/deep\/total failed to evaluate: .*"\+" operator must evaluate to a number \(JSONata T2001 at character 26\)$/);
    expect(err).toMatchObject({ step: "calc", field: "inputs/deep/total" });
    expect(ctx.ids()).toEqual(["t.first"]);

    const perItem = { steps: [{ id: "each", node_type_ref: ref("t.x"), for_each: "{% inputs.xs %}", inputs: { n: "{% $number(item) %}" } }], outputs: {} };
    const itemErr = await runPlan(perItem, { xs: ["1", "nope"] }, new FakeContext()).catch((e: unknown) => e);
    expect((itemErr as Error).message).toMatch(/^plan step "each" \(item 1\): inputs\/n failed to evaluate: .*JSONata D3030/);

    const outputsErr = await runPlan({ steps: [], outputs: { bad: "{% $error('no luck') %}" } }, {}, new FakeContext()).catch((e: unknown) => e);
    expect((outputsErr as Error).message).toMatch(/^the plan's outputs: outputs\/bad failed to evaluate: no luck/);

    const notObject = await runPlan({ steps: [{ id: "s", node_type_ref: ref("t.s"), inputs: "{% inputs.n %}" }], outputs: {} }, { n: 3 }, new FakeContext()).catch((e: unknown) => e);
    expect((notObject as Error).message).toBe('plan step "s": inputs must evaluate to an object, but evaluated to a number');

    const fn = await runPlan({ steps: [], outputs: { f: "{% function($x){ $x } %}" } }, {}, new FakeContext()).catch((e: unknown) => e);
    expect((fn as Error).message).toBe("the plan's outputs: outputs/f failed to evaluate: evaluated to a function, which is not a JSON value");
  });

  it("stops starting steps once the signal aborts and rejects with the abort reason", async () => {
    const ctx = new FakeContext();
    const plan = {
      steps: [
        { id: "a", node_type_ref: ref("t.a"), inputs: {} },
        { id: "b", node_type_ref: ref("t.b"), inputs: { x: "{% steps.a.outputs %}" } },
      ],
      outputs: {},
    };
    const result = runPlan(plan, {}, ctx);
    await settle();
    const reason = new Error("canceled by the coordinator");
    ctx.controller.abort(reason);
    await expect(result).rejects.toBe(reason);
    ctx.find("t.a").resolve({});
    await settle();
    expect(ctx.ids()).toEqual(["t.a"]);

    const early = new FakeContext();
    early.controller.abort();
    await expect(runPlan(plan, {}, early)).rejects.toMatchObject({ name: "AbortError" });
    expect(early.calls).toHaveLength(0);
  });

  it("refuses to run a plan with problems, listing them", async () => {
    const err = await runPlan({ steps: [{ id: "a" }], outputs: {} }, {}, new FakeContext()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PlanInvalidError);
    expect((err as PlanInvalidError).issues).toEqual([{ path: `${P}/steps/0/node_type_ref`, message: "is required" }]);
  });

  it("compiles a plan once per content", () => {
    const plan = { steps: [{ id: "a", node_type_ref: ref("t.a"), inputs: { v: "{% inputs.v %}" } }], outputs: {} };
    const compiled = compilePlan(plan);
    expect(compilePlan(plan)).toBe(compiled);
    expect(compilePlan(structuredClone(plan))).toBe(compiled);
    expect(compilePlan({ ...plan, outputs: { x: 1 } })).not.toBe(compiled);
  });
});

describe("validatePlan", () => {
  const step = (id: string, extra: Record<string, unknown> = {}) => ({ id, node_type_ref: ref(`t.${id}`), inputs: {}, ...extra });

  it("accepts a full plan: fan-out, when, after, references to later steps, predicates and lambdas", () => {
    const plan = {
      steps: [
        { id: "weather", node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, inputs: { city: "{% inputs.city %}" } },
        {
          id: "each",
          node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" },
          for_each: "{% inputs.items[price > 3] %}",
          inputs: { v: "{% item %}", i: "{% index %}", n: "{% $map(inputs.items, function($x){ $x.price * inputs.k }) %}" },
          when: "{% inputs.go %}",
          after: ["weather"],
        },
        step("early", { inputs: { late: "{% $$.steps.late.outputs %}" } }),
        step("late"),
      ],
      outputs: { temp: "{% steps.weather.outputs.echo.city %}", all: "{% steps.each.outputs %}", grouped: "{% inputs.items{name: price} %}" },
    };
    expect(validatePlan(plan)).toEqual([]);
    expect(validatePlan(plan, { kind: "composite" })).toEqual([]);
    const compiled = compilePlan(plan);
    expect(compiled.order.map((i) => compiled.steps[i]!.id)).toEqual(["weather", "each", "late", "early"]);
  });

  it("refuses a plan that is not an object, or lacks steps or outputs", () => {
    expect(validatePlan(42)).toEqual([{ path: P, message: "must be an object with steps and outputs" }]);
    expect(validatePlan([])).toEqual([{ path: P, message: "must be an object with steps and outputs" }]);
    expect(validatePlan({})).toEqual([
      { path: `${P}/steps`, message: "is required" },
      { path: `${P}/outputs`, message: "is required" },
    ]);
    expect(validatePlan({ steps: {}, outputs: 3, extra: 1 })).toEqual([
      { path: `${P}/extra`, message: "is not a field of a plan (steps, outputs, description)" },
      { path: `${P}/steps`, message: "must be an array of steps" },
      { path: `${P}/outputs`, message: "must be an object, or an expression that evaluates to one" },
    ]);
  });

  it("refuses a step without an id or a node_type_ref, or with a bad one", () => {
    expect(validatePlan({ steps: [{ node_type_ref: ref("t.a") }, { id: "b" }, "str"], outputs: {} })).toEqual([
      { path: `${P}/steps/0/id`, message: "is required" },
      { path: `${P}/steps/1/node_type_ref`, message: "is required" },
      { path: `${P}/steps/2`, message: "must be an object with an id and a node_type_ref" },
    ]);
    const bad = validatePlan({ steps: [{ id: "my-step", node_type_ref: { node_type_id: "t.a" }, for__each: [] }], outputs: {} });
    expect(bad).toEqual([
      { path: `${P}/steps/0/for__each`, message: "is not a field of a step (id, node_type_ref, inputs, when, for_each, after, description)" },
      { path: `${P}/steps/0/id`, message: "must be a name of letters, digits and _ that does not start with a digit (it is read as steps.<id>)" },
      { path: `${P}/steps/0/node_type_ref/version`, message: "is required" },
    ]);
  });

  it("refuses duplicate ids, naming the step that has it first", () => {
    expect(validatePlan({ steps: [step("a"), step("b"), step("a")], outputs: {} })).toEqual([
      { path: `${P}/steps/2/id`, message: '"a" is already the id of step 0; step ids must be unique' },
    ]);
  });

  it("reports an expression that does not parse with JSONata's message and position", () => {
    const issues = validatePlan({ steps: [step("a"), step("b", { inputs: { v: "{% $count(inputs.x %}" } })], outputs: {} });
    expect(issues).toEqual([
      { path: `${P}/steps/1/inputs/v`, message: 'is not a valid JSONata expression: Expected ")" before end of expression (JSONata S0203 at character 19)' },
    ]);
    expect(validatePlan({ steps: [], outputs: { e: "{%%}" } })).toEqual([
      { path: `${P}/outputs/e`, message: "is not a valid JSONata expression: Unexpected end of expression (JSONata S0207 at character 2)" },
    ]);
  });

  it("refuses a reference to a step the plan does not have, and steps read without an id", () => {
    expect(validatePlan({ steps: [step("a", { inputs: { v: "{% steps.nope.outputs %}" } })], outputs: { k: "{% $keys(steps) %}" } })).toEqual([
      { path: `${P}/steps/0/inputs/v`, message: 'refers to steps.nope (at character 13), but the plan has no step "nope"' },
      { path: `${P}/outputs/k`, message: "reads steps without naming a step (at character 14); write steps.<id>.outputs so the dependency is known" },
    ]);
  });

  it("names the steps of a cycle, whether made by references or by after", () => {
    const byRefs = validatePlan({
      steps: [step("a", { inputs: { v: "{% steps.c.outputs %}" } }), step("b", { inputs: { v: "{% steps.a.outputs %}" } }), step("c", { after: ["b"] })],
      outputs: {},
    });
    expect(byRefs).toEqual([
      { path: `${P}/steps/0`, message: 'steps "a", "b", "c" wait for each other in a cycle: a → c → b → a (each waits for the next, through steps.<id> references or after)' },
    ]);
    expect(validatePlan({ steps: [step("x"), step("self", { when: "{% steps.self.outputs.ok %}" })], outputs: {} })).toEqual([
      { path: `${P}/steps/1`, message: 'steps "self" wait for each other in a cycle: self → self (each waits for the next, through steps.<id> references or after)' },
    ]);
  });

  it("refuses after naming an unknown step or not being a list", () => {
    expect(validatePlan({ steps: [step("a"), step("b", { after: ["a", "zzz", 3] }), step("c", { after: "a" })], outputs: {} })).toEqual([
      { path: `${P}/steps/1/after/1`, message: 'names no step of this plan ("zzz")' },
      { path: `${P}/steps/1/after/2`, message: "names no step of this plan (3)" },
      { path: `${P}/steps/2/after`, message: "must be an array of step ids" },
    ]);
  });

  it("refuses item and index outside the inputs of a for_each step, and unknown root names", () => {
    const issues = validatePlan({
      steps: [
        step("plain", { inputs: { v: "{% item %}" } }),
        step("fan", { for_each: "{% inputs.xs[index > 1] %}", when: "{% index > 0 %}", inputs: { ok: "{% item & index %}" } }),
        step("typo", { inputs: { "a/b": "{% input.city %}" } }),
        step("badfan", { for_each: 5 }),
      ],
      outputs: { x: "{% item %}" },
    });
    expect(issues).toEqual([
      { path: `${P}/steps/0/inputs/v`, message: 'uses "item" (at character 7), which only the inputs of a for_each step can see' },
      { path: `${P}/steps/1/when`, message: 'uses "index" (at character 8), which only the inputs of a for_each step can see' },
      {
        path: `${P}/steps/2/inputs/a~1b`,
        message: 'reads "input" (at character 8), which is not defined here; expressions see inputs, steps.<id>.outputs, and (in the inputs of a for_each step) item and index',
      },
      { path: `${P}/steps/3/for_each`, message: "must be an expression that evaluates to an array, or an array" },
      { path: `${P}/outputs/x`, message: 'uses "item" (at character 7), which only the inputs of a for_each step can see' },
    ]);
  });

  it("refuses a plan on a node type that is not composite; ignores node types without a plan", () => {
    const plan = { steps: [], outputs: {} };
    expect(validatePlan(plan, { kind: "atomic" })).toEqual([
      { path: "/node_type/kind", message: 'must be "composite" for a node type that carries extensions["nodefabric.plan"]' },
    ]);
    expect(validateNodeTypePlan({ kind: "atomic", extensions: { "nodefabric.plan": plan } })).toHaveLength(1);
    expect(validateNodeTypePlan({ kind: "atomic" })).toEqual([]);
    expect(validateNodeTypePlan({ kind: "composite", extensions: { "nodefabric.other": 1 } })).toEqual([]);
  });
});
