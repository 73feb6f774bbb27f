/**
 * `runHandler`: one handler run through a real in-process Atomic Executor, the way the coordinator would run it.
 */
import type { FastifyInstance } from "fastify";
import type { Dispatcher } from "undici";
import type { AtomicExecuteResult, NodeType } from "@nodefabric/schemas";
import { buildAtomicExecutor } from "../services/atomic-executor/index.js";
import { handlersFromDefinitions, type LoadedHandlers } from "../services/atomic-executor/handler-loader.js";
import { newId } from "../ids.js";
import type { AtomicDefinition } from "../sdk/types.js";
import { installGlobalDispatcher } from "./global-dispatcher.js";

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
   * An undici `MockAgent` that serves the handler's upstreams: `ctx.request` goes through it, and it is undici's
   * global dispatcher while the handler runs (so `import { request } from "undici"` and `ctx.fetch` reach it too).
   * The previous global dispatcher is restored afterwards; the MockAgent is left open for the test to inspect.
   */
  mockAgent?: Dispatcher;
}

/** Options that hold for every run of a harness (one executor). */
export type HarnessOptions = Pick<RunHandlerOptions, "timeoutMs" | "secrets" | "mockAgent">;

/** Options of one run through a harness. */
export type HarnessRunOptions = Pick<RunHandlerOptions, "attempt" | "signal">;

/** An in-process executor serving one node type, kept open for many runs. */
export interface HandlerHarness {
  /** Executes one NodeRun with these inputs and returns the executor's answer. */
  run(inputs: Record<string, unknown>, options?: HarnessRunOptions & { nodeRunId?: string }): Promise<AtomicExecuteResult>;
  close(): Promise<void>;
}

/** Starts an executor (no socket: requests go through fastify's inject) serving `handlers`, for runs of `nodeType`. */
export async function openHandlerHarness(handlers: LoadedHandlers, nodeType: Pick<NodeType, "node_type_id" | "version">, options: HarnessOptions = {}): Promise<HandlerHarness> {
  const app: FastifyInstance = await buildAtomicExecutor({
    logger: false,
    handlers,
    secrets: options.secrets,
    upstreamDispatcher: options.mockAgent,
    ...(options.timeoutMs !== undefined ? { defaultTimeoutMs: options.timeoutMs, maxTimeoutMs: options.timeoutMs } : {}),
  });
  let restoreDispatcher: (() => void) | undefined;
  try {
    await app.ready();
    // Installed only once the executor is built, so a build error leaves the global dispatcher untouched.
    restoreDispatcher = options.mockAgent ? installGlobalDispatcher(options.mockAgent) : undefined;
  } catch (err) {
    await app.close();
    throw err;
  }

  const run: HandlerHarness["run"] = async (inputs, runOptions = {}) => {
    const nodeRunId = runOptions.nodeRunId ?? newId("nr");
    const cancel = () => {
      void app.inject({ method: "POST", url: `/v1/atomic-node-runs/${encodeURIComponent(nodeRunId)}:cancel` });
    };
    // A cancel that arrives before the execute is remembered by the executor, so the run ends `canceled` at once.
    if (runOptions.signal?.aborted) cancel();
    runOptions.signal?.addEventListener("abort", cancel, { once: true });
    try {
      const res = await app.inject({
        method: "POST",
        url: "/v1/atomic-node-runs:execute",
        headers: { "content-type": "application/json" },
        payload: {
          run_id: newId("run"),
          node_run_id: nodeRunId,
          node_type_ref: { node_type_id: nodeType.node_type_id, version: nodeType.version },
          inputs,
          extensions: { "nodefabric.attempt": runOptions.attempt ?? 1 },
        },
      });
      const body = res.json() as AtomicExecuteResult & { error?: { code: string; message: string } };
      if (res.statusCode !== 200) {
        throw new Error(`runHandler: the executor answered ${res.statusCode} ${body.error?.code ?? ""}: ${body.error?.message ?? res.body}`);
      }
      return body;
    } finally {
      runOptions.signal?.removeEventListener("abort", cancel);
    }
  };

  let closed = false;
  return {
    run,
    async close() {
      if (closed) return;
      closed = true;
      try {
        await app.close();
      } finally {
        restoreDispatcher?.();
      }
    },
  };
}

/**
 * Runs one handler through a real in-process Atomic Executor and returns its AtomicExecuteResult:
 * inputs and outputs are validated against the node type's schemas, and timeout and cancel apply.
 */
// `any`: a definition's handler takes its own input type, which a wider parameter type would refuse.
export async function runHandler(definition: AtomicDefinition<any, any>, inputs: Record<string, unknown>, options: RunHandlerOptions = {}): Promise<AtomicExecuteResult> {
  const harness = await openHandlerHarness(handlersFromDefinitions([definition]), definition.nodeType, options);
  try {
    return await harness.run(inputs, options);
  } finally {
    await harness.close();
  }
}
