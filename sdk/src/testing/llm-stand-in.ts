/**
 * A scripted OpenAI-compatible chat completions server on loopback, for testing LLM node types with no model:
 * `startLlmStandIn()` answers `POST <url>/chat/completions` from a script of steps, from fixtures, or with answers it
 * builds to fit the request's schema; it records every request (and whether the client aborted it), and injects what
 * real servers do wrong: 429 with `retry-after` / `retry-after-ms`, 500, 401 (OpenAI's and llama.cpp's error shapes),
 * hangs, `finish_reason: "length"`, refusals, malformed JSON, and servers that refuse `json_schema`.
 *
 * A request with `stream: true` is answered as OpenAI streams (stand-in-stream.ts): Server-Sent Events of
 * `chat.completion.chunk`s, the content and tool calls' arguments in pieces, the usage in a last chunk when
 * `stream_options.include_usage` asks, then `[DONE]`; or, with `ignoreStream`, as a server that ignores `stream`.
 * Streams can fail midway: an error event in OpenAI's shape (`stream_error`) or the connection cut (`stream_cut`).
 *
 * `scriptedCompletion()` is the same answering logic without the server (the `scripted` profile of
 * @nodefabric/handler-llm uses it, so a new user can try a planner with no model at all).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { includeUsage, isCompletion, streamAnswer } from "./stand-in-stream.js";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonSchema = { [key: string]: unknown };

/** A chat completions request as the stand-in reads it. */
export interface ChatRequestBody {
  model?: string;
  messages?: Array<{ role: string; content?: unknown; [key: string]: unknown }>;
  response_format?: { type: string; json_schema?: { name?: string; schema?: JsonSchema; strict?: boolean } };
  tools?: Array<{ type: string; function: { name: string; description?: string; parameters?: JsonSchema } }>;
  tool_choice?: unknown;
  [key: string]: unknown;
}

/** One answer the stand-in gives. Steps are used in order; once used up, fixtures and then built answers follow. */
export type StandInStep =
  /** A normal answer whose message content is this text (or this value as JSON). */
  | { content: string | Json; finish_reason?: string; usage?: Partial<StandInUsage>; stream?: StreamPace }
  /** An answer with tool calls. */
  | { tool_calls: Array<{ name: string; arguments: Json | string }>; usage?: Partial<StandInUsage> }
  /** A raw HTTP answer. */
  | { status: number; body?: Json | string; headers?: Record<string, string> }
  /** A known failure, in a real server's shape. */
  | {
      fail:
        | "rate_limited"
        | "server_error"
        | "unauthorized"
        | "llamacpp_unauthorized"
        | "length"
        | "refusal"
        | "malformed_json"
        | "no_json_schema"
        | "hang"
        /** Streams part of an answer, then an error event in OpenAI's shape, and ends (a request without stream: 500). */
        | "stream_error"
        /** Streams part of an answer, then cuts the connection (a request without stream: the connection cut). */
        | "stream_cut";
      retry_after?: string;
      retry_after_ms?: number;
    };

/** How a streamed answer comes: characters per chunk, milliseconds between chunks. */
export interface StreamPace {
  chunk_chars?: number;
  delay_ms?: number;
}

export interface StandInUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/**
 * An answer chosen by what the request asks: its schema's name, a text in its last user message, or how many turns a
 * tool-calling loop took before it.
 */
export type StandInFixture = {
  /** Matches a request whose `response_format.json_schema.name` (or single tool's name) is this. */
  schema_name?: string;
  /** Matches a request whose last user message contains this text. */
  contains?: string;
  /** Matches a request with this many assistant messages: the turns of a tool-calling loop before it (0: its first). */
  turn?: number;
} & (
  | {
      /** The answer: text, or a value sent as JSON. */
      content: string | Json;
    }
  | {
      /** The answer: these tool calls (arguments as a value, sent as JSON, or as text). */
      tool_calls: Array<{ name: string; arguments: Json | string }>;
    }
);

export interface LlmStandInOptions {
  steps?: StandInStep[];
  fixtures?: StandInFixture[];
  /** Refuse `response_format: json_schema` with a 400, as servers without structured output do. */
  noJsonSchema?: boolean;
  /**
   * Answer with a function of the request instead (return undefined to fall through to steps and fixtures). The
   * server awaits a promise; `scriptedCompletion` takes only a synchronous answer.
   */
  respond?: (body: ChatRequestBody) => StandInStep | undefined | Promise<StandInStep | undefined>;
  /** The API key a request must carry as `Authorization: Bearer …` (unset: any or none). */
  apiKey?: string;
  /** The model name answers carry when the request names none (default "scripted-model"). */
  model?: string;
  /** Answer `stream: true` requests with plain JSON, as servers that ignore `stream` do. */
  ignoreStream?: boolean;
  /** Characters of content (and of tool-call arguments) per streamed chunk (default 4). */
  chunkChars?: number;
  /** Milliseconds between streamed chunks (default 0). */
  chunkDelayMs?: number;
}

/** What the stand-in recorded of one request. */
export interface StandInCall {
  body: ChatRequestBody;
  headers: Record<string, string | string[] | undefined>;
  /** True once the client went away before the answer was sent. */
  aborted: boolean;
  status?: number;
}

export interface LlmStandIn {
  /** The base URL to configure (ends with `/v1`): requests go to `<url>/chat/completions`. */
  readonly url: string;
  /** Every request received, in order. */
  readonly calls: StandInCall[];
  /** Adds steps to the end of the script. */
  script(...steps: StandInStep[]): void;
  /** Resolves once `n` requests have arrived. */
  waitForCalls(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** A rough token count, 4 characters a token, as the stand-in bills. */
export function approximateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

function promptText(body: ChatRequestBody): string {
  return JSON.stringify(body.messages ?? []) + (body.tools ? JSON.stringify(body.tools) : "") + (body.response_format ? JSON.stringify(body.response_format) : "");
}

function lastUserText(body: ChatRequestBody): string {
  const users = (body.messages ?? []).filter((m) => m.role === "user");
  const c = users[users.length - 1]?.content;
  return typeof c === "string" ? c : JSON.stringify(c ?? "");
}

function schemaOf(body: ChatRequestBody): { name?: string; schema?: JsonSchema } | undefined {
  if (body.response_format?.type === "json_schema") return { name: body.response_format.json_schema?.name, schema: body.response_format.json_schema?.schema };
  if (body.tools?.length === 1) return { name: body.tools[0].function.name, schema: body.tools[0].function.parameters };
  return undefined;
}

/** A deterministic value valid under `schema` (the common keywords: type, enum, const, properties, items, anyOf, bounds). */
export function sampleForSchema(schema: unknown, depth = 0): Json {
  if (!schema || typeof schema !== "object" || depth > 12) return null;
  const s = schema as JsonSchema;
  if ("const" in s) return s.const as Json;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0] as Json;
  const branches = (s.anyOf ?? s.oneOf) as unknown[] | undefined;
  if (Array.isArray(branches) && branches.length > 0) {
    const nonNull = branches.find((b) => (b as JsonSchema)?.type !== "null");
    return sampleForSchema(nonNull ?? branches[0], depth + 1);
  }
  let type = s.type;
  if (Array.isArray(type)) type = type.find((t) => t !== "null") ?? type[0];
  if (type === undefined) type = s.properties ? "object" : s.items ? "array" : "string";
  switch (type) {
    case "object": {
      const out: { [key: string]: Json } = {};
      const props = (s.properties ?? {}) as Record<string, unknown>;
      const required = new Set((s.required as string[] | undefined) ?? []);
      for (const [k, v] of Object.entries(props)) if (required.has(k)) out[k] = sampleForSchema(v, depth + 1);
      return out;
    }
    case "array": {
      const n = typeof s.minItems === "number" ? s.minItems : 1;
      return Array.from({ length: Math.min(n, 3) }, () => sampleForSchema(s.items, depth + 1));
    }
    case "string": {
      const min = typeof s.minLength === "number" ? s.minLength : 0;
      const base = "sample";
      return base.length >= min ? (typeof s.maxLength === "number" ? base.slice(0, s.maxLength) : base) : base.padEnd(min, "x");
    }
    case "integer":
    case "number":
      return typeof s.minimum === "number" ? (type === "integer" ? Math.ceil(s.minimum) : s.minimum) : typeof s.maximum === "number" ? Math.min(0, s.maximum) : 0;
    case "boolean":
      return false;
    case "null":
      return null;
    default:
      return null;
  }
}

function completion(body: ChatRequestBody, message: Record<string, unknown>, finish: string, model: string, usage?: Partial<StandInUsage>): Json {
  const prompt = usage?.prompt_tokens ?? approximateTokens(promptText(body));
  const out = usage?.completion_tokens ?? approximateTokens(JSON.stringify(message));
  return {
    id: "chatcmpl-scripted",
    object: "chat.completion",
    created: 0,
    model: body.model ?? model,
    choices: [{ index: 0, message: { role: "assistant", content: null, ...message } as Json, finish_reason: finish, logprobs: null }],
    usage: { prompt_tokens: prompt, completion_tokens: out, total_tokens: usage?.total_tokens ?? prompt + out },
  };
}

/** How one step answers: HTTP status, headers and body (or "hang"). */
export interface ScriptedAnswer {
  status: number;
  headers: Record<string, string>;
  body: Json | string;
  hang?: boolean;
  /** How it streams, when the step said. */
  pace?: StreamPace;
  /** Sent as it is, even to a request with `stream: true`. */
  raw?: boolean;
  /** A streamed answer that breaks midway: an error event, or the connection cut. */
  breaks?: "error" | "cut";
}

function openAiError(message: string, type: string, code: string | null, param: string | null = null): Json {
  return { error: { message, type, param, code } };
}

function answerStep(body: ChatRequestBody, step: StandInStep, model: string): ScriptedAnswer {
  const ok = (json: Json): ScriptedAnswer => ({ status: 200, headers: { "content-type": "application/json" }, body: json });
  // A raw answer is sent as it is, never streamed (a server that ignores `stream` answers so).
  if ("status" in step) return { status: step.status, headers: { "content-type": typeof step.body === "string" ? "text/plain" : "application/json", ...step.headers }, body: step.body ?? "", raw: true };
  if ("tool_calls" in step) {
    const tool_calls = step.tool_calls.map((t, i) => ({ id: `call_${i}`, type: "function", function: { name: t.name, arguments: typeof t.arguments === "string" ? t.arguments : JSON.stringify(t.arguments) } }));
    return ok(completion(body, { tool_calls }, "tool_calls", model, step.usage));
  }
  if ("content" in step) {
    const text = typeof step.content === "string" ? step.content : JSON.stringify(step.content);
    // A server forced to call a single tool answers with that call.
    const forced = body.tool_choice && typeof body.tool_choice === "object" ? (body.tool_choice as { function?: { name?: string } }).function?.name : undefined;
    if (forced) return ok(completion(body, { tool_calls: [{ id: "call_0", type: "function", function: { name: forced, arguments: text } }] }, "tool_calls", model, step.usage));
    return { ...ok(completion(body, { content: text }, step.finish_reason ?? "stop", model, step.usage)), ...(step.stream ? { pace: step.stream } : {}) };
  }
  const json = { "content-type": "application/json" };
  switch (step.fail) {
    case "rate_limited": {
      const headers: Record<string, string> = { ...json };
      if (step.retry_after !== undefined) headers["retry-after"] = step.retry_after;
      if (step.retry_after_ms !== undefined) headers["retry-after-ms"] = String(step.retry_after_ms);
      return { status: 429, headers, body: openAiError("Rate limit reached for requests", "requests", "rate_limit_exceeded") };
    }
    case "server_error":
      return { status: 500, headers: json, body: openAiError("The server had an error while processing your request. Sorry about that!", "server_error", null) };
    case "unauthorized":
      return { status: 401, headers: json, body: openAiError("Incorrect API key provided: sk-wr***ng. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key") };
    case "llamacpp_unauthorized":
      return { status: 401, headers: json, body: { error: { code: 401, message: "Invalid API Key", type: "authentication_error" } } };
    case "no_json_schema":
      return { status: 400, headers: json, body: openAiError("Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.", "invalid_request_error", null, "response_format") };
    case "length":
      return ok(completion(body, { content: '{"partial": "the answer was cut' }, "length", model));
    case "refusal":
      return ok(completion(body, { content: null, refusal: "I'm sorry, I cannot help with that request." }, "stop", model));
    case "malformed_json":
      return ok(completion(body, { content: "{ this is not json" }, "stop", model));
    case "hang":
      return { status: 200, headers: json, body: "", hang: true };
    case "stream_error":
    case "stream_cut":
      if (body.stream === true) return { ...ok(completion(body, { content: "This answer breaks off midway through" }, "stop", model)), breaks: step.fail === "stream_error" ? "error" : "cut" };
      if (step.fail === "stream_error") return answerStep(body, { fail: "server_error" }, model);
      return { status: 200, headers: json, body: "", breaks: "cut" };
  }
}

/**
 * The answer to one request with no server: the first step of `steps` (which it removes), else the first fixture
 * that matches, else an answer built to fit the request's schema (or a short text).
 */
export function scriptedCompletion(body: ChatRequestBody, options: Pick<LlmStandInOptions, "steps" | "fixtures" | "noJsonSchema" | "respond" | "model"> = {}): ScriptedAnswer {
  const model = options.model ?? "scripted-model";
  if (options.noJsonSchema && body.response_format?.type === "json_schema") return answerStep(body, { fail: "no_json_schema" }, model);
  const fromFn = options.respond?.(body);
  if (fromFn && typeof (fromFn as Promise<unknown>).then === "function") throw new TypeError("scriptedCompletion: respond must answer synchronously here");
  if (fromFn) return answerStep(body, fromFn as StandInStep, model);
  const step = options.steps?.shift();
  if (step) return answerStep(body, step, model);
  const wanted = schemaOf(body);
  const text = lastUserText(body);
  for (const f of options.fixtures ?? []) {
    if (f.schema_name !== undefined && f.schema_name !== wanted?.name) continue;
    if (f.contains !== undefined && !text.includes(f.contains)) continue;
    if (f.turn !== undefined && (body.messages ?? []).filter((m) => m.role === "assistant").length !== f.turn) continue;
    return answerStep(body, "tool_calls" in f ? { tool_calls: f.tool_calls } : { content: f.content }, model);
  }
  if (wanted?.schema) return answerStep(body, { content: sampleForSchema(wanted.schema) }, model);
  if (body.response_format?.type === "json_object") return answerStep(body, { content: {} }, model);
  return answerStep(body, { content: "This is a scripted answer." }, model);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Starts the stand-in on 127.0.0.1 (an ephemeral port). */
export async function startLlmStandIn(options: LlmStandInOptions = {}): Promise<LlmStandIn> {
  const steps = [...(options.steps ?? [])];
  const calls: StandInCall[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const hanging = new Set<ServerResponse>();

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const send = (status: number, body: Json | string, headers: Record<string, string> = { "content-type": "application/json" }) => {
      res.writeHead(status, headers);
      res.end(typeof body === "string" ? body : JSON.stringify(body));
    };
    const path = (req.url ?? "").split("?")[0];
    if (req.method === "GET" && path.endsWith("/models")) return send(200, { object: "list", data: [{ id: options.model ?? "scripted-model", object: "model" }] });
    if (req.method !== "POST" || !path.endsWith("/chat/completions")) return send(404, openAiError(`Unknown request URL: ${req.method} ${path}`, "invalid_request_error", "unknown_url"));
    const raw = await readBody(req);
    let body: ChatRequestBody;
    try {
      body = JSON.parse(raw) as ChatRequestBody;
    } catch {
      return send(400, openAiError("We could not parse the JSON body of your request.", "invalid_request_error", null));
    }
    const call: StandInCall = { body, headers: { ...req.headers }, aborted: false };
    calls.push(call);
    res.on("close", () => {
      if (!res.writableFinished) call.aborted = true;
      hanging.delete(res);
    });
    for (const w of waiters.filter((w) => calls.length >= w.n)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
    if (options.apiKey !== undefined && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      call.status = 401;
      return send(401, openAiError("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"));
    }
    // The function is asked once per request (it may keep state), and may answer later.
    const refused = options.noJsonSchema && body.response_format?.type === "json_schema";
    const own = refused ? undefined : await options.respond?.(body);
    const answer = scriptedCompletion(body, { ...options, respond: own ? () => own : undefined, steps });
    if (answer.hang) {
      hanging.add(res);
      return;
    }
    call.status = answer.status;
    if (answer.breaks === "cut" && body.stream !== true) return void res.socket?.destroy();
    if (body.stream === true && !options.ignoreStream && !answer.raw && answer.status === 200 && isCompletion(answer.body)) {
      return streamAnswer(res, answer.body, { chunkChars: answer.pace?.chunk_chars ?? options.chunkChars ?? 4, delayMs: answer.pace?.delay_ms ?? options.chunkDelayMs ?? 0, usage: includeUsage(body), breaks: answer.breaks });
    }
    send(answer.status, answer.body, answer.headers);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => {
      if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify(openAiError(err.message, "server_error", null)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    calls,
    script: (...more) => void steps.push(...more),
    waitForCalls(n, timeoutMs = 10_000) {
      if (calls.length >= n) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the LLM stand-in received ${calls.length} of ${n} calls within ${timeoutMs} ms`)), timeoutMs);
        waiters.push({ n, resolve: () => (clearTimeout(timer), resolve()) });
      });
    },
    close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
