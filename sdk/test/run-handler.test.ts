import { describe, it, expect, afterEach } from "vitest";
import { createServer, type AddressInfo } from "node:net";
import nock from "nock";
import { validatorFor } from "@nodefabric/schemas";
import { defineAtomic, HandlerError } from "@nodefabric/sdk";
import { DefinitionError, runHandler } from "@nodefabric/sdk/testing";

// runHandler of @nodefabric/sdk/testing: the handler runs through the executor's own runtime code, with nothing of
// the fabric loaded. Only the upstream is mocked (nock, for ctx.fetch); everything else is real.
const isResult = validatorFor("atomic_execute_result");

const nodeType = (node_type_id: string, extensions?: Record<string, unknown>) => ({
  node_type_id,
  version: "1.0.0",
  description: "current temperature of a city",
  input_schema: { type: "object", required: ["city"], properties: { city: { type: "string", minLength: 1 } }, additionalProperties: false },
  output_schema: { type: "object", required: ["temperature_c"], properties: { temperature_c: { type: "number" } }, additionalProperties: false },
  constraints: { gates: { side_effect_class: "read" as const } },
  ...(extensions ? { extensions } : {}),
});

/** Reads the temperature from the upstream at `base`, as a handler author writes it. */
const weather = (base: string, id = "sdk.weather") =>
  defineAtomic({
    nodeType: nodeType(id),
    async handler(inputs: { city: string }, ctx) {
      const res = await ctx.fetch(`${base}/current?q=${encodeURIComponent(inputs.city)}`);
      if (!res.ok) throw new HandlerError("upstream_error", `weather API answered ${res.status}`, { retryable: res.status >= 500, details: { status: res.status } });
      return { temperature_c: ((await res.json()) as { temp: unknown }).temp };
    },
  });

/** A handler that waits for its signal, and says when it started. */
function waiting(id: string, extensions?: Record<string, unknown>) {
  let started!: () => void;
  const startedP = new Promise<void>((resolve) => (started = resolve));
  let sawAbort: unknown;
  const definition = defineAtomic({
    nodeType: nodeType(id, extensions),
    handler: (_inputs, ctx) =>
      new Promise((_resolve, reject) => {
        ctx.signal.addEventListener("abort", () => {
          sawAbort = ctx.signal.reason;
          reject(ctx.signal.reason);
        });
        started();
      }),
  });
  return { definition, started: startedP, sawAbort: () => sawAbort };
}

/** A loopback port nothing listens on: taken, then given back. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

afterEach(() => {
  nock.cleanAll();
  nock.enableNetConnect();
});

describe("runHandler of @nodefabric/sdk/testing", () => {
  it("completes with the outputs the handler made from its upstream's answer", async () => {
    nock.disableNetConnect();
    const scope = nock("https://weather.test", { reqheaders: { "user-agent": /^nodefabric\/\d+\.\d+\.\d+/ } }).get("/current").query({ q: "Tromsø" }).reply(200, { temp: -3 });

    const result = await runHandler(weather("https://weather.test"), { city: "Tromsø" }, { attempt: 2 });
    expect(isResult(result)).toBe(true);
    expect(result).toMatchObject({ state: "completed", outputs: { temperature_c: -3 }, extensions: { "nodefabric.attempt": 2 } });
    expect(result.error).toBeUndefined();
    expect(scope.isDone()).toBe(true);
  });

  it("fails invalid_inputs without calling the handler when the inputs break the input_schema", async () => {
    let called = false;
    const definition = defineAtomic({
      nodeType: nodeType("sdk.never-called"),
      handler: () => {
        called = true;
        return { temperature_c: 1 };
      },
    });
    const result = await runHandler(definition, { city: "", extra: true });
    expect(isResult(result)).toBe(true);
    expect(result.state).toBe("failed");
    expect(result.error).toMatchObject({ code: "invalid_inputs", message: "the inputs do not match the input_schema of sdk.never-called@1.0.0", retryable: false });
    expect(result.error?.details?.errors).toEqual(
      expect.arrayContaining([
        { path: "/city", message: "must NOT have fewer than 1 characters" },
        { path: "/extra", message: "is not a known field" },
      ]),
    );
    expect(called).toBe(false);
  });

  it("fails invalid_outputs when what the handler returns breaks the output_schema", async () => {
    nock.disableNetConnect();
    nock("https://weather.test").get("/current").query(true).reply(200, { temp: "warm" });
    const result = await runHandler(weather("https://weather.test"), { city: "Oslo" });
    expect(result.state).toBe("failed");
    expect(result.error).toMatchObject({ code: "invalid_outputs", message: "the outputs of sdk.weather@1.0.0 do not match its output_schema", retryable: false });
    expect(result.error?.details?.errors).toEqual([{ path: "/temperature_c", message: "must be number" }]);
  });

  it("fails timeout (retryable) when the handler outlives timeoutMs, and fires its signal as a TimeoutError", async () => {
    const { definition, sawAbort } = waiting("sdk.slow");
    const before = Date.now();
    const result = await runHandler(definition, { city: "Oslo" }, { timeoutMs: 80 });
    expect(Date.now() - before).toBeLessThan(5_000);
    expect(result.state).toBe("failed");
    expect(result.error).toEqual({ code: "timeout", message: "sdk.slow@1.0.0 did not finish within 80 ms", retryable: true });
    expect((sawAbort() as DOMException).name).toBe("TimeoutError");
  });

  it("takes the node type's nodefabric.timeout_ms when no timeoutMs is given", async () => {
    const { definition } = waiting("sdk.slow-type", { "nodefabric.timeout_ms": 60 });
    const result = await runHandler(definition, { city: "Oslo" });
    expect(result.error).toMatchObject({ code: "timeout", message: "sdk.slow-type@1.0.0 did not finish within 60 ms" });
  });

  it("ends canceled when the signal is aborted while the handler runs, and aborts the handler's signal", async () => {
    const { definition, started, sawAbort } = waiting("sdk.cancel-me");
    const controller = new AbortController();
    const running = runHandler(definition, { city: "Oslo" }, { signal: controller.signal });
    await started;
    controller.abort();
    const result = await running;
    expect(isResult(result)).toBe(true);
    expect(result.state).toBe("canceled");
    expect(result.error).toEqual({ code: "canceled", message: "the node run was canceled" });
    expect((sawAbort() as DOMException).name).toBe("AbortError");
  });

  it("ends canceled at once, without calling the handler, when the signal was aborted before the run", async () => {
    let called = false;
    const definition = defineAtomic({ nodeType: nodeType("sdk.pre-canceled"), handler: () => ((called = true), { temperature_c: 1 }) });
    const result = await runHandler(definition, { city: "Oslo" }, { signal: AbortSignal.abort() });
    expect(result.state).toBe("canceled");
    expect(called).toBe(false);
  });

  it("maps a HandlerError to the result's error: code, message, retryable and details", async () => {
    nock.disableNetConnect();
    nock("https://weather.test").get("/current").query(true).reply(503, "busy");
    const result = await runHandler(weather("https://weather.test"), { city: "Oslo" });
    expect(isResult(result)).toBe(true);
    expect(result.state).toBe("failed");
    expect(result.error).toEqual({ code: "upstream_error", message: "weather API answered 503", retryable: true, details: { status: 503 } });
  });

  it("maps any other thrown error to handler_error, with only its message", async () => {
    const definition = defineAtomic({
      nodeType: nodeType("sdk.throws"),
      handler: () => {
        throw new RangeError("the city is off the map");
      },
    });
    const result = await runHandler(definition, { city: "Atlantis" });
    expect(result.error).toEqual({ code: "handler_error", message: "the city is off the map" });
  });

  it("fails upstream_unavailable (retryable) naming host and port when the upstream refuses the connection", async () => {
    const port = await closedPort();
    const result = await runHandler(weather(`http://127.0.0.1:${port}`), { city: "Oslo" });
    expect(isResult(result)).toBe(true);
    expect(result.state).toBe("failed");
    expect(result.error).toMatchObject({
      code: "upstream_unavailable",
      retryable: true,
      details: { host: "127.0.0.1", port, code: "ECONNREFUSED" },
    });
    expect(result.error?.message).toContain(`127.0.0.1:${port}`);
  });

  it("refuses a definition that cannot run, naming the node type and the problem", async () => {
    const broken = defineAtomic({
      nodeType: { ...nodeType("sdk.broken"), input_schema: { type: "object", properties: { n: { type: "nonsense" } } } },
      handler: () => ({ temperature_c: 1 }),
    });
    const run = runHandler(broken, { n: 1 });
    await expect(run).rejects.toBeInstanceOf(DefinitionError);
    await expect(runHandler(broken, { n: 1 })).rejects.toThrow(/^node type sdk\.broken@1\.0\.0: its input_schema does not compile: schema is invalid/);
    await expect(runHandler({ nodeType: nodeType("sdk.plain") } as never, { city: "Oslo" })).rejects.toThrow(/expected an atomic definition made by defineAtomic/);
  });

  it("refuses inputs and options no request could carry, with a clear error", async () => {
    const definition = weather("https://weather.test");
    await expect(runHandler(definition, [] as never)).rejects.toThrow("runHandler: inputs must be a JSON object, not an array");
    await expect(runHandler(definition, { city: "Oslo" }, { attempt: 0 })).rejects.toThrow("runHandler: attempt must be an integer >= 1, not 0");
    await expect(runHandler(definition, { city: "Oslo" }, { timeoutMs: -1 })).rejects.toThrow("runHandler: timeoutMs must be a number of milliseconds >= 0, not -1");
  });
});
