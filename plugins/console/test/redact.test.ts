/**
 * FABRIC_CONSOLE_REDACT: the rule the node panel hides text by (an `llm.chat` call's prompt and answer, say). A good
 * one reaches the page through /console/config.json; a bad one stops the start with a sentence naming the variable.
 * The page's redactor replaces every match in every string it shows, and its "LLM call" view reads an llm.chat
 * NodeRun's messages, answer and token usage.
 */
import { describe, it, expect, afterEach } from "vitest";
import { call } from "../../../core/test/support/gateway-http.js";
import { REDACT_VARIABLE } from "../src/redact-rule.js";
import { redactRules } from "../src/settings.js";
import { llmCallOf, redactor, REDACTED } from "../web/src/redact.js";
import { startConsoleFabric } from "./support/console-fabric.js";

describe("redactRules", () => {
  it("takes one expression, or a JSON array of them; none when unset", () => {
    expect(redactRules({})).toEqual([]);
    expect(redactRules({ [REDACT_VARIABLE]: " " })).toEqual([]);
    expect(redactRules({ [REDACT_VARIABLE]: "\\b\\d{16}\\b" })).toEqual(["\\b\\d{16}\\b"]);
    expect(redactRules({ [REDACT_VARIABLE]: '["sk-[A-Za-z0-9]+", "[\\\\w.]+@[\\\\w.]+"]' })).toEqual(["sk-[A-Za-z0-9]+", "[\\w.]+@[\\w.]+"]);
  });

  it("refuses an invalid expression or a malformed array, naming the variable", () => {
    expect(() => redactRules({ [REDACT_VARIABLE]: "(unclosed" })).toThrow(/^FABRIC_CONSOLE_REDACT\[0\] "\(unclosed" is not a valid regular expression/);
    expect(() => redactRules({ [REDACT_VARIABLE]: "[1, 2" })).toThrow(/^FABRIC_CONSOLE_REDACT starts with "\[" but is not a JSON array of strings/);
    expect(() => redactRules({ [REDACT_VARIABLE]: "[1]" })).toThrow(/^FABRIC_CONSOLE_REDACT\[0\] must be a regular expression/);
  });
});

describe("the page's redactor and LLM call view", () => {
  const inputs = { messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "My card is 4111111111111111, mail me at a@b.example" }] };
  const outputs = { content: "Noted 4111111111111111.", tool_calls: [], finish_reason: "stop", usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 }, model: "gpt-4o-mini", cost: 0.0001, profile: "default" };

  it("replaces every match in every string, and leaves the rest", () => {
    const redact = redactor(["\\b\\d{16}\\b", "[\\w.]+@[\\w.]+"]);
    expect(redact(inputs)).toEqual({ messages: [{ role: "system", content: "Be brief." }, { role: "user", content: `My card is ${REDACTED}, mail me at ${REDACTED}` }] });
    expect(redact(outputs)).toMatchObject({ content: `Noted ${REDACTED}.`, usage: { total_tokens: 17 } });
    expect(redactor([])(inputs)).toBe(inputs);
  });

  it("shows an llm.chat NodeRun's prompt, answer and usage, and nothing for other node types", () => {
    const view = llmCallOf("llm.chat", redactor(["\\b\\d{16}\\b"])(inputs), outputs);
    expect(view).toEqual({
      messages: [
        { role: "system", text: "Be brief." },
        { role: "user", text: `My card is ${REDACTED}, mail me at a@b.example` },
      ],
      answer: "Noted 4111111111111111.",
      model: "gpt-4o-mini",
      profile: "default",
      usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 },
      cost: 0.0001,
    });
    expect(llmCallOf("llm.chat", inputs, { ...outputs, parsed: { ok: true } })!.answer).toBe('{\n  "ok": true\n}');
    expect(llmCallOf("demo.echo", inputs, outputs)).toBeUndefined();
  });
});

describe("FABRIC_CONSOLE_REDACT on a fabric", () => {
  const before = process.env[REDACT_VARIABLE];
  afterEach(() => {
    if (before === undefined) delete process.env[REDACT_VARIABLE];
    else process.env[REDACT_VARIABLE] = before;
  });

  it("reaches the page as redact in /console/config.json", async () => {
    process.env[REDACT_VARIABLE] = '["sk-[A-Za-z0-9]+"]';
    const fabric = await startConsoleFabric();
    try {
      const r = await call("GET", `${fabric.urls["run-gateway"]}/console/config.json`);
      expect(r.status).toBe(200);
      expect(r.body.redact).toEqual(["sk-[A-Za-z0-9]+"]);
    } finally {
      await fabric.close();
    }
  });

  it("stops the start when it is bad", async () => {
    process.env[REDACT_VARIABLE] = "(";
    let fabric: Awaited<ReturnType<typeof startConsoleFabric>> | undefined;
    try {
      await expect(startConsoleFabric().then((f) => ((fabric = f), f))).rejects.toThrow(/@nodefabric\/plugin-console: FABRIC_CONSOLE_REDACT\[0\] "\(" is not a valid regular expression/);
    } finally {
      await fabric?.close();
    }
  });
});
