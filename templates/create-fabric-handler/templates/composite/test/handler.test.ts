import nock from "nock";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ChildFailedError, type CompositeContext, type JsonObject, type NodeTypeRef } from "@nodefabric/sdk";
import { runHandler } from "@nodefabric/sdk/testing";
import { BASE_URL_SETTING, currentWeather, warmestCity } from "../src/index.js";

// The upstream is someone else's: nock answers for it, and any other outbound request fails the test.
beforeAll(() => {
  nock.disableNetConnect();
  // The tests below expect the default base URL.
  delete process.env[BASE_URL_SETTING];
});
afterEach(() => nock.cleanAll());
afterAll(() => nock.enableNetConnect());

const upstream = () => nock("https://weather.example.com");

describe("{{nodeTypePrefix}}.current-weather (atomic)", () => {
  it("answers the temperature the upstream reports", async () => {
    const scope = upstream().get("/v1/current").query({ city: "Oslo" }).reply(200, { temp_c: 4.5, observed_at: "2025-01-15T09:00:00Z" });

    const result = await runHandler(currentWeather, { city: "Oslo" });

    expect(result.state).toBe("completed");
    expect(result.outputs).toEqual({ city: "Oslo", temperature_c: 4.5, observed_at: "2025-01-15T09:00:00Z" });
    scope.done();
  });

  it("fails with a retryable upstream_error on a 5xx or a 429, and a final one otherwise", async () => {
    upstream().get("/v1/current").query(true).reply(503);
    expect((await runHandler(currentWeather, { city: "Oslo" })).error).toMatchObject({ code: "upstream_error", retryable: true, details: { status: 503 } });

    upstream().get("/v1/current").query(true).reply(404);
    expect((await runHandler(currentWeather, { city: "Atlantis" })).error).toMatchObject({ code: "upstream_error", retryable: false });
  });
});

/**
 * A stand-in for the composite's context: `call` runs the atomic child through `runHandler` (the executor's own runtime) and
 * rejects with a ChildFailedError when it fails, as the fabric does. It covers the composite's own logic; whole-tree
 * behaviour (coordinator, policies, retries, events) is the fabric's, and is not exercised here.
 */
function contextRunningChildrenLocally(): CompositeContext {
  let children = 0;
  const call = async (ref: NodeTypeRef, inputs: JsonObject): Promise<JsonObject> => {
    if (ref.node_type_id !== currentWeather.nodeType.node_type_id || ref.version !== currentWeather.nodeType.version) {
      throw new Error(`this test only runs ${currentWeather.nodeType.node_type_id}, not ${ref.node_type_id}@${ref.version}`);
    }
    const node_run_id = `child-${++children}`;
    const result = await runHandler(currentWeather, inputs);
    if (result.state === "completed") return result.outputs as JsonObject;
    throw new ChildFailedError({ node_run_id, node_type_ref: ref, error: result.error!, state: result.state === "canceled" ? "canceled" : "failed" });
  };
  const unused = (name: string) => () => {
    throw new Error(`ctx.${name} is not used by ${warmestCity.nodeType.node_type_id}`);
  };
  const quiet = () => undefined;
  return {
    run_id: "run-test",
    node_run_id: "composite-test",
    node_type_ref: { node_type_id: warmestCity.nodeType.node_type_id, version: warmestCity.nodeType.version },
    signal: new AbortController().signal,
    log: { debug: quiet, info: quiet, warn: quiet, error: quiet },
    call,
    spawn: unused("spawn"),
    select: unused("select"),
    evaluate: unused("evaluate"),
  };
}

describe("{{nodeTypePrefix}}.warmest-city (composite)", () => {
  it("is declared as a read-only composite that takes a list of cities", () => {
    expect(warmestCity.kind).toBe("composite");
    expect(warmestCity.nodeType).toMatchObject({
      node_type_id: "{{nodeTypePrefix}}.warmest-city",
      version: "1.0.0",
      kind: "composite",
      input_schema: { required: ["cities"] },
      constraints: { gates: { side_effect_class: "read" } },
    });
  });

  it("answers the warmest city, from one child per city", async () => {
    upstream().get("/v1/current").query({ city: "Oslo" }).reply(200, { temp_c: 4.5, observed_at: "2025-01-15T09:00:00Z" });
    upstream().get("/v1/current").query({ city: "Lisbon" }).reply(200, { temp_c: 17, observed_at: "2025-01-15T09:00:00Z" });

    const outputs = await warmestCity.run({ cities: ["Oslo", "Lisbon"] }, contextRunningChildrenLocally());

    expect(outputs).toEqual({
      city: "Lisbon",
      temperature_c: 17,
      readings: [
        { city: "Oslo", temperature_c: 4.5 },
        { city: "Lisbon", temperature_c: 17 },
      ],
      unavailable: [],
    });
  });

  it("leaves out a city whose child failed, and fails when every child did", async () => {
    upstream().get("/v1/current").query({ city: "Oslo" }).reply(200, { temp_c: 4.5, observed_at: "2025-01-15T09:00:00Z" });
    upstream().get("/v1/current").query({ city: "Atlantis" }).reply(404);
    const partial = await warmestCity.run({ cities: ["Oslo", "Atlantis"] }, contextRunningChildrenLocally());
    expect(partial).toMatchObject({ city: "Oslo", unavailable: ["Atlantis"] });

    upstream().get("/v1/current").query({ city: "Atlantis" }).reply(503);
    await expect(warmestCity.run({ cities: ["Atlantis"] }, contextRunningChildrenLocally())).rejects.toMatchObject({
      code: "child_failed",
      error: { code: "upstream_error", retryable: true },
    });
  });
});
