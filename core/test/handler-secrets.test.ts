import { describe, it, expect } from "vitest";
import { secretsFromEnv } from "@nodefabric/sdk/runtime";

describe("handler secrets from the environment", () => {
  it("takes FABRIC_SECRET_<NAME> as the secret NAME, and nothing else", () => {
    expect(secretsFromEnv({ FABRIC_SECRET_WEATHER_API_KEY: "k1", FABRIC_SECRET_: "ignored", FABRIC_HOST: "127.0.0.1", WEATHER_API_KEY: "not-this", FABRIC_SECRET_EMPTY: "" })).toEqual({
      WEATHER_API_KEY: "k1",
      EMPTY: "",
    });
  });
});
