/**
 * @nodefabric/core/testing: run a handler the way the fabric runs it, from a handler package's own tests.
 */
import type { AtomicExecuteResult } from "@nodefabric/schemas";
import { buildAtomicExecutor } from "../services/atomic-executor/index.js";
import { handlersFromDefinitions } from "../services/atomic-executor/handler-loader.js";
import { newId } from "../ids.js";
import type { AtomicDefinition } from "../sdk/types.js";

export interface RunHandlerOptions {
  /** `ctx.attempt` (default 1). */
  attempt?: number;
  /** Caps the time the handler gets (otherwise: the node type's `nodefabric.timeout_ms`, else 30 s). */
  timeoutMs?: number;
  /** Aborting it cancels the execution, as the coordinator's `:cancel` would. */
  signal?: AbortSignal;
  /** What `ctx.secrets.get(name)` answers. */
  secrets?: Record<string, string>;
}

/**
 * Runs one handler through a real in-process Atomic Executor and returns its AtomicExecuteResult:
 * inputs and outputs are validated against the node type's schemas, and timeout and cancel apply.
 */
// `any`: a definition's handler takes its own input type, which a wider parameter type would refuse.
export async function runHandler(definition: AtomicDefinition<any, any>, inputs: Record<string, unknown>, options: RunHandlerOptions = {}): Promise<AtomicExecuteResult> {
  const handlers = handlersFromDefinitions([definition]);
  const nodeType = definition.nodeType;
  const app = await buildAtomicExecutor({
    logger: false,
    handlers,
    secrets: options.secrets,
    ...(options.timeoutMs !== undefined
      ? { defaultTimeoutMs: options.timeoutMs, maxTimeoutMs: options.timeoutMs }
      : {}),
  });
  const nodeRunId = newId("nr");
  const cancel = () => {
    void app.inject({ method: "POST", url: `/v1/atomic-node-runs/${encodeURIComponent(nodeRunId)}:cancel` });
  };
  try {
    await app.ready();
    if (options.signal?.aborted) cancel();
    options.signal?.addEventListener("abort", cancel, { once: true });
    const res = await app.inject({
      method: "POST",
      url: "/v1/atomic-node-runs:execute",
      headers: { "content-type": "application/json" },
      payload: {
        run_id: newId("run"),
        node_run_id: nodeRunId,
        node_type_ref: { node_type_id: nodeType.node_type_id, version: nodeType.version },
        inputs,
        extensions: { "nodefabric.attempt": options.attempt ?? 1 },
      },
    });
    const body = res.json() as AtomicExecuteResult & { error?: { code: string; message: string } };
    if (res.statusCode !== 200) {
      throw new Error(`runHandler: the executor answered ${res.statusCode} ${body.error?.code ?? ""}: ${body.error?.message ?? res.body}`);
    }
    return body;
  } finally {
    options.signal?.removeEventListener("abort", cancel);
    await app.close();
  }
}
