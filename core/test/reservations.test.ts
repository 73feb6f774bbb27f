/**
 * What a model call reserves from its run (reservations.ts), computed by the coordinator from the call's inputs and
 * the node type's declaration, never from what a handler says: the prompt at 4 characters a token plus the output
 * limit, the cost at the model's price (the dearest when the inputs name no model), and the refusal that names what
 * the run has left and what the call asked.
 */
import { describe, expect, it } from "vitest";
import type { NodeType } from "@nodefabric/schemas";
import { modelCallOf, refusal, reservationFor, tokensReported } from "../src/engine/reservations.js";

const DECLARED = { prompt_inputs: ["messages", "tools"], max_output_input: "max_output_tokens", default_max_output_tokens: 100, model_input: "model", usage_output: "usage" };
const chatType = (ext: Record<string, unknown> | undefined, kind: "atomic" | "composite" = "atomic") =>
  ({ node_type_id: "x.chat", version: "1.0.0", kind, extensions: ext }) as unknown as NodeType;
const PRICES = { "gpt-a": { input_per_million: 1_000_000, output_per_million: 2_000_000 }, "gpt-b": { input_per_million: 3_000_000, output_per_million: 1_000_000 } };

describe("model-call reservations", () => {
  it("only an atomic node type with a valid declaration is a model call", () => {
    expect(modelCallOf(chatType({ "nodefabric.model_call": DECLARED }))).toMatchObject({ max_output_input: "max_output_tokens", default_max_output_tokens: 100 });
    expect(modelCallOf(chatType({ "nodefabric.model_call": DECLARED }, "composite"))).toBeUndefined();
    expect(modelCallOf(chatType(undefined))).toBeUndefined();
    expect(modelCallOf(chatType({ "nodefabric.model_call": { prompt_inputs: "messages" } }))).toBeUndefined();
  });

  it("reserves the prompt's JSON at 4 characters a token plus the output limit, priced at the named model or the dearest", () => {
    const spec = modelCallOf(chatType({ "nodefabric.model_call": DECLARED }))!;
    const messages = [{ role: "user", content: "abcdefgh" }];
    const prompt = Math.ceil(JSON.stringify(messages).length / 4);
    expect(reservationFor(spec, { messages, max_output_tokens: 7 }, undefined)).toEqual({ tokens: prompt + 7, prompt, output: 7, cost: 0 });
    // No output limit in the inputs: the declared default.
    expect(reservationFor(spec, { messages }, undefined).output).toBe(100);
    // A named model takes its price (a dated name its prefix's); none named takes the dearest of each side.
    expect(reservationFor(spec, { messages, max_output_tokens: 7, model: "gpt-a-2025" }, PRICES).cost).toBeCloseTo(prompt * 1 + 7 * 2, 9);
    expect(reservationFor(spec, { messages, max_output_tokens: 7 }, PRICES).cost).toBeCloseTo(prompt * 3 + 7 * 2, 9);
    // A model with no price costs nothing, as the handler counts it.
    expect(reservationFor(spec, { messages, max_output_tokens: 7, model: "other" }, PRICES).cost).toBe(0);
  });

  it("refuses a call that does not fit what is left after what was used and what calls in flight hold, naming both", () => {
    const want = { tokens: 50, cost: 0.5, prompt: 10, output: 40 };
    const standing = { tokens: 30, reserved_tokens: 40, cost: 0.2, reserved_cost: 0.1 };
    expect(refusal(want, { max_tokens: 120 }, standing, "llm.chat")).toBeUndefined();
    expect(refusal(want, { max_tokens: 119 }, standing, "llm.chat")).toMatchObject({
      code: "budget_exhausted",
      retryable: false,
      details: { budget: "nodefabric.llm.max_tokens", limit: 119, used: 30, reserved: 40, remaining: 49, asked: 50 },
    });
    const byCost = refusal(want, { max_cost: 0.7 }, standing, "llm.chat")!;
    expect(byCost).toMatchObject({ code: "budget_exhausted", details: { budget: "max_cost", limit: 0.7, asked: 0.5 } });
    expect(byCost.details!.remaining).toBeCloseTo(0.4, 9);
    expect(byCost.message).toContain("it was not sent");
  });

  it("reads the tokens an answer reports from its outputs, or from a failure's details", () => {
    const spec = modelCallOf(chatType({ "nodefabric.model_call": DECLARED }))!;
    expect(tokensReported(spec, { usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } }, undefined)).toBe(7);
    expect(tokensReported(spec, undefined, { code: "llm_invalid_output", message: "x", details: { usage: { prompt_tokens: 3, completion_tokens: 4 } } })).toBe(7);
    expect(tokensReported(spec, undefined, { code: "upstream_unavailable", message: "429" })).toBe(0);
    expect(tokensReported(spec, { usage: { total_tokens: -5 } }, undefined)).toBe(0);
  });
});
