import { describe, it, expect, afterEach } from "vitest";
import nock from "nock";
import { getGlobalDispatcher, MockAgent, request as undiciRequest } from "undici";
import { validatorFor } from "@nodefabric/schemas";
import { defineAtomic, HandlerError } from "@nodefabric/core/sdk";
import { runHandler } from "@nodefabric/core/testing";

// runHandler with the handler's upstream served by mocks: an undici MockAgent (for `ctx.request` and for handlers
// that import undici themselves) or nock (for `ctx.fetch`). Only the upstream is mocked; the executor is real.
const isResult = validatorFor("atomic_execute_result");

const weatherType = (node_type_id: string) => ({
  node_type_id,
  version: "1.0.0",
  description: "current temperature of a city",
  input_schema: { type: "object", required: ["city"], properties: { city: { type: "string", minLength: 1 } }, additionalProperties: false },
  output_schema: { type: "object", required: ["temperature_c"], properties: { temperature_c: { type: "number" } }, additionalProperties: false },
  constraints: { gates: { side_effect_class: "read" as const } },
});

/** Fails with upstream_error for a non-2xx, retryable for 5xx, as the README's example handler does. */
function upstreamStatus(status: number): void {
  if (status < 200 || status >= 300) throw new HandlerError("upstream_error", `weather API answered ${status}`, { retryable: status >= 500 });
}

const viaRequest = defineAtomic({
  nodeType: weatherType("weather.via-request"),
  async handler(inputs: { city: string }, ctx) {
    const res = await ctx.request(`https://weather.test/current?q=${encodeURIComponent(inputs.city)}`, { headers: { "x-api-key": ctx.secrets.get("WEATHER_KEY") ?? "" } });
    upstreamStatus(res.statusCode);
    return { temperature_c: ((await res.json()) as { temp: number }).temp };
  },
});

const viaUndici = defineAtomic({
  nodeType: weatherType("weather.via-undici"),
  async handler(inputs: { city: string }, ctx) {
    // What a handler does when it brings its own HTTP client: undici's global dispatcher decides where this goes.
    const res = await undiciRequest(`https://weather.test/current?q=${encodeURIComponent(inputs.city)}`, { signal: ctx.signal });
    upstreamStatus(res.statusCode);
    return { temperature_c: ((await res.body.json()) as { temp: number }).temp };
  },
});

const viaFetch = defineAtomic({
  nodeType: weatherType("weather.via-fetch"),
  async handler(inputs: { city: string }, ctx) {
    let res: Response;
    try {
      res = await ctx.fetch(`https://weather.test/current?q=${encodeURIComponent(inputs.city)}`);
    } catch (err) {
      throw new HandlerError("upstream_unreachable", `weather API cannot be reached: ${(err as Error).message}`, { retryable: true, cause: err });
    }
    upstreamStatus(res.status);
    return { temperature_c: ((await res.json()) as { temp: number }).temp };
  },
});

describe("runHandler with an undici MockAgent", () => {
  const agents: MockAgent[] = [];
  function mockAgent(): MockAgent {
    const agent = new MockAgent();
    agent.disableNetConnect();
    agents.push(agent);
    return agent;
  }
  afterEach(async () => {
    for (const a of agents.splice(0)) await a.close();
  });

  it("serves ctx.request from the MockAgent, with the handler's own headers", async () => {
    const agent = mockAgent();
    agent
      .get("https://weather.test")
      .intercept({ path: "/current?q=Oslo", method: "GET", headers: { "x-api-key": "k-123" } })
      .reply(200, { temp: 4.5 }, { headers: { "content-type": "application/json" } });

    const result = await runHandler(viaRequest, { city: "Oslo" }, { mockAgent: agent, secrets: { WEATHER_KEY: "k-123" } });
    expect(isResult(result)).toBe(true);
    expect(result).toMatchObject({ state: "completed", outputs: { temperature_c: 4.5 } });
    agent.assertNoPendingInterceptors();
  });

  it("turns an upstream 503 into the handler's retryable upstream_error", async () => {
    const agent = mockAgent();
    agent.get("https://weather.test").intercept({ path: "/current?q=Oslo" }).reply(503, "busy");
    const result = await runHandler(viaRequest, { city: "Oslo" }, { mockAgent: agent });
    expect(result).toMatchObject({ state: "failed", error: { code: "upstream_error", message: "weather API answered 503", retryable: true } });
  });

  it("serves a handler that imports undici itself, and puts the previous global dispatcher back afterwards", async () => {
    const before = getGlobalDispatcher();
    const agent = mockAgent();
    agent.get("https://weather.test").intercept({ path: "/current?q=Bergen" }).reply(200, { temp: 9 });

    const result = await runHandler(viaUndici, { city: "Bergen" }, { mockAgent: agent });
    expect(result).toMatchObject({ state: "completed", outputs: { temperature_c: 9 } });
    expect(getGlobalDispatcher()).toBe(before);
    agent.assertNoPendingInterceptors();
  });

  it("serves ctx.fetch from the MockAgent too, since Node's fetch uses undici's global dispatcher", async () => {
    const agent = mockAgent();
    agent.get("https://weather.test").intercept({ path: "/current?q=Troms%C3%B8" }).reply(200, { temp: -3 });
    const result = await runHandler(viaFetch, { city: "Tromsø" }, { mockAgent: agent });
    expect(result).toMatchObject({ state: "completed", outputs: { temperature_c: -3 } });
    agent.assertNoPendingInterceptors();
  });

  it("restores the global dispatcher when the handler fails, too", async () => {
    const before = getGlobalDispatcher();
    const agent = mockAgent();
    // No interceptor: the MockAgent refuses the request, the handler's undici call rejects, the run fails.
    const result = await runHandler(viaUndici, { city: "Nowhere" }, { mockAgent: agent });
    expect(result.state).toBe("failed");
    expect(result.error?.code).toBe("handler_error");
    expect(result.error?.message).toMatch(/Mock dispatch not matched/);
    expect(getGlobalDispatcher()).toBe(before);
  });

  it("refuses to run with a second MockAgent while another run holds the first", async () => {
    const first = mockAgent();
    const second = mockAgent();
    let release!: () => void;
    let started!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const handlerStarted = new Promise<void>((resolve) => (started = resolve));
    const waiting = defineAtomic({
      nodeType: { ...weatherType("weather.waiting"), input_schema: { type: "object" }, output_schema: { type: "object" } },
      async handler() {
        started();
        await gate;
        return {};
      },
    });
    const running = runHandler(waiting, {}, { mockAgent: first });
    await handlerStarted;
    await expect(runHandler(waiting, {}, { mockAgent: second })).rejects.toThrow(/another MockAgent is already undici's global dispatcher/);
    release();
    expect((await running).state).toBe("completed");
  });
});

describe("runHandler with nock", () => {
  afterEach(() => {
    nock.cleanAll();
    nock.enableNetConnect();
  });

  it("serves ctx.fetch from a nock interceptor", async () => {
    nock.disableNetConnect();
    const scope = nock("https://weather.test").get("/current").query({ q: "Tromsø" }).reply(200, { temp: -3 });

    const result = await runHandler(viaFetch, { city: "Tromsø" });
    expect(isResult(result)).toBe(true);
    expect(result).toMatchObject({ state: "completed", outputs: { temperature_c: -3 } });
    expect(scope.isDone()).toBe(true);
  });

  it("sends NodeFabric's user agent upstream", async () => {
    nock.disableNetConnect();
    const scope = nock("https://weather.test", { reqheaders: { "user-agent": /^nodefabric\// } }).get("/current").query(true).reply(200, { temp: 1 });
    const result = await runHandler(viaFetch, { city: "Oslo" });
    expect(result.state).toBe("completed");
    expect(scope.isDone()).toBe(true);
  });

  it("gives the handler an error for a host nothing mocks, which it turns into a failed result", async () => {
    nock.disableNetConnect();
    nock("https://other.test").get("/").reply(200, {});

    const result = await runHandler(viaFetch, { city: "Oslo" });
    expect(isResult(result)).toBe(true);
    expect(result.state).toBe("failed");
    expect(result.error).toMatchObject({ code: "upstream_unreachable", retryable: true });
    // nock refused it (rather than DNS, say): the handler never left the test's process.
    expect(result.error?.message).toBe('weather API cannot be reached: Nock: Disallowed net connect for "weather.test:443/current?q=Oslo"');
  });

  it("still validates what the mocked upstream led the handler to return", async () => {
    nock.disableNetConnect();
    nock("https://weather.test").get("/current").query(true).reply(200, { temp: "warm" });
    const result = await runHandler(viaFetch, { city: "Oslo" });
    expect(result.state).toBe("failed");
    expect(result.error).toMatchObject({ code: "invalid_outputs", message: "the outputs of weather.via-fetch@1.0.0 do not match its output_schema" });
  });
});
