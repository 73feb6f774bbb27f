/**
 * `runHandler`: one handler run the way the fabric's Atomic Executor runs it, in the test's process, without a server.
 * It goes through the executor's own code (`@nodefabric/sdk/runtime`): the same schema checks, AtomicContext,
 * deadline, cancel and error mapping, so what a test sees here is what a run in the fabric ends with.
 */
import { randomUUID } from "node:crypto";
import { Agent, type Dispatcher } from "undici";
import type { AtomicExecuteRequest, AtomicExecuteResult } from "@nodefabric/schemas";
import type { AtomicDefinition, HandlerSecrets } from "../types.js";
import { executeAtomic, Execution, silentLogger, type ExecutableDefinition } from "../runtime/atomic-execution.js";
import { prepareAtomic } from "../runtime/definition-check.js";
import { installGlobalDispatcher } from "../runtime/global-dispatcher.js";
import { SecretBindings } from "../runtime/handler-secrets.js";

export interface RunHandlerOptions {
  /** `ctx.attempt` (default 1). */
  attempt?: number;
  /** Caps the time the handler gets (otherwise: the node type's `nodefabric.timeout_ms`, else 30 s). */
  timeoutMs?: number;
  /** Aborting it cancels the execution, as the coordinator's `:cancel` would. */
  signal?: AbortSignal;
  /** What `ctx.secrets.get(name)` answers. */
  secrets?: Record<string, string>;
  /**
   * An undici `MockAgent` that serves the handler's upstreams: `ctx.request` and `ctx.egress.fetch` go through it, and
   * it is undici's global dispatcher while the handler runs (so `import { request } from "undici"` and `ctx.fetch`
   * reach it too). The previous global dispatcher is restored afterwards; the MockAgent is left open for the test to
   * inspect.
   */
  mockAgent?: Dispatcher;
}

/** Options that hold for every run of a harness. */
export type HarnessOptions = Pick<RunHandlerOptions, "timeoutMs" | "secrets" | "mockAgent">;

/** Options of one run through a harness. */
export type HarnessRunOptions = Pick<RunHandlerOptions, "attempt" | "signal">;

/** One node type served in-process, kept open for many runs. */
export interface HandlerHarness {
  /** Executes one NodeRun with these inputs and returns what the executor would answer. */
  run(inputs: Record<string, unknown>, options?: HarnessRunOptions & { nodeRunId?: string }): Promise<AtomicExecuteResult>;
  close(): Promise<void>;
}

/** The executor's defaults: a node type without `nodefabric.timeout_ms` gets 30 s; nothing runs past 5 min. */
const DEFAULT_TIMEOUT_MS = 30_000;
const MAX_TIMEOUT_MS = 300_000;

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function positiveInteger(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= 1;
}

/** The inputs as the executor receives them: a JSON copy, so a test cannot hand the handler what no request can carry. */
function wireInputs(inputs: unknown): Record<string, unknown> {
  if (!isPlainObject(inputs)) throw new TypeError(`runHandler: inputs must be a JSON object, not ${Array.isArray(inputs) ? "an array" : inputs === null ? "null" : `a ${typeof inputs}`}`);
  let copy: unknown;
  try {
    copy = JSON.parse(JSON.stringify(inputs));
  } catch (err) {
    throw new TypeError(`runHandler: inputs cannot be sent as JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  return copy as Record<string, unknown>;
}

function checkHarnessOptions(options: HarnessOptions): void {
  const t = options.timeoutMs;
  if (t !== undefined && (typeof t !== "number" || !Number.isFinite(t) || t < 0)) {
    throw new TypeError(`runHandler: timeoutMs must be a number of milliseconds >= 0, not ${String(t)}`);
  }
  if (options.secrets !== undefined && !isPlainObject(options.secrets)) throw new TypeError("runHandler: secrets must be an object of name to string");
}

/** Opens a harness for an already checked definition (see `prepareAtomic`). */
export function openHandlerHarness(executable: ExecutableDefinition, options: HarnessOptions = {}): HandlerHarness {
  checkHarnessOptions(options);
  const nodeType = executable.definition.nodeType;
  const ext = nodeType.extensions?.["nodefabric.timeout_ms"];
  // As the executor configured with defaultTimeoutMs = maxTimeoutMs = options.timeoutMs would decide.
  const cap = options.timeoutMs ?? MAX_TIMEOUT_MS;
  const timeoutMs = Math.min(positiveInteger(ext) ? ext : (options.timeoutMs ?? DEFAULT_TIMEOUT_MS), cap);
  const secretValues = { ...(options.secrets ?? {}) };
  const secrets: HandlerSecrets = { get: (name) => (Object.hasOwn(secretValues, name) ? secretValues[name] : undefined) };
  // No secret is bound to a host here, as in an executor whose operator bound none: ctx.egress.secretFor refuses them.
  const secretBindings = new SecretBindings();
  const ownDispatcher = options.mockAgent ? undefined : new Agent({ keepAliveTimeout: 10_000 });
  const dispatcher: Dispatcher = options.mockAgent ?? ownDispatcher!;
  const restoreDispatcher = options.mockAgent ? installGlobalDispatcher(options.mockAgent) : undefined;
  const running = new Set<Execution>();
  let closed = false;

  const run: HandlerHarness["run"] = async (inputs, runOptions = {}) => {
    if (closed) throw new Error("runHandler: the harness is closed");
    const attempt = runOptions.attempt ?? 1;
    if (!positiveInteger(attempt)) throw new TypeError(`runHandler: attempt must be an integer >= 1, not ${String(attempt)}`);
    const request: AtomicExecuteRequest = {
      run_id: `run_${randomUUID()}`,
      node_run_id: runOptions.nodeRunId ?? `nr_${randomUUID()}`,
      node_type_ref: { node_type_id: nodeType.node_type_id, version: nodeType.version },
      inputs: wireInputs(inputs),
      extensions: { "nodefabric.attempt": attempt },
    };
    const execution = new Execution(request.node_run_id, timeoutMs);
    const cancel = () => execution.stop("canceled");
    // A cancel that came before the execute ends the run `canceled` at once, as the executor remembers it.
    if (runOptions.signal?.aborted) cancel();
    runOptions.signal?.addEventListener("abort", cancel, { once: true });
    running.add(execution);
    try {
      const result = await executeAtomic({
        loaded: executable,
        request,
        execution,
        attempt,
        log: silentLogger,
        secrets,
        fetchTimeoutMs: DEFAULT_TIMEOUT_MS,
        upstreamDispatcher: dispatcher,
        egressDispatcher: dispatcher,
        secretBindings,
      });
      // What the coordinator would read off the wire.
      return JSON.parse(JSON.stringify(result)) as AtomicExecuteResult;
    } finally {
      running.delete(execution);
      runOptions.signal?.removeEventListener("abort", cancel);
    }
  };

  return {
    run,
    async close() {
      if (closed) return;
      closed = true;
      for (const execution of running) execution.stop("shutdown");
      try {
        await ownDispatcher?.close();
      } finally {
        restoreDispatcher?.();
      }
    },
  };
}

/**
 * Runs one handler as the fabric's Atomic Executor would and returns its AtomicExecuteResult: inputs and outputs are
 * validated against the node type's schemas, and timeout and cancel apply.
 */
// `any`: a definition's handler takes its own input type, which a wider parameter type would refuse.
export async function runHandler(definition: AtomicDefinition<any, any>, inputs: Record<string, unknown>, options: RunHandlerOptions = {}): Promise<AtomicExecuteResult> {
  const harness = openHandlerHarness(prepareAtomic(definition), options);
  try {
    return await harness.run(inputs, options);
  } finally {
    await harness.close();
  }
}
