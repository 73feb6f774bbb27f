/**
 * @nodefabric/handler-demo: four small node types for trying NodeFabric and testing it end to end —
 * an echo, a cancellable sleep, a failure on demand, and a GET of any upstream URL.
 */
import { setTimeout as delay } from "node:timers/promises";
import { defineAtomic, HandlerError, type JsonObject, type JsonValue, type SdkFailureCode } from "@nodefabric/sdk";

const READ_ONLY = { gates: { side_effect_class: "read" as const } };

/** `demo.echo`: answers `{ echo: <inputs> }`. */
export const echo = defineAtomic<JsonObject, { echo: JsonObject }>({
  nodeType: {
    node_type_id: "demo.echo",
    version: "1.0.0",
    description: "Echo: returns its inputs unchanged, as { echo: <inputs> }.",
    input_schema: { type: "object" },
    output_schema: {
      type: "object",
      properties: { echo: { type: "object" } },
      required: ["echo"],
      additionalProperties: false,
    },
    constraints: READ_ONLY,
  },
  handler: (inputs) => ({ echo: inputs }),
});

/** `demo.sleep`: waits `ms` milliseconds, and stops at once when canceled or timed out. */
export const sleep = defineAtomic<{ ms: number; value?: JsonValue }, { slept_ms: number; value?: JsonValue }>({
  nodeType: {
    node_type_id: "demo.sleep",
    version: "1.0.0",
    description: "Sleep: waits the given number of milliseconds (cancellable), then returns them and the optional value.",
    input_schema: {
      type: "object",
      properties: {
        ms: { type: "integer", minimum: 0, maximum: 600000 },
        value: {},
      },
      required: ["ms"],
      additionalProperties: false,
    },
    output_schema: {
      type: "object",
      properties: {
        slept_ms: { type: "integer", minimum: 0 },
        value: {},
      },
      required: ["slept_ms"],
      additionalProperties: false,
    },
    constraints: READ_ONLY,
    // Long enough for the longest sleep its inputs allow; the executor's own maximum still applies.
    extensions: { "nodefabric.timeout_ms": 605000 },
  },
  async handler(inputs, ctx) {
    await delay(inputs.ms, undefined, { signal: ctx.signal });
    return inputs.value === undefined ? { slept_ms: inputs.ms } : { slept_ms: inputs.ms, value: inputs.value };
  },
});

/** `demo.fail`: throws a HandlerError of the chosen code, or succeeds from attempt `succeed_on_attempt` on. */
export const fail = defineAtomic<
  { code?: string; message?: string; retryable?: boolean; succeed_on_attempt?: number },
  { attempt: number }
>({
  nodeType: {
    node_type_id: "demo.fail",
    version: "1.0.0",
    description: "Fail: fails with the given error code and message; with succeed_on_attempt, succeeds once ctx.attempt reaches it (to exercise retries).",
    input_schema: {
      type: "object",
      properties: {
        code: { type: "string", minLength: 1 },
        message: { type: "string" },
        retryable: { type: "boolean" },
        succeed_on_attempt: { type: "integer", minimum: 1 },
      },
      additionalProperties: false,
    },
    output_schema: {
      type: "object",
      properties: { attempt: { type: "integer", minimum: 1 } },
      required: ["attempt"],
      additionalProperties: false,
    },
    constraints: READ_ONLY,
  },
  handler(inputs, ctx) {
    if (inputs.succeed_on_attempt !== undefined && ctx.attempt >= inputs.succeed_on_attempt) return { attempt: ctx.attempt };
    throw new HandlerError(inputs.code ?? "handler_error", inputs.message ?? "failed on purpose", { retryable: inputs.retryable });
  },
});

const MAX_ERROR_BODY = 1000;

/** `demo.upstream`: GETs a URL and answers its status and body (parsed when it is JSON). */
export const upstream = defineAtomic<{ url: string }, { status: number; body: JsonValue }>({
  nodeType: {
    node_type_id: "demo.upstream",
    version: "1.0.0",
    description: "Upstream: GETs the given http(s) URL and returns its status and body (JSON-parsed when possible); a non-2xx answer fails with upstream_error.",
    input_schema: {
      type: "object",
      properties: { url: { type: "string", format: "uri", pattern: "^https?://" } },
      required: ["url"],
      additionalProperties: false,
    },
    output_schema: {
      type: "object",
      properties: {
        status: { type: "integer" },
        body: {},
      },
      required: ["status", "body"],
      additionalProperties: false,
    },
    constraints: READ_ONLY,
  },
  async handler(inputs, ctx) {
    // ctx.request (undici) costs about half the CPU of ctx.fetch per upstream call.
    const res = await ctx.request(inputs.url, { headers: { accept: "application/json, text/plain;q=0.9, */*;q=0.5" } });
    const text = await res.text();
    const status = res.statusCode;
    if (status < 200 || status >= 300) {
      throw new HandlerError<SdkFailureCode>("upstream_error", `${inputs.url} answered ${status}`, {
        // A server error or a rate limit may pass; any other refusal will be the same next time.
        retryable: status >= 500 || status === 429,
        details: { status, body: text.slice(0, MAX_ERROR_BODY) },
      });
    }
    let body: JsonValue = text;
    try {
      body = JSON.parse(text) as JsonValue;
    } catch {
      // Not JSON: the text itself is the body.
    }
    return { status, body };
  },
});

export default [echo, sleep, fail, upstream];
