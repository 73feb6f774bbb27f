/**
 * `llm.chat@1.0.0`: one call to an OpenAI-compatible `/chat/completions` endpoint (OpenAI, Ollama, vLLM, llama.cpp's
 * server, LM Studio, a gateway), as one NodeRun. The fabric owns retries: a 429 or 5xx fails the attempt as retryable
 * `upstream_unavailable` with the server's `retry-after-ms` / `retry-after` as `details.retry_after_ms`, and the
 * coordinator runs the next attempt, recorded and budgeted like the first.
 *
 * With `response_schema`, the answer is structured: the strict form of the schema goes as `response_format:
 * json_schema`; a server that refuses it is asked again with `json_object` (the schema in the prompt), then with one
 * forced tool call; the answer is validated against the schema as given. A refusal and `finish_reason: "length"`
 * fail with their own codes. What the call cost (the profile's model in the price table) is reported with
 * `ctx.reportCost`, and returned as `cost`.
 *
 * The answer is streamed (`stream: true`, the usage in a last chunk; stream.ts folds the chunks into the completion a
 * non-streamed call gets, so the outputs do not depend on it) and its text reported as it arrives with
 * `ctx.reportOutputDelta` (run events `node_run_output_delta`). Calls go through `ctx.egress.fetch`, the executor's
 * egress policy, as a URL of the operator's configuration (docs/llm.md).
 *
 * Before anything is sent, the call reserves its prompt's size plus `max_output_tokens` against the budgets it is
 * given (`budget` in its inputs, the run's `max_cost`, and `constraints.extensions["nodefabric.llm.max_tokens"]`):
 * a call that could pass them is never sent.
 */
import { defineAtomic, HandlerError, retryAfterMs, upstreamUnavailableError, type AtomicContext, type JsonObject, type JsonValue } from "@nodefabric/sdk";
import { costOf, loadLlmConfig, priceOf, profileFor, type LlmConfig, type LlmProfile, type StructuredMode } from "./config.js";
import { describeErrors, dropStrictNulls, parseJsonAnswer, strictSchema, validatorOf } from "./structured.js";
import { fail } from "./failure-codes.js";
import { readChatStream } from "./stream.js";

export const LLM_MAX_TOKENS_EXTENSION = "nodefabric.llm.max_tokens";
/** Output tokens reserved when a call names no `max_output_tokens`. */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4096;
/** Longest error text from a server kept in an error's details. */
const MAX_ERROR_TEXT = 2000;
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

export interface ChatMessage {
  role: "system" | "developer" | "user" | "assistant" | "tool";
  content?: string | JsonValue[] | null;
  name?: string;
  tool_calls?: JsonValue[];
  tool_call_id?: string;
}

export interface ChatInputs {
  messages: ChatMessage[];
  response_schema?: JsonObject;
  schema_name?: string;
  tools?: Array<{ type: "function"; function: { name: string; description?: string; parameters?: JsonObject } }>;
  model?: string;
  profile?: string;
  temperature?: number;
  seed?: number;
  max_output_tokens?: number;
  budget?: { max_tokens?: number; max_cost?: number };
}

export type ChatUsage = {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
};

export interface ChatOutputs {
  content: string | null;
  parsed?: JsonValue;
  tool_calls: Array<{ id: string; name: string; arguments: string }>;
  finish_reason: string;
  usage: ChatUsage;
  model: string;
  cost: number;
  profile: string;
  structured_mode?: StructuredMode;
}

/** A rough prompt size in tokens (4 characters a token), used only to reserve budget before a call. */
export function estimatePromptTokens(inputs: Pick<ChatInputs, "messages" | "tools" | "response_schema">): number {
  const text = JSON.stringify(inputs.messages) + (inputs.tools ? JSON.stringify(inputs.tools) : "") + (inputs.response_schema ? JSON.stringify(inputs.response_schema) : "");
  return Math.ceil(text.length / 4);
}

// ------------------------------------------------------------------ configuration, cached per environment

let cached: { key: string; config: LlmConfig } | undefined;

function configNow(): LlmConfig {
  const e = process.env;
  const key = JSON.stringify(Object.entries(e).filter(([k]) => k.startsWith("FABRIC_LLM_") || k.startsWith("ARP_LLM_")).sort()) + process.cwd();
  if (cached?.key !== key) cached = { key, config: loadLlmConfig(e) };
  return cached.config;
}

/** The profile a call that names none uses here (for labels a policy reads); "default" when none is configured. */
export function defaultProfileName(): string {
  try {
    return configNow().default_profile ?? "default";
  } catch {
    return "default";
  }
}

/** The host (and port) a profile's calls go to, as configured where this runs; undefined when unknown. */
export function endpointHostOf(profile: string): string | undefined {
  try {
    const p = configNow().profiles.get(profile);
    if (!p) return undefined;
    return p.scripted ? "scripted" : new URL(p.base_url).host;
  } catch {
    return undefined;
  }
}

/** Forgets the cached configuration (tests that change the environment between fabrics). */
export function resetLlmConfig(): void {
  cached = undefined;
}

// ------------------------------------------------------------------ errors

/** The message, type and code of an error body, in OpenAI's, llama.cpp's, Ollama's or vLLM's shape. */
export function readErrorBody(text: string): { message?: string; type?: string; code?: string | number; param?: string } {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return text.trim() ? { message: text.trim().slice(0, MAX_ERROR_TEXT) } : {};
  }
  if (typeof body !== "object" || body === null) return {};
  const b = body as Record<string, unknown>;
  // OpenAI and llama.cpp's server: { error: { message, type, param, code } } (llama.cpp's code is the HTTP status).
  // Ollama and older llama.cpp: { error: "message" }. vLLM: { object: "error", message, type, param, code }.
  const e = typeof b.error === "object" && b.error !== null ? (b.error as Record<string, unknown>) : typeof b.error === "string" ? { message: b.error } : b;
  const out: { message?: string; type?: string; code?: string | number; param?: string } = {};
  if (typeof e.message === "string") out.message = e.message.slice(0, MAX_ERROR_TEXT);
  if (typeof e.type === "string") out.type = e.type;
  if (typeof e.code === "string" || typeof e.code === "number") out.code = e.code;
  if (typeof e.param === "string") out.param = e.param;
  return out;
}

/** Whether a 400 says the server does not take this structured-output mode. */
function refusesMode(mode: StructuredMode, err: { message?: string; param?: string }): boolean {
  const text = `${err.param ?? ""} ${err.message ?? ""}`.toLowerCase();
  if (mode === "tool") return false;
  return /response_format|json_schema|json_object|structured|schema|grammar/.test(text);
}

function statusError(status: number, headers: Headers, text: string, profile: LlmProfile, mode?: StructuredMode): HandlerError {
  const err = readErrorBody(text);
  const details: Record<string, unknown> = { status, profile: profile.name };
  if (err.message !== undefined) details.upstream_message = err.message;
  if (err.type !== undefined) details.upstream_type = err.type;
  if (err.code !== undefined) details.upstream_code = err.code;
  if (err.param !== undefined) details.upstream_param = err.param;
  const said = err.message ? `: ${err.message}` : "";
  if (status === 429 || status >= 500 || status === 408) {
    // retry-after-ms (OpenAI's, finer) first, then the standard retry-after.
    const ms = Number(headers.get("retry-after-ms"));
    const wait = Number.isFinite(ms) && ms >= 0 && headers.get("retry-after-ms") !== null ? Math.ceil(ms) : retryAfterMs(headers.get("retry-after"));
    if (wait !== undefined) details.retry_after_ms = wait;
    return fail("upstream_unavailable", `the LLM endpoint of profile "${profile.name}" answered ${status}${said}`, { retryable: true, details });
  }
  if (status === 401 || status === 403) {
    return fail("llm_auth_error", `the LLM endpoint of profile "${profile.name}" refused the credentials (${status})${said}; check FABRIC_LLM_API_KEY or the profile's key`, { retryable: false, details });
  }
  if (status === 400 && mode !== undefined) {
    details.structured_mode = mode;
    return fail("llm_schema_rejected", `the LLM endpoint of profile "${profile.name}" refused the request's structured output (${mode})${said}`, { retryable: false, details });
  }
  return fail("llm_bad_request", `the LLM endpoint of profile "${profile.name}" answered ${status}${said}`, { retryable: false, details });
}

// ------------------------------------------------------------------ one request

interface Completion {
  model?: string;
  choices?: Array<{ message?: { content?: unknown; refusal?: unknown; tool_calls?: unknown }; finish_reason?: unknown }>;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown; total_tokens?: unknown };
}

type Sent = { ok: true; completion: Completion } | { ok: false; status: number; headers: Headers; text: string };

async function send(ctx: AtomicContext, profile: LlmProfile, body: Record<string, unknown>, key: string | undefined): Promise<Sent> {
  if (profile.scripted) {
    const { scriptedCompletion } = await import("@nodefabric/sdk/testing");
    const answer = scriptedCompletion(body as never, { fixtures: profile.scripted.fixtures as never, model: profile.model });
    const text = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body);
    if (answer.status >= 200 && answer.status < 300) {
      const completion = JSON.parse(text) as Completion;
      // The scripted profile streams too, in one piece: follow and the console show its answer as a real model's.
      const content = completion.choices?.[0]?.message?.content;
      if (typeof content === "string" && content) ctx.reportOutputDelta(content);
      return { ok: true, completion };
    }
    return { ok: false, status: answer.status, headers: new Headers(answer.headers), text };
  }
  const url = `${profile.base_url}/chat/completions`;
  const headers: Record<string, string> = { "content-type": "application/json", accept: "text/event-stream, application/json", "user-agent": "nodefabric-llm" };
  if (key) headers.authorization = `Bearer ${key}`;
  const timeoutMs = Math.max(1, Math.min(profile.timeout_ms, ctx.deadline - Date.now()));
  const timeout = AbortSignal.timeout(timeoutMs);
  const timedOut = () => fail("upstream_timeout", `the LLM endpoint of profile "${profile.name}" did not answer within ${timeoutMs} ms`, { retryable: true, details: { profile: profile.name, timeout_ms: timeoutMs } });
  let res: Response;
  try {
    // Through the executor's egress policy (its client span, its refusals); the URL is the operator's, so a model
    // server on loopback or a private network is allowed (docs/llm.md). Never redirected: the key belongs to this
    // host alone. The egress timer is given a second more than the profile's, so the profile's names the failure.
    res = await ctx.egress.fetch(url, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      redirect: "manual",
      signal: timeout,
      timeoutMs: timeoutMs + 1000,
      operatorConfigured: true,
    } as RequestInit);
  } catch (err) {
    if (ctx.signal.aborted) throw err;
    if (timeout.aborted) throw timedOut();
    if (HandlerError.is(err)) throw err;
    throw upstreamUnavailableError(err, new URL(url)) ?? fail("upstream_unavailable", `the LLM endpoint of profile "${profile.name}" could not be reached: ${(err as Error).message}`, { retryable: true, details: { profile: profile.name } });
  }
  if (res.status >= 300 && res.status < 400) {
    await res.body?.cancel().catch(() => undefined);
    throw fail("llm_bad_request", `the LLM endpoint of profile "${profile.name}" answered a redirect (${res.status}); requests are never redirected, so set base_url to where it points`, {
      retryable: false,
      details: { status: res.status, profile: profile.name },
    });
  }
  const streamed = res.ok && /^text\/event-stream\b/i.test(res.headers.get("content-type") ?? "") && res.body !== null;
  if (streamed) return { ok: true, completion: await readStream(res.body!, ctx, profile, timeout, timedOut) };
  // An error, or a server that ignored `stream` and answered JSON.
  const text = await readText(res, profile, ctx, timeout, timedOut);
  if (!res.ok) return { ok: false, status: res.status, headers: res.headers, text };
  try {
    const completion = JSON.parse(text) as Completion;
    const content = completion.choices?.[0]?.message?.content;
    if (typeof content === "string" && content) ctx.reportOutputDelta(content);
    return { ok: true, completion };
  } catch {
    throw fail("upstream_error", `the LLM endpoint of profile "${profile.name}" answered ${res.status} with a body that is not JSON`, { retryable: true, details: { status: res.status, profile: profile.name } });
  }
}

/** A streamed answer, folded into the completion it adds up to; its text reported as it arrives. */
async function readStream(body: ReadableStream<Uint8Array>, ctx: AtomicContext, profile: LlmProfile, timeout: AbortSignal, timedOut: () => HandlerError): Promise<Completion> {
  const end = await readChatStream(body, (text) => ctx.reportOutputDelta(text), MAX_ANSWER_BYTES);
  if (end.kind === "done") return end.completion as Completion;
  if (ctx.signal.aborted) throw ctx.signal.reason ?? new DOMException("the node run was stopped", "AbortError");
  if (timeout.aborted) throw timedOut();
  if (end.kind === "error") {
    // An error sent once the answer had begun (its status was already 200): the server failed midway, so the call
    // is worth making again unless the error says it was the request's fault.
    const err = readErrorBody(end.text);
    const details: Record<string, unknown> = { profile: profile.name, mid_stream: true };
    if (err.message !== undefined) details.upstream_message = err.message;
    if (err.type !== undefined) details.upstream_type = err.type;
    if (err.code !== undefined) details.upstream_code = err.code;
    const said = err.message ? `: ${err.message}` : "";
    const clientFault = /invalid_request|bad_request|context_length|content_filter/i.test(`${err.type ?? ""} ${err.code ?? ""}`);
    if (clientFault) throw fail("llm_bad_request", `the LLM endpoint of profile "${profile.name}" failed the answer midway${said}`, { retryable: false, details });
    throw fail("upstream_unavailable", `the LLM endpoint of profile "${profile.name}" failed the answer midway${said}`, { retryable: true, details });
  }
  const cause = end.cause;
  if (HandlerError.is(cause)) throw cause;
  throw fail("upstream_unavailable", `the LLM endpoint of profile "${profile.name}" ended its streamed answer before the end${cause instanceof Error ? `: ${cause.message}` : ""}`, {
    retryable: true,
    details: { profile: profile.name, mid_stream: true },
  });
}

async function readText(res: Response, profile: LlmProfile, ctx: AtomicContext, timeout: AbortSignal, timedOut: () => HandlerError): Promise<string> {
  const length = Number(res.headers.get("content-length"));
  if (Number.isFinite(length) && length > MAX_ANSWER_BYTES) {
    await res.body?.cancel();
    throw fail("upstream_error", `the LLM endpoint of profile "${profile.name}" answered ${length} bytes, more than ${MAX_ANSWER_BYTES}`, { retryable: false, details: { profile: profile.name } });
  }
  try {
    return await res.text();
  } catch (err) {
    if (ctx.signal.aborted) throw err;
    if (timeout.aborted) throw timedOut();
    if (HandlerError.is(err)) throw err;
    throw upstreamUnavailableError(err) ?? err;
  }
}

// ------------------------------------------------------------------ the handler

function modesFrom(first: StructuredMode): StructuredMode[] {
  const all: StructuredMode[] = ["json_schema", "json_object", "tool"];
  return all.slice(all.indexOf(first));
}

function schemaInstruction(schema: JsonObject): ChatMessage {
  return { role: "system", content: `Answer with one JSON object, and nothing else, valid under this JSON Schema:\n${JSON.stringify(schema)}` };
}

function numberOr(v: unknown, fallback: number): number {
  return typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : fallback;
}

function keyOf(ctx: AtomicContext, profile: LlmProfile): string | undefined {
  if (profile.api_key_secret) {
    // Handed out only for the hosts the operator bound it to; refused (egress_denied) otherwise.
    return ctx.egress.secretFor(profile.api_key_secret, new URL(profile.base_url));
  }
  return profile.api_key;
}

/** Refuses a call whose reservation could pass a budget; nothing is sent then. */
function reserve(inputs: ChatInputs, ctx: AtomicContext, config: LlmConfig, model: string, maxOut: number): { prompt: number; cost: number } {
  const prompt = estimatePromptTokens(inputs);
  const tokens = prompt + maxOut;
  const cost = costOf(priceOf(config.prices, model), prompt, maxOut);
  const tokenLimits = [inputs.budget?.max_tokens, ctx.constraints?.extensions?.[LLM_MAX_TOKENS_EXTENSION] as number | undefined].filter((v): v is number => typeof v === "number");
  const costLimits = [inputs.budget?.max_cost, ctx.constraints?.budgets?.max_cost].filter((v): v is number => typeof v === "number");
  for (const limit of tokenLimits) {
    if (tokens > limit) {
      throw fail("budget_exceeded", `the call reserves ${tokens} tokens (about ${prompt} of prompt and ${maxOut} of output), more than its token budget of ${limit}; it was not sent`, {
        retryable: false,
        details: { budget: LLM_MAX_TOKENS_EXTENSION, limit, reserved: tokens, prompt_tokens_estimate: prompt, max_output_tokens: maxOut },
      });
    }
  }
  for (const limit of costLimits) {
    if (cost > limit) {
      throw fail("budget_exceeded", `the call reserves a cost of ${cost} (model ${model}, ${prompt} prompt and ${maxOut} output tokens), more than its max_cost of ${limit}; it was not sent`, {
        retryable: false,
        details: { budget: "max_cost", limit, reserved: cost, model },
      });
    }
  }
  return { prompt, cost };
}

async function handleChat(inputs: ChatInputs, ctx: AtomicContext): Promise<ChatOutputs> {
  const config = configNow();
  const profile = profileFor(config, inputs.profile);
  const model = inputs.model ?? profile.model;
  if (!model) throw fail("invalid_configuration", `profile "${profile.name}" names no model: set FABRIC_LLM_MODEL, the profile's model, or the call's model`, { retryable: false });
  const maxOut = inputs.max_output_tokens ?? DEFAULT_MAX_OUTPUT_TOKENS;
  const schema = inputs.response_schema;
  const validate = schema ? validatorOf(schema) : undefined;
  reserve(inputs, ctx, config, model, maxOut);
  const key = keyOf(ctx, profile);

  // max_tokens is what every OpenAI-compatible server reads; OpenAI's newer models refuse it for max_completion_tokens,
  // which their 400 names: the request is then sent again with that field (below), as many servers do not know it.
  let limitField = "max_tokens";
  // Streamed, with the usage in a last chunk; a server that refuses stream_options is asked again without it.
  let streamOptions = true;
  const base: Record<string, unknown> = { model, messages: inputs.messages, stream: true };
  if (inputs.temperature !== undefined) base.temperature = inputs.temperature;
  if (inputs.seed !== undefined) base.seed = inputs.seed;
  if (inputs.tools) base.tools = inputs.tools;

  const used: ChatUsage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  let cost = 0;
  const settle = (c: Completion) => {
    const u = c.usage ?? {};
    const p = numberOr(u.prompt_tokens, 0);
    const o = numberOr(u.completion_tokens, 0);
    used.prompt_tokens += p;
    used.completion_tokens += o;
    used.total_tokens += numberOr(u.total_tokens, p + o);
    const spent = costOf(priceOf(config.prices, typeof c.model === "string" ? c.model : model), p, o);
    cost += spent;
    if (spent > 0) ctx.reportCost(spent);
  };

  const name = inputs.schema_name ?? "answer";
  const modes: Array<StructuredMode | undefined> = schema ? modesFrom(profile.structured_output) : [undefined];
  for (let i = 0; i < modes.length; i++) {
    const mode = modes[i];
    const body: Record<string, unknown> = { ...base, [limitField]: maxOut };
    if (streamOptions) body.stream_options = { include_usage: true };
    if (schema && mode === "json_schema") {
      const strict = strictSchema(schema);
      body.response_format = { type: "json_schema", json_schema: { name, schema: strict.schema, strict: strict.strict } };
    } else if (schema && mode === "json_object") {
      body.messages = [schemaInstruction(schema), ...inputs.messages];
      body.response_format = { type: "json_object" };
    } else if (schema && mode === "tool") {
      body.messages = [schemaInstruction(schema), ...inputs.messages];
      body.tools = [{ type: "function", function: { name, description: "Give the answer as this function's arguments.", parameters: schema } }];
      body.tool_choice = { type: "function", function: { name } };
    }
    const sent = await send(ctx, profile, body, key);
    if (!sent.ok) {
      const err = readErrorBody(sent.text);
      if (sent.status === 400 && limitField === "max_tokens" && /max_completion_tokens/.test(`${err.param ?? ""} ${err.message ?? ""}`)) {
        limitField = "max_completion_tokens";
        i--;
        continue;
      }
      if (sent.status === 400 && streamOptions && /stream_options|include_usage/.test(`${err.param ?? ""} ${err.message ?? ""}`)) {
        streamOptions = false;
        i--;
        continue;
      }
      if (sent.status === 400 && mode !== undefined && i + 1 < modes.length && refusesMode(mode, err)) {
        ctx.log.info({ profile: profile.name, mode, next: modes[i + 1], upstream_message: err.message }, "the LLM endpoint refused this structured-output mode; falling back");
        continue;
      }
      throw statusError(sent.status, sent.headers, sent.text, profile, sent.status === 400 && mode !== undefined ? mode : undefined);
    }
    const c = sent.completion;
    settle(c);
    return readCompletion(c, { schema, validate, mode, profile, model, used, cost, name });
  }
  // Unreachable: the last mode either answers or throws.
  throw fail("llm_schema_rejected", `the LLM endpoint of profile "${profile.name}" took no structured-output mode`, { retryable: false });
}

function readCompletion(
  c: Completion,
  o: { schema?: JsonObject; validate?: ReturnType<typeof validatorOf>; mode?: StructuredMode; profile: LlmProfile; model: string; used: ChatUsage; cost: number; name: string },
): ChatOutputs {
  const choice = c.choices?.[0];
  if (!choice || typeof choice !== "object") {
    throw fail("upstream_error", `the LLM endpoint of profile "${o.profile.name}" answered with no choices`, { retryable: true, details: { profile: o.profile.name } });
  }
  const message = choice.message ?? {};
  const finish = typeof choice.finish_reason === "string" ? choice.finish_reason : "stop";
  const details = { profile: o.profile.name, model: typeof c.model === "string" ? c.model : o.model, usage: o.used, cost: o.cost, finish_reason: finish };
  if (typeof message.refusal === "string" && message.refusal) {
    throw fail("llm_refusal", `the model refused: ${message.refusal.slice(0, 500)}`, { retryable: false, details: { ...details, refusal: message.refusal } });
  }
  if (finish === "content_filter") throw fail("llm_refusal", "the model's answer was withheld by its content filter", { retryable: false, details });
  if (finish === "length") {
    throw fail("llm_output_truncated", `the answer was cut at max_output_tokens (finish_reason "length"); raise max_output_tokens or shorten the task`, { retryable: false, details });
  }
  const rawCalls = Array.isArray(message.tool_calls) ? (message.tool_calls as Array<{ id?: unknown; function?: { name?: unknown; arguments?: unknown } }>) : [];
  const tool_calls = rawCalls.map((t, i) => ({
    id: typeof t.id === "string" ? t.id : `call_${i}`,
    name: typeof t.function?.name === "string" ? t.function.name : "",
    arguments: typeof t.function?.arguments === "string" ? t.function.arguments : JSON.stringify(t.function?.arguments ?? {}),
  }));
  const content = typeof message.content === "string" ? message.content : null;
  const out: ChatOutputs = { content, tool_calls, finish_reason: finish, usage: o.used, model: details.model, cost: o.cost, profile: o.profile.name };
  if (!o.schema || !o.validate) return out;
  out.structured_mode = o.mode;
  const text = o.mode === "tool" ? (tool_calls.find((t) => t.name === o.name) ?? tool_calls[0])?.arguments : content;
  if (typeof text !== "string" || text.trim() === "") {
    throw fail("llm_invalid_output", "the model gave no answer to parse against response_schema", { retryable: false, details: { ...details, content } });
  }
  const parsed = parseJsonAnswer(text);
  if (!parsed.ok) {
    throw fail("llm_invalid_output", `the model's answer is not valid JSON: ${parsed.error}`, { retryable: false, details: { ...details, content: text.slice(0, 20_000), errors: [`not JSON: ${parsed.error}`] } });
  }
  const value = o.mode === "json_schema" ? dropStrictNulls(parsed.value, o.schema) : parsed.value;
  if (!o.validate(value)) {
    const errors = describeErrors(o.validate.errors);
    throw fail("llm_invalid_output", `the model's answer does not match response_schema: ${errors.slice(0, 3).join("; ")}`, { retryable: false, details: { ...details, content: text.slice(0, 20_000), errors } });
  }
  out.parsed = value as JsonValue;
  return out;
}

/**
 * What the coordinator reads to reserve a call's spending from its run before dispatching it: the inputs that make the
 * prompt, where its output limit is (and the default), the model it is priced at, and where the answer's usage is.
 */
const MODEL_CALL = {
  prompt_inputs: ["messages", "tools", "response_schema"],
  max_output_input: "max_output_tokens",
  default_max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
  model_input: "model",
  usage_output: "usage",
};

/** One chat message of an input's `messages` (OpenAI's format), as llm.chat and llm.agent accept it. */
export const CHAT_MESSAGE_SCHEMA = {
  type: "object",
  properties: {
    role: { enum: ["system", "developer", "user", "assistant", "tool"] },
    content: { anyOf: [{ type: "string" }, { type: "array" }, { type: "null" }] },
    name: { type: "string" },
    tool_calls: { type: "array" },
    tool_call_id: { type: "string" },
  },
  required: ["role"],
  additionalProperties: false,
};

/** `llm.chat@1.0.0`. */
export const llmChat = defineAtomic<ChatInputs, ChatOutputs>({
  nodeType: {
    node_type_id: "llm.chat",
    version: "1.0.0",
    description:
      "LLM chat: one call to an OpenAI-compatible chat completions endpoint (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, a gateway), " +
      "configured by the operator (FABRIC_LLM_BASE_URL, FABRIC_LLM_MODEL, FABRIC_LLM_API_KEY, or named profiles). Optional structured " +
      "output validated against a JSON Schema, tools, token and cost budgets reserved before the call, cost from a price table.",
    input_schema: {
      type: "object",
      properties: {
        messages: { type: "array", items: CHAT_MESSAGE_SCHEMA, minItems: 1, maxItems: 1000 },
        response_schema: { type: "object" },
        schema_name: { type: "string", pattern: "^[A-Za-z0-9_-]{1,64}$" },
        tools: {
          type: "array",
          maxItems: 128,
          items: {
            type: "object",
            properties: {
              type: { const: "function" },
              function: {
                type: "object",
                properties: { name: { type: "string", pattern: "^[A-Za-z0-9_-]{1,64}$" }, description: { type: "string" }, parameters: { type: "object" }, strict: { type: "boolean" } },
                required: ["name"],
                additionalProperties: false,
              },
            },
            required: ["type", "function"],
            additionalProperties: false,
          },
        },
        model: { type: "string", minLength: 1, maxLength: 256 },
        profile: { type: "string", minLength: 1, maxLength: 128 },
        temperature: { type: "number", minimum: 0, maximum: 2 },
        seed: { type: "integer" },
        max_output_tokens: { type: "integer", minimum: 1, maximum: 1_000_000 },
        budget: {
          type: "object",
          description: "What the caller allows this call: reserved before sending, as tokens (prompt + max_output_tokens) and cost.",
          properties: { max_tokens: { type: "number", minimum: 0 }, max_cost: { type: "number", minimum: 0 } },
          additionalProperties: false,
        },
      },
      required: ["messages"],
      additionalProperties: false,
    },
    output_schema: {
      type: "object",
      properties: {
        content: { type: ["string", "null"] },
        parsed: {},
        tool_calls: {
          type: "array",
          items: { type: "object", properties: { id: { type: "string" }, name: { type: "string" }, arguments: { type: "string" } }, required: ["id", "name", "arguments"], additionalProperties: false },
        },
        finish_reason: { type: "string" },
        usage: {
          type: "object",
          properties: { prompt_tokens: { type: "integer" }, completion_tokens: { type: "integer" }, total_tokens: { type: "integer" } },
          required: ["prompt_tokens", "completion_tokens", "total_tokens"],
          additionalProperties: false,
        },
        model: { type: "string" },
        cost: { type: "number", minimum: 0 },
        profile: { type: "string" },
        structured_mode: { enum: ["json_schema", "json_object", "tool"] },
      },
      required: ["content", "tool_calls", "finish_reason", "usage", "model", "cost", "profile"],
      additionalProperties: false,
    },
    constraints: { gates: { side_effect_class: "read" } },
    extensions: {
      "nodefabric.timeout_ms": 180_000,
      "nodefabric.retry": { max_attempts: 4, initial_interval_ms: 500, backoff_coefficient: 2, max_interval_ms: 30_000 },
      // The run reserves each call's prompt and max_output_tokens before it is sent (docs/llm.md, "Budgets the run keeps").
      "nodefabric.model_call": MODEL_CALL,
    },
  },
  handler: handleChat,
});
