import { describe, it, expect, beforeAll, afterAll, afterEach } from "vitest";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import nock from "nock";
import { MockAgent, getGlobalDispatcher, request } from "undici";
import { validatorFor } from "@nodefabric/schemas";
import { defineAtomic, defineComposite, HandlerError, type JsonObject } from "@nodefabric/core/sdk";
import { fabricFixture, type FabricFixture } from "@nodefabric/core/testing";

// fabricFixture: a whole fabric in the test's process, serving definitions made in the test. Runs go through the
// gateway over loopback HTTP, as a client's would; only upstream APIs are mocked (nock, MockAgent).
const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const isRun = validatorFor("run");
const isNodeRun = validatorFor("node_run");
const isEvent = validatorFor("run_event");

const hello = defineAtomic({
  nodeType: {
    node_type_id: "greet.hello",
    version: "1.0.0",
    description: "greets one person",
    input_schema: { type: "object", required: ["name"], properties: { name: { type: "string", minLength: 1 } }, additionalProperties: false },
    output_schema: { type: "object", required: ["greeting"], properties: { greeting: { type: "string" } } },
    constraints: { gates: { side_effect_class: "read" } },
  },
  handler(inputs: { name: string }) {
    if (inputs.name === "Nobody") throw new HandlerError("no_such_person", "there is nobody to greet");
    return { greeting: `Hello, ${inputs.name}!` };
  },
});

const HELLO = { node_type_id: "greet.hello", version: "1.0.0" };

const greetAll = defineComposite({
  nodeType: {
    node_type_id: "greet.all",
    version: "2.0.0",
    description: "greets everyone, one child run each",
    input_schema: { type: "object", required: ["names"], properties: { names: { type: "array", items: { type: "string" } } } },
    output_schema: { type: "object", required: ["greetings"], properties: { greetings: { type: "array", items: { type: "string" } } } },
  },
  async run(inputs: { names: string[] }, ctx) {
    const outputs = await Promise.all(inputs.names.map((name) => ctx.call(HELLO, { name })));
    return { greetings: outputs.map((o) => o.greeting as string) };
  },
});

describe("fabricFixture", () => {
  let fabric: FabricFixture;
  beforeAll(async () => {
    fabric = await fabricFixture({ definitions: [hello, greetAll] });
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  it("runs a composite that calls an atomic one, and ends with the composite's outputs", async () => {
    const run = await fabric.run({ node_type_id: "greet.all", version: "2.0.0" }, { names: ["Ada", "Linus"] });
    expect(isRun(run), JSON.stringify(isRun.errors)).toBe(true);
    expect(run.state).toBe("completed");
    expect(run.extensions?.["nodefabric.outputs"]).toEqual({ greetings: ["Hello, Ada!", "Hello, Linus!"] });

    const nodeRuns = await fabric.nodeRuns(run.run_id);
    for (const nr of nodeRuns) expect(isNodeRun(nr), JSON.stringify(isNodeRun.errors)).toBe(true);
    const root = nodeRuns.find((n) => n.node_run_id === run.root_node_run_id)!;
    expect(root).toMatchObject({ kind: "composite", state: "completed", outputs: { greetings: ["Hello, Ada!", "Hello, Linus!"] } });
    const children = nodeRuns.filter((n) => n.parent_node_run_id === root.node_run_id);
    expect(children.map((c) => ({ kind: c.kind, state: c.state, ref: c.node_type_ref, inputs: c.inputs, outputs: c.outputs })).sort((a, b) => String(a.inputs?.name).localeCompare(String(b.inputs?.name)))).toEqual([
      { kind: "atomic", state: "completed", ref: HELLO, inputs: { name: "Ada" }, outputs: { greeting: "Hello, Ada!" } },
      { kind: "atomic", state: "completed", ref: HELLO, inputs: { name: "Linus" }, outputs: { greeting: "Hello, Linus!" } },
    ]);
  });

  it("gives the run's events in seq order: the composite decomposes, each child executes, the run completes", async () => {
    const run = await fabric.run("greet.all@2.0.0", { names: ["Grace"] });
    const events = await fabric.events(run.run_id);
    for (const e of events) expect(isEvent(e), JSON.stringify(isEvent.errors)).toBe(true);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));

    const child = (await fabric.nodeRuns(run.run_id)).find((n) => n.node_run_id !== run.root_node_run_id)!;
    const of = (nodeRunId: string) => events.filter((e) => e.node_run_id === nodeRunId).map((e) => e.type);
    expect(events.filter((e) => e.node_run_id === undefined).map((e) => e.type)).toEqual(["run_started", "policy_decided", "run_completed"]);
    expect(of(run.root_node_run_id)).toEqual(["node_run_created", "policy_decided", "node_run_assigned", "node_run_started", "composite_decomposed", "node_run_completed"]);
    expect(of(child.node_run_id)).toEqual(["node_run_created", "policy_decided", "policy_decided", "node_run_assigned", "node_run_started", "atomic_executed", "node_run_completed"]);
    // The PDP was asked at each checkpoint: the run's start, the child's creation, and each execution.
    expect(events.filter((e) => e.type === "policy_decided").map((e) => e.data?.action)).toEqual(["run.start", "node.run.execute", "node.run.create", "node.run.execute"]);
    const decomposed = events.find((e) => e.type === "composite_decomposed")!;
    expect(decomposed.data).toMatchObject({ child_node_run_ids: [child.node_run_id] });
    expect(events.at(-1)).toMatchObject({ type: "run_completed", data: { state: "completed" } });
  });

  it("runs a node type named by its id alone, at its latest version", async () => {
    const run = await fabric.run("greet.hello", { name: "Barbara" });
    expect(run).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { greeting: "Hello, Barbara!" } } });
    const [root] = await fabric.nodeRuns(run.run_id);
    expect(root.node_type_ref).toEqual(HELLO);
  });

  it("ends a run failed with the handler's error, and a composite whose child failed with child_failed", async () => {
    const atomic = await fabric.run(HELLO, { name: "Nobody" });
    expect(atomic.state).toBe("failed");
    expect(atomic.extensions?.["nodefabric.error"]).toMatchObject({ code: "no_such_person", message: "there is nobody to greet" });

    const composite = await fabric.run("greet.all@2.0.0", { names: ["Ada", "Nobody"] });
    expect(composite.state).toBe("failed");
    expect(composite.extensions?.["nodefabric.error"]).toMatchObject({ code: "child_failed" });
  });

  it("answers a run of a node type nobody serves, or with bad input, with the gateway's error", async () => {
    await expect(fabric.run("greet.nobody@1.0.0", {})).rejects.toMatchObject({ code: "node_type_not_found" });
    // Without a version the registry is asked for the latest, and answers the same.
    await expect(fabric.run("greet.nobody", {})).rejects.toMatchObject({ code: "node_type_not_found", message: 'no node type "greet.nobody" is published' });
    const bad = await fabric.run(HELLO, { name: 42 });
    expect(bad.state).toBe("failed");
    expect(bad.extensions?.["nodefabric.error"]).toMatchObject({ code: "invalid_inputs" });
  });

  it("returns a run at once with waitSeconds 0", async () => {
    const run = await fabric.run(HELLO, { name: "Ken" }, { waitSeconds: 0, runId: "fixture-run-nowait" });
    expect(run.run_id).toBe("fixture-run-nowait");
    expect(["queued", "running", "completed"]).toContain(run.state);
    const ended = await fabric.run(HELLO, { name: "Ken" }, { runId: "fixture-run-nowait" });
    expect(ended).toMatchObject({ run_id: "fixture-run-nowait", state: "completed" });
    await expect(fabric.run(HELLO, { name: "Ken" }, { waitSeconds: 90 })).rejects.toThrow("fabricFixture: waitSeconds must be an integer from 0 to 60, not 90");
  });
});

describe("fabricFixture with mocked upstreams", () => {
  const weather = defineAtomic({
    nodeType: {
      node_type_id: "weather.current",
      version: "1.0.0",
      description: "current temperature of a city",
      input_schema: { type: "object", required: ["city"], properties: { city: { type: "string" } } },
      output_schema: { type: "object", required: ["temperature_c"], properties: { temperature_c: { type: "number" } } },
      constraints: { gates: { side_effect_class: "read" } },
    },
    async handler(inputs: { city: string }, ctx) {
      const res = await ctx.fetch(`https://weather.test/current?q=${encodeURIComponent(inputs.city)}`);
      if (!res.ok) throw new HandlerError("upstream_error", `weather API answered ${res.status}`, { retryable: res.status >= 500 });
      return { temperature_c: ((await res.json()) as { temp: number }).temp };
    },
  });
  const forecast = defineAtomic({
    nodeType: { ...weather.nodeType, node_type_id: "weather.forecast" },
    async handler(inputs: { city: string }, ctx) {
      const res = await ctx.request(`https://weather.test/forecast?q=${encodeURIComponent(inputs.city)}`);
      if (res.statusCode !== 200) throw new HandlerError("upstream_error", `weather API answered ${res.statusCode}`);
      return { temperature_c: ((await res.json()) as { temp: number }).temp };
    },
  });
  const ownClient = defineAtomic({
    nodeType: { ...weather.nodeType, node_type_id: "weather.own-client" },
    async handler(inputs: { city: string }) {
      const res = await request(`https://weather.test/forecast?q=${encodeURIComponent(inputs.city)}`);
      return { temperature_c: ((await res.body.json()) as { temp: number }).temp };
    },
  });

  afterEach(() => {
    nock.cleanAll();
    nock.enableNetConnect();
  });

  it("serves ctx.fetch from nock while the services still talk over loopback, with net connect disabled", async () => {
    const fabric = await fabricFixture({ definitions: [weather] });
    try {
      nock.disableNetConnect();
      const scope = nock("https://weather.test").get("/current").query({ q: "Oslo" }).reply(200, { temp: 3.5 });
      const run = await fabric.run("weather.current@1.0.0", { city: "Oslo" });
      expect(run).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { temperature_c: 3.5 } } });
      expect(scope.isDone()).toBe(true);

      // An upstream 503 is retryable: the coordinator retries it, and the run completes once the upstream recovers.
      nock("https://weather.test").get("/current").query(true).reply(503).get("/current").query(true).reply(200, { temp: 7 });
      const retried = await fabric.run("weather.current@1.0.0", { city: "Bergen" });
      expect(retried).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { temperature_c: 7 } } });
      expect((await fabric.events(retried.run_id)).filter((e) => e.type === "node_run_retrying")).toHaveLength(1);
    } finally {
      await fabric.close();
    }
  }, 60_000);

  it("serves ctx.request and a handler's own undici calls from a MockAgent, restored at close", async () => {
    const before = getGlobalDispatcher();
    const agent = new MockAgent();
    agent.disableNetConnect();
    agent.get("https://weather.test").intercept({ path: "/forecast?q=Oslo" }).reply(200, { temp: 12 }).times(2);
    const fabric = await fabricFixture({ definitions: [forecast, ownClient], mockAgent: agent });
    try {
      expect(getGlobalDispatcher()).toBe(agent);
      expect(await fabric.run("weather.forecast@1.0.0", { city: "Oslo" })).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { temperature_c: 12 } } });
      expect(await fabric.run("weather.own-client@1.0.0", { city: "Oslo" })).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { temperature_c: 12 } } });
      agent.assertNoPendingInterceptors();
    } finally {
      await fabric.close();
      await agent.close();
    }
    expect(getGlobalDispatcher()).toBe(before);
  }, 60_000);
});

describe("fabricFixture's life", () => {
  it("serves installed handler packages beside definitions, and close stops every service and deletes its data", async () => {
    const echoTwice = defineComposite({
      nodeType: {
        node_type_id: "fixture.echo-twice",
        version: "1.0.0",
        description: "calls demo.echo twice",
        input_schema: { type: "object" },
        output_schema: { type: "object" },
      },
      async run(inputs: JsonObject, ctx) {
        const first = await ctx.call({ node_type_id: "demo.echo", version: "1.0.0" }, inputs);
        return ctx.call({ node_type_id: "demo.echo", version: "1.0.0" }, first);
      },
    });
    const fabric = await fabricFixture({ definitions: [echoTwice], handlers: ["@nodefabric/handler-demo"], cwd: repoRoot });
    const gateway = fabric.urls["run-gateway"];
    expect(Object.keys(fabric.urls).sort()).toEqual(["atomic-executor", "composite-executor", "node-registry", "pdp", "run-coordinator", "run-gateway", "selection"]);
    for (const url of Object.values(fabric.urls)) expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(existsSync(fabric.dataDir)).toBe(true);

    const run = await fabric.run("fixture.echo-twice@1.0.0", { hi: 1 });
    expect(run).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { echo: { echo: { hi: 1 } } } } });

    await fabric.close();
    expect(existsSync(fabric.dataDir)).toBe(false);
    await expect(request(`${gateway}/v1/health`)).rejects.toMatchObject({ code: "ECONNREFUSED" });
  }, 60_000);

  it("refuses to start with nothing to serve, and names a definition that clashes with a package's", async () => {
    await expect(fabricFixture({})).rejects.toThrow("fabricFixture: pass the node types to serve: definitions, handlers or discover");
    const clash = defineAtomic({
      nodeType: { node_type_id: "demo.echo", version: "1.0.0", description: "another echo", input_schema: { type: "object" }, output_schema: { type: "object" } },
      handler: (inputs: JsonObject) => inputs,
    });
    await expect(fabricFixture({ definitions: [clash], handlers: ["@nodefabric/handler-demo"], cwd: repoRoot })).rejects.toThrow(/node type demo\.echo@1\.0\.0 is defined twice/);
  }, 60_000);
});
