import nock from "nock";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { runHandler } from "@nodefabric/sdk/testing";
import { BASE_URL_SETTING, currentWeather } from "../src/index.js";

// The upstream is someone else's: nock answers for it, and any other outbound request fails the test.
beforeAll(() => {
  nock.disableNetConnect();
  // The tests below expect the default base URL unless they set one themselves.
  delete process.env[BASE_URL_SETTING];
});
afterEach(() => nock.cleanAll());
afterAll(() => nock.enableNetConnect());

const upstream = () => nock("https://weather.example.com");

describe("{{nodeTypePrefix}}.current-weather", () => {
  it("answers the temperature the upstream reports", async () => {
    const scope = upstream().get("/v1/current").query({ city: "Oslo" }).reply(200, { temp_c: 4.5, observed_at: "2025-01-15T09:00:00Z" });

    const result = await runHandler(currentWeather, { city: "Oslo" });

    expect(result.state).toBe("completed");
    expect(result.outputs).toEqual({ city: "Oslo", temperature_c: 4.5, observed_at: "2025-01-15T09:00:00Z" });
    scope.done();
  });

  it("fails with a retryable upstream_error when the upstream is overloaded", async () => {
    upstream().get("/v1/current").query(true).reply(503, "try later");

    const result = await runHandler(currentWeather, { city: "Oslo" });

    expect(result.state).toBe("failed");
    expect(result.error).toMatchObject({ code: "upstream_error", retryable: true, details: { status: 503 } });
  });

  it("fails with a retryable upstream_error when rate limited, and a final one when refused", async () => {
    upstream().get("/v1/current").query(true).reply(429);
    expect((await runHandler(currentWeather, { city: "Oslo" })).error).toMatchObject({ code: "upstream_error", retryable: true });

    upstream().get("/v1/current").query(true).reply(404, { message: "unknown city" });
    expect((await runHandler(currentWeather, { city: "Atlantis" })).error).toMatchObject({ code: "upstream_error", retryable: false });
  });

  it("refuses inputs its input_schema does not allow, without calling the upstream", async () => {
    const result = await runHandler(currentWeather, { town: "Oslo" });

    expect(result.state).toBe("failed");
    expect(result.error?.code).toBe("invalid_inputs");
  });

  it("calls the base URL the executor is configured with", async () => {
    const scope = nock("http://weather.internal:8080").get("/current").query({ city: "Lisbon" }).reply(200, { temp_c: 18, observed_at: "2025-01-15T09:00:00Z" });

    const result = await runHandler(currentWeather, { city: "Lisbon" }, { secrets: { [BASE_URL_SETTING]: "http://weather.internal:8080" } });

    expect(result.outputs).toMatchObject({ temperature_c: 18 });
    scope.done();
  });
});
