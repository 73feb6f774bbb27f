/**
 * The form of a block of failure codes (docs/errors.md, "Your own codes"): what defineFailureCodes accepts and refuses,
 * and the HandlerErrors failWith makes.
 */
import { describe, expect, it } from "vitest";
import { defineFailureCodes, failWith, HandlerError, isFailureCatalogue, RETIRED_FAILURE_CODES, SDK_FAILURE_CODES } from "@nodefabric/sdk";

describe("defineFailureCodes", () => {
  it("returns the block, frozen and recognisable", () => {
    const block = defineFailureCodes({ city_unknown: { meaning: "No such city.", retryable: false, raisedBy: "weather.current" } });
    expect(block.city_unknown).toEqual({ meaning: "No such city.", retryable: false, raisedBy: "weather.current" });
    expect(Object.isFrozen(block)).toBe(true);
    expect(isFailureCatalogue(block)).toBe(true);
    expect(isFailureCatalogue({ city_unknown: block.city_unknown })).toBe(false);
    expect(isFailureCatalogue(SDK_FAILURE_CODES)).toBe(true);
  });

  it("refuses a code that is not snake_case, and a code without meaning, retryability or raiser", () => {
    const spec = { meaning: "m", retryable: true, raisedBy: "r" } as const;
    expect(() => defineFailureCodes({ "City-Unknown": spec })).toThrow(/"City-Unknown" is not a snake_case code/);
    expect(() => defineFailureCodes({ x: { ...spec, meaning: " " } })).toThrow(/"x" needs a meaning/);
    expect(() => defineFailureCodes({ x: { ...spec, retryable: "sometimes" as never } })).toThrow(/retryable must be true, false or "depends"/);
    expect(() => defineFailureCodes({ x: { meaning: "m", retryable: false } as never })).toThrow(/"x" needs raisedBy/);
    expect(() => defineFailureCodes({ x: { ...spec, reserved: "" } })).toThrow(/reserved must say why/);
  });

  it("the SDK's block has the runtime's codes, and the former spelling names its replacement", () => {
    expect(Object.keys(SDK_FAILURE_CODES)).toEqual(expect.arrayContaining(["invalid_inputs", "invalid_outputs", "handler_error", "timeout", "canceled", "upstream_unavailable"]));
    expect(SDK_FAILURE_CODES.timeout.retryable).toBe(true);
    expect(RETIRED_FAILURE_CODES.configuration_error!.now).toBe("invalid_configuration");
    expect(SDK_FAILURE_CODES).not.toHaveProperty("configuration_error");
  });
});

describe("failWith", () => {
  it("makes the HandlerError of a code, as new HandlerError does", () => {
    const fail = failWith(defineFailureCodes({ city_unknown: { meaning: "No such city.", retryable: false, raisedBy: "weather.current" } }));
    const cause = new Error("404");
    const err = fail("city_unknown", "no city named Atlantis", { retryable: false, details: { city: "Atlantis" }, cause });
    expect(HandlerError.is(err)).toBe(true);
    expect(err).toMatchObject({ name: "HandlerError", code: "city_unknown", message: "no city named Atlantis", retryable: false, details: { city: "Atlantis" } });
    expect(err.cause).toBe(cause);
    expect(fail("upstream_error", "503")).toMatchObject({ code: "upstream_error" });
  });
});
