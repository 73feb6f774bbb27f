/**
 * How the coordinator reaches executors: one pooled HttpClient per executor endpoint, and a token bound to the
 * executor each call goes to, so that an executor cannot replay what it was sent against another.
 */
import type { AtomicExecuteRequest, AtomicExecuteResult, CompositeBeginRequest, CompositeBeginResponse } from "@nodefabric/schemas";
import { HttpClient, MAX_EXECUTOR_ANSWER_BYTES } from "./http-client.js";
import type { ExecuteOptions, ExecutorCaller } from "../engine-ports.js";
import type { AtomicExecutorApi } from "../in-process.js";
import type { ServiceTokens } from "./service-tokens.js";

/** Calls executors over HTTP, keeping one connection pool per endpoint. */
export class HttpExecutorCaller implements ExecutorCaller {
  private readonly clients = new Map<string, HttpClient>();

  /** With `tokens`, each call carries this coordinator's token for the executor's kind, bound to that executor. */
  constructor(private readonly tokens?: ServiceTokens) {}

  private async auth(kind: "atomic-executor" | "composite-executor", endpoint: string, extra?: Record<string, string>): Promise<Record<string, string> | undefined> {
    if (!this.tokens) return extra;
    return { ...extra, authorization: `Bearer ${await this.tokens.token(kind, endpoint)}` };
  }

  private client(endpoint: string): HttpClient {
    let c = this.clients.get(endpoint);
    if (!c) {
      c = new HttpClient(endpoint, { connections: 128, headersTimeoutMs: 0, bodyTimeoutMs: 0, maxResponseBytes: MAX_EXECUTOR_ANSWER_BYTES });
      this.clients.set(endpoint, c);
    }
    return c;
  }

  async execute(endpoint: string, body: AtomicExecuteRequest, options: ExecuteOptions): Promise<AtomicExecuteResult> {
    return this.client(endpoint).json<AtomicExecuteResult>("POST", "/v1/atomic-node-runs:execute", body, {
      headers: await this.auth("atomic-executor", endpoint, { "idempotency-key": options.idempotencyKey }),
      timeoutMs: options.timeoutMs,
    });
  }

  async cancel(endpoint: string, nodeRunId: string): Promise<void> {
    try {
      await this.client(endpoint).request("POST", `/v1/atomic-node-runs/${encodeURIComponent(nodeRunId)}:cancel`, undefined, { headers: await this.auth("atomic-executor", endpoint) });
    } catch {
      // Best effort: the NodeRun is already canceled in the store; a late result is ignored.
    }
  }

  async begin(endpoint: string, body: CompositeBeginRequest): Promise<CompositeBeginResponse> {
    return this.client(endpoint).json<CompositeBeginResponse>("POST", "/v1/composite-node-runs:begin", body, { timeoutMs: 30_000, headers: await this.auth("composite-executor", endpoint) });
  }

  async cancelComposite(endpoint: string, nodeRunId: string): Promise<void> {
    try {
      await this.client(endpoint).request("POST", `/v1/composite-node-runs/${encodeURIComponent(nodeRunId)}:cancel`, undefined, { headers: await this.auth("composite-executor", endpoint) });
    } catch {
      // Best effort, as for atomic cancels.
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.clients.values()].map((c) => c.close()));
  }
}

/**
 * Calls executors of this process directly and the others over HTTP. An in-process call copies only what user code
 * receives and could change: the inputs, handed to the handler as they are. The rest of the request is read, never
 * changed, by the executor, and the result needs no copy: the executor's runtime answers a JSON copy of what the
 * handler returned (sdk/src/runtime/atomic-execution.ts), and neither the executor nor the engine changes a result
 * once answered. So a run is copied once across the call, not twice over.
 */
export class LocalFirstExecutorCaller implements ExecutorCaller {
  constructor(
    private readonly local: Map<string, AtomicExecutorApi>,
    private readonly remote: ExecutorCaller & { close?: () => Promise<void> },
  ) {}

  /** Each endpoint's origin, parsed once: a dispatch names one of a few executors, and a URL parse costs more than a lookup. */
  private readonly origins = new Map<string, string | null>();

  private find(endpoint: string): AtomicExecutorApi | undefined {
    let origin = this.origins.get(endpoint);
    if (origin === undefined) {
      try {
        origin = new URL(endpoint).origin;
      } catch {
        origin = null;
      }
      if (this.origins.size >= 1_000) this.origins.clear();
      this.origins.set(endpoint, origin);
    }
    return origin === null ? undefined : this.local.get(origin);
  }

  inProcess(endpoint: string): boolean {
    return this.find(endpoint) !== undefined;
  }

  async execute(endpoint: string, body: AtomicExecuteRequest, options: ExecuteOptions): Promise<AtomicExecuteResult> {
    const api = this.find(endpoint);
    if (!api) return this.remote.execute(endpoint, body, options);
    return api.execute({ ...body, inputs: structuredClone(body.inputs) }, options.idempotencyKey, { assignmentToken: options.assignmentToken });
  }

  answerRecorded(endpoint: string, idempotencyKey: string): void {
    this.find(endpoint)?.forget(idempotencyKey);
  }

  async cancel(endpoint: string, nodeRunId: string): Promise<void> {
    const api = this.find(endpoint);
    if (api) api.cancel(nodeRunId);
    else await this.remote.cancel(endpoint, nodeRunId);
  }

  begin(endpoint: string, body: CompositeBeginRequest): Promise<CompositeBeginResponse> {
    return this.remote.begin(endpoint, body);
  }

  cancelComposite(endpoint: string, nodeRunId: string): Promise<void> {
    return this.remote.cancelComposite(endpoint, nodeRunId);
  }

  async close(): Promise<void> {
    await this.remote.close?.();
  }
}
