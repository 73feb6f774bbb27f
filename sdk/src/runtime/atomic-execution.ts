/**
 * One execution of an atomic handler: validate inputs, run the handler under an AbortSignal and a deadline,
 * validate outputs, and turn whatever happened into an AtomicExecuteResult. It never throws for a handler's
 * doing; a handler that ignores its signal is left behind at the deadline, its result discarded.
 */
import type { AtomicExecuteRequest, AtomicExecuteResult, FabricErrorBody } from "@nodefabric/schemas";
import type { ValidateFunction } from "ajv";
import type { Dispatcher } from "undici";
import { HandlerError } from "../handler-error.js";
import { networkFailureCause, upstreamUnavailableError, UPSTREAM_UNAVAILABLE, type NetworkTarget } from "../network-failure.js";
import type { AtomicContext, AtomicDefinition, FabricDefinition, HandlerLogger, HandlerSecrets, JsonObject } from "../types.js";
import { createHandlerEgress, createHandlerFetch, createHandlerRequest, type UpstreamTracer } from "./handler-fetch.js";
import type { SecretBindings } from "./handler-secrets.js";
import { OUTPUT_DELTA_CLOSE_MS, OutputDeltaStream, type OutputDeltaSender } from "./output-deltas.js";
import { dedupeIssues, issuesFromAjv } from "./schema-issues.js";

/** Where an execution reads time: the fabric passes its one clock, so tests that move it move executions too. */
export interface RuntimeClock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** RFC 3339 UTC timestamp. */
  isoNow(): string;
}

const systemClock: RuntimeClock = { now: () => Date.now(), isoNow: () => new Date().toISOString() };

/** What an execution logs to: pino's shape (a fastify logger fits), or `silentLogger`. */
export interface RuntimeLogger {
  child(bindings: Record<string, unknown>): unknown;
  warn(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

const noop = () => {};
const silentHandlerLogger: HandlerLogger = { debug: noop, info: noop, warn: noop, error: noop };

/** A logger that drops everything, its children (`ctx.log`) included. */
export const silentLogger: RuntimeLogger = { child: () => silentHandlerLogger, warn: noop, debug: noop };

/** A definition ready to run: its schemas' validators (compiled on first call, or at once) beside it. */
export interface ExecutableDefinition {
  definition: FabricDefinition | AtomicDefinition<unknown, unknown>;
  validateInputs: ValidateFunction;
  validateOutputs: ValidateFunction;
}

/** Why an execution was stopped before its handler finished. */
export type StopKind = "timeout" | "canceled" | "shutdown";

/** A running execution: the executor keeps it by node_run_id so `:cancel` and shutdown can stop it. */
export class Execution {
  readonly controller = new AbortController();
  stopped?: StopKind;

  constructor(
    readonly nodeRunId: string,
    readonly timeoutMs: number,
  ) {}

  /** Fires the handler's signal with a reason it can read; the first stop wins. */
  stop(kind: StopKind): void {
    if (this.controller.signal.aborted) return;
    this.stopped = kind;
    const reason =
      kind === "timeout"
        ? new DOMException(`the node run timed out after ${this.timeoutMs} ms`, "TimeoutError")
        : new DOMException(kind === "canceled" ? "the node run was canceled" : "the executor is shutting down", "AbortError");
    this.controller.abort(reason);
  }
}

export interface ExecuteOptions {
  loaded: ExecutableDefinition;
  request: AtomicExecuteRequest;
  execution: Execution;
  attempt: number;
  log: RuntimeLogger;
  /** Where timestamps and durations come from (default: the system clock). */
  clock?: RuntimeClock;
  secrets: HandlerSecrets;
  fetchTimeoutMs: number;
  /** Where `ctx.request` sends upstream requests (a pooled Agent, or a MockAgent in tests). */
  upstreamDispatcher: Dispatcher;
  /** Where `ctx.egress.fetch` connects: the pool that checks every address against the operator's egress policy. */
  egressDispatcher: Dispatcher;
  /**
   * Where `ctx.egress.fetch` with `operatorConfigured: true` connects: the same policy with private addresses allowed
   * (default: `egressDispatcher`).
   */
  configuredEgressDispatcher?: Dispatcher;
  /** The hosts each secret may go to through `ctx.egress.secretFor`. */
  secretBindings: Pick<SecretBindings, "refusal">;
  /** Traces the handler's upstream calls (`ctx.fetch`, `ctx.request`, `ctx.egress.fetch`), when the executor is traced. */
  traceUpstream?: UpstreamTracer;
  /** Told when a handler is left running past its deadline, and again when it finally settles. */
  onAbandoned?: (delta: 1 | -1) => void;
  /** Where `ctx.reportProgress` goes, already throttled (at most one call per PROGRESS_INTERVAL_MS, the latest kept). */
  onProgress?: (report: ProgressReport) => void;
  /** Where `ctx.saveCheckpoint` goes (the coordinator); without it, saving a checkpoint rejects. */
  saveCheckpoint?: (data: Record<string, unknown>) => Promise<void>;
  /** Where `ctx.reportOutputDelta` goes, coalesced and in order (output-deltas.ts); without it, deltas are dropped. */
  onOutputDelta?: OutputDeltaSender;
}

/** What `ctx.reportProgress` reports. */
export interface ProgressReport {
  progress: number;
  total?: number;
  message?: string;
}

/** The shortest time between two progress reports passed on by an execution. */
export const PROGRESS_INTERVAL_MS = 250;

/**
 * Passes progress reports on at most once per PROGRESS_INTERVAL_MS: the first at once, then the latest of those that
 * came in between; nothing after `stop()`.
 */
function progressThrottle(send: ((report: ProgressReport) => void) | undefined): { report(r: ProgressReport): void; stop(): void } {
  let last = 0;
  let pending: ProgressReport | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const flush = () => {
    timer = undefined;
    if (stopped || !pending || !send) return;
    const r = pending;
    pending = undefined;
    last = Date.now();
    try {
      send(r);
    } catch {
      // Best effort: a report that cannot be sent is dropped.
    }
  };
  return {
    report(r) {
      if (stopped || !send) return;
      pending = r;
      const wait = last + PROGRESS_INTERVAL_MS - Date.now();
      if (wait <= 0) flush();
      else if (!timer) {
        timer = setTimeout(flush, wait);
        timer.unref?.();
      }
    },
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}

type Outcome = { kind: "returned"; value: unknown } | { kind: "threw"; error: unknown } | { kind: "stopped" };

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function describeValue(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (v === undefined) return "nothing";
  return `a ${typeof v}`;
}

/** Copies a JSON-compatible value, or returns undefined when it cannot be serialised (cycles, BigInt). */
function jsonCopy(v: unknown): unknown {
  try {
    const text = JSON.stringify(v);
    return text === undefined ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The host and port a HandlerError's details name, for the cause of a network failure that does not name them. */
function targetInDetails(details: Record<string, unknown> | undefined): NetworkTarget | undefined {
  if (typeof details?.host !== "string") return undefined;
  return { host: details.host, port: typeof details.port === "number" ? details.port : undefined };
}

/**
 * The `error` of a result for something a handler threw. A network failure it let escape (a refused connection, a
 * name that does not resolve, a reset, a timeout, from its own fetch or undici call) is `upstream_unavailable`, as
 * `ctx.fetch` would have rejected it; any other error that is not a HandlerError is `handler_error`.
 */
export function errorFromThrown(err: unknown): FabricErrorBody {
  if (HandlerError.is(err)) {
    const body: FabricErrorBody = { code: err.code, message: typeof err.message === "string" ? err.message : String(err.message) };
    if (isPlainObject(err.details)) {
      const details = jsonCopy(err.details);
      if (isPlainObject(details)) body.details = details;
    }
    if (typeof err.retryable === "boolean") body.retryable = err.retryable;
    const cause = (err as { cause?: unknown }).cause;
    if (cause !== undefined) {
      // A network failure under it keeps its code, host, port and syscall.
      body.cause = networkFailureCause(cause, targetInDetails(body.details));
      if (!body.cause) {
        const c = cause as { message?: unknown; code?: unknown };
        body.cause = { message: typeof c?.message === "string" ? c.message : String(cause) };
        if (typeof c?.code === "string" && c.code.length > 0) body.cause.code = c.code;
      }
    }
    return body;
  }
  const upstream = upstreamUnavailableError(err);
  if (upstream) return errorFromThrown(upstream);
  // Only the message crosses the wire: stacks and internals stay in the executor's log.
  const message = err instanceof Error ? err.message : typeof err === "string" ? err : `the handler threw ${describeValue(err)}`;
  return { code: "handler_error", message };
}

/** The ids every log line about this execution carries: its run, its NodeRun and the run's trace (when it has one). */
function runFields(request: AtomicExecuteRequest): { run_id: string; node_run_id: string; trace_id?: string } {
  const traceId = request.run_context?.trace?.trace_id;
  return { run_id: request.run_id, node_run_id: request.node_run_id, ...(traceId ? { trace_id: traceId } : {}) };
}

function handlerLogger(log: RuntimeLogger, request: AtomicExecuteRequest): () => HandlerLogger {
  let child: HandlerLogger | undefined;
  // Made on first use: most handlers never log, and a pino child per request is not free.
  return () =>
    (child ??= log.child({
      ...runFields(request),
      node_type_id: request.node_type_ref.node_type_id,
    }) as unknown as HandlerLogger);
}

/** One warn line per execution that failed because its upstream could not be reached, with the run's ids. */
function logUpstreamFailure(log: RuntimeLogger, request: AtomicExecuteRequest, attempt: number, error: FabricErrorBody): void {
  const details = error.details ?? {};
  log.warn(
    {
      ...runFields(request),
      node_type_id: request.node_type_ref.node_type_id,
      attempt,
      error_code: error.code,
      code: details.code ?? error.cause?.code,
      host: details.host,
      port: details.port,
      ...(details.reason !== undefined ? { reason: details.reason } : {}),
    },
    `upstream unavailable: ${error.message}`,
  );
}

/** Runs one atomic execution to its AtomicExecuteResult. */
export async function executeAtomic(options: ExecuteOptions): Promise<AtomicExecuteResult> {
  const { loaded, request, execution, attempt } = options;
  const clock = options.clock ?? systemClock;
  const nodeType = loaded.definition.nodeType;
  const name = `${nodeType.node_type_id}@${nodeType.version}`;
  const startedMs = clock.now();
  const started_at = clock.isoNow();
  // What the handler reported with ctx.reportCost, returned as the result's `nodefabric.cost` for the run's max_cost.
  let cost = 0;
  const finish = (
    state: "completed" | "failed" | "canceled",
    part: { outputs?: Record<string, unknown>; error?: FabricErrorBody },
  ): AtomicExecuteResult => ({
    node_run_id: request.node_run_id,
    state,
    ...part,
    started_at,
    ended_at: clock.isoNow(),
    extensions: {
      "nodefabric.attempt": attempt,
      "nodefabric.duration_ms": Math.max(0, clock.now() - startedMs),
      ...(cost > 0 ? { "nodefabric.cost": cost } : {}),
    },
  });
  const stoppedResult = (): AtomicExecuteResult => {
    switch (execution.stopped) {
      case "timeout":
        return finish("failed", { error: { code: "timeout", message: `${name} did not finish within ${execution.timeoutMs} ms`, retryable: true } });
      case "shutdown":
        return finish("failed", { error: { code: "executor_unavailable", message: "the executor shut down while the handler was running", retryable: true } });
      default:
        return finish("canceled", { error: { code: "canceled", message: "the node run was canceled" } });
    }
  };

  if (!loaded.validateInputs(request.inputs)) {
    return finish("failed", {
      error: {
        code: "invalid_inputs",
        message: `the inputs do not match the input_schema of ${name}`,
        details: { errors: dedupeIssues(issuesFromAjv(loaded.validateInputs.errors)) },
        retryable: false,
      },
    });
  }
  const signal = execution.controller.signal;
  if (signal.aborted) return stoppedResult();
  if (execution.timeoutMs <= 0) {
    execution.stop("timeout");
    return stoppedResult();
  }

  const deadline = startedMs + execution.timeoutMs;
  const timer = setTimeout(() => execution.stop("timeout"), execution.timeoutMs);
  // Listened to before the handler is called, so a stop always settles the race first.
  const stopped = new Promise<Outcome>((resolve) => signal.addEventListener("abort", () => resolve({ kind: "stopped" }), { once: true }));
  const logger = handlerLogger(options.log, request);
  let fetchFn: typeof globalThis.fetch | undefined;
  let requestFn: AtomicContext["request"] | undefined;
  let egress: AtomicContext["egress"] | undefined;
  const progress_ = progressThrottle(options.onProgress);
  const deltas = new OutputDeltaStream(options.onOutputDelta, attempt);
  const ctx: AtomicContext = {
    run_id: request.run_id,
    node_run_id: request.node_run_id,
    node_type_ref: request.node_type_ref,
    attempt,
    ...(typeof request.run_context?.tenant_id === "string" ? { tenant_id: request.run_context.tenant_id } : {}),
    signal,
    deadline,
    get log() {
      return logger();
    },
    get fetch() {
      return (fetchFn ??= createHandlerFetch(signal, options.fetchTimeoutMs, options.traceUpstream));
    },
    get request() {
      return (requestFn ??= createHandlerRequest(signal, options.fetchTimeoutMs, options.upstreamDispatcher, options.traceUpstream));
    },
    secrets: options.secrets,
    get egress() {
      return (egress ??= createHandlerEgress(signal, options.fetchTimeoutMs, options.egressDispatcher, options.secrets, options.secretBindings, options.traceUpstream, options.configuredEgressDispatcher));
    },
    nodeType,
    ...(request.constraints ? { constraints: request.constraints } : {}),
    reportCost(amount: number) {
      if (typeof amount !== "number" || !Number.isFinite(amount) || amount < 0) {
        throw new TypeError(`ctx.reportCost takes a finite number of at least 0, not ${String(amount)}`);
      }
      cost += amount;
    },
    ...(isPlainObject(request.extensions?.["nodefabric.checkpoint"]) ? { checkpoint: request.extensions["nodefabric.checkpoint"] as JsonObject } : {}),
    async saveCheckpoint(data: JsonObject) {
      if (!isPlainObject(data)) throw new TypeError("ctx.saveCheckpoint takes a JSON object");
      if (!options.saveCheckpoint) throw new Error("this executor was given nowhere to save a checkpoint (no coordinator endpoint in the execute request)");
      await options.saveCheckpoint(jsonCopy(data) as Record<string, unknown>);
    },
    reportProgress(progress: number, total?: number, message?: string) {
      if (typeof progress !== "number" || !Number.isFinite(progress) || progress < 0) {
        throw new TypeError(`ctx.reportProgress takes a finite progress of at least 0, not ${String(progress)}`);
      }
      if (total !== undefined && (typeof total !== "number" || !Number.isFinite(total) || total < 0)) {
        throw new TypeError(`ctx.reportProgress takes a finite total of at least 0, not ${String(total)}`);
      }
      const r: ProgressReport = { progress };
      if (total !== undefined) r.total = total;
      if (typeof message === "string" && message !== "") r.message = message.length > 1024 ? message.slice(0, 1023) + "…" : message;
      progress_.report(r);
    },
    reportOutputDelta(text: string) {
      if (typeof text !== "string") throw new TypeError(`ctx.reportOutputDelta takes a string, not ${describeValue(text)}`);
      deltas.write(text);
    },
  };

  const handler = (loaded.definition as AtomicDefinition<unknown, unknown>).handler;
  let running: Promise<unknown>;
  try {
    running = Promise.resolve(handler(request.inputs, ctx));
  } catch (err) {
    running = Promise.reject(err);
  }
  let settled = false;
  const handled = running.then(
    (value): Outcome => ((settled = true), { kind: "returned", value }),
    (error: unknown): Outcome => ((settled = true), { kind: "threw", error }),
  );
  const outcome = await Promise.race([handled, stopped]);
  clearTimeout(timer);
  progress_.stop();
  // What the handler wrote reaches the run before its result does (bounded, and never past the deadline).
  if (signal.aborted || deltas.idleNow) deltas.stop();
  else await deltas.close(Math.min(OUTPUT_DELTA_CLOSE_MS, deadline - Date.now()));

  if (signal.aborted) {
    if (!settled) {
      options.onAbandoned?.(1);
      options.log.warn({ ...runFields(request), node_type_id: nodeType.node_type_id, reason: execution.stopped }, "handler still running after its signal fired; its result will be discarded");
      void handled.then(() => options.onAbandoned?.(-1));
    }
    return stoppedResult();
  }

  if (outcome.kind === "threw") {
    if (!HandlerError.is(outcome.error)) options.log.debug({ err: outcome.error, ...runFields(request) }, "handler threw");
    const error = errorFromThrown(outcome.error);
    if (error.code === UPSTREAM_UNAVAILABLE) logUpstreamFailure(options.log, request, attempt, error);
    return finish("failed", { error });
  }
  const value = (outcome as { value: unknown }).value;
  if (!isPlainObject(value)) {
    return finish("failed", {
      error: { code: "invalid_outputs", message: `the handler of ${name} returned ${describeValue(value)}, not a JSON object`, retryable: false },
    });
  }
  // A JSON copy is what goes on the wire; validating it (not the live object) checks what the caller will get.
  const outputs = jsonCopy(value);
  if (!isPlainObject(outputs)) {
    return finish("failed", { error: { code: "invalid_outputs", message: `the outputs of ${name} cannot be serialised as JSON`, retryable: false } });
  }
  if (!loaded.validateOutputs(outputs)) {
    return finish("failed", {
      error: {
        code: "invalid_outputs",
        message: `the outputs of ${name} do not match its output_schema`,
        details: { errors: dedupeIssues(issuesFromAjv(loaded.validateOutputs.errors)) },
        retryable: false,
      },
    });
  }
  return finish("completed", { outputs });
}
