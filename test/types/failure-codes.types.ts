/**
 * Compile-time checks of the failure-code blocks (docs/errors.md): first-party code makes its errors through a block
 * (`failWith`, core's `errorBody`), so a code in no block does not compile. `tsc -p tsconfig.check.json` checks this
 * file: each line under `@ts-expect-error` must fail to compile, or the directive itself is an error.
 */
import { defineFailureCodes, failWith, HandlerError, SDK_FAILURE_CODES, type CodeOf, type SdkFailureCode } from "@nodefabric/sdk";
import { errorBody } from "../../core/src/engine/engine-types.js";
import { fail as coreFail, type FailureCode } from "../../core/src/http/failure-codes.js";
import { fail as httpFail } from "../../handlers/http/src/failure-codes.js";
import { fail as mcpFail } from "../../handlers/mcp/src/failure-codes.js";
import { fail as llmFail } from "../../handlers/llm/src/failure-codes.js";

export function firstParty(): unknown[] {
  return [
    // A package's own codes, and the SDK's, compile.
    httpFail("mapping_error", "m"),
    httpFail("upstream_error", "m", { retryable: true }),
    mcpFail("tool_error", "m"),
    llmFail("llm_refusal", "m"),
    coreFail("pdp_unavailable", "m"),
    errorBody("policy_denied", "m"),
    errorBody("timeout", "m"),
    // @ts-expect-error a misspelt code is in no block
    httpFail("upstream_eror", "m"),
    // @ts-expect-error another package's code is not in http.request's block
    httpFail("tool_error", "m"),
    // @ts-expect-error the old spelling is in no block: invalid_configuration is the one spelling
    llmFail("configuration_error", "m"),
    // @ts-expect-error the engine's errors take a code of core's or the SDK's block only
    errorBody("no_such_failure", "m"),
    // @ts-expect-error a handler's code is not the engine's
    errorBody("llm_refusal", "m"),
    // @ts-expect-error core's helper is bound to core's block
    coreFail("mapping_error", "m"),
  ];
}

export function thirdParty(): unknown[] {
  // A handler author's own block: its codes and the SDK's compile, nothing else does.
  const WEATHER = defineFailureCodes({
    city_unknown: { meaning: "The weather API knows no such city.", retryable: false, raisedBy: "weather.current" },
  });
  const fail = failWith(WEATHER);
  const code: CodeOf<typeof WEATHER> = "city_unknown";
  const made: HandlerError<"city_unknown" | SdkFailureCode> = fail(code, "m");
  return [
    made,
    fail("upstream_error", "m"),
    // @ts-expect-error not in the author's block nor the SDK's
    fail("town_unknown", "m"),
    // Code written before the blocks keeps compiling: HandlerError alone takes any string.
    new HandlerError("my_own_code", "m", { retryable: false }),
    // An author may check against the SDK's block alone.
    new HandlerError<SdkFailureCode>("upstream_error", "m"),
    // @ts-expect-error not a code of the SDK's block
    new HandlerError<SdkFailureCode>("upstream_eror", "m"),
    // @ts-expect-error retryable is true, false or "depends"
    defineFailureCodes({ x: { meaning: "m", retryable: "sometimes", raisedBy: "r" } }),
    // @ts-expect-error every code says who raises it
    defineFailureCodes({ x: { meaning: "m", retryable: true } }),
    SDK_FAILURE_CODES.timeout.retryable satisfies boolean | "depends",
  ];
}

// Core's FailureCode is the union of core's block and the SDK's.
export const known: FailureCode[] = ["policy_denied", "upstream_error"];
// @ts-expect-error and nothing else
export const unknown: FailureCode[] = ["mapping_error"];
