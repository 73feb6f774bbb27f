/**
 * The children of one composite NodeRun: every `ctx.call`/`ctx.spawn` gets the next call index and with it the
 * deterministic idempotency key `<node_run_id>:<index>`; the calls of one tick go out as one `POST /v1/node-runs`
 * (chunked, one chunk after another), and each child resolves when the composite's event stream reports its `node_run_completed`.
 *
 * Replay needs nothing more: after a crash the same code makes the same calls with the same keys, the coordinator
 * answers with the children that already exist, and the stream (replayed from its start) ends those that finished.
 */
import type { FabricErrorBody, NodeRun, NodeRunCreateSpec, NodeTypeRef, RunEvent } from "@nodefabric/schemas";
import { FabricError } from "../../http/errors.js";
import { clock } from "../../clock.js";
import { runLogFields } from "../../observe/log-fields.js";
import type { CoordinatorClient } from "../../clients/coordinator-client.js";
import { ChildFailedError } from "@nodefabric/sdk";
import { HandlerError } from "@nodefabric/sdk";
import type { CallOptions, ChildRun, JsonObject } from "@nodefabric/sdk";
import { fail } from "../../http/failure-codes.js";

/** How a child ended, as its `node_run_completed` event says. */
export interface ChildEnd {
  state: "completed" | "failed" | "canceled";
  outputs?: JsonObject;
  error?: FabricErrorBody;
}

/** What the composite asked for, kept so that `retry` and `remap` can repeat it. */
export interface ChildRequest {
  node_type_ref: NodeTypeRef;
  inputs: JsonObject;
  spec: NodeRunCreateSpec;
}

const noop = () => undefined;

/**
 * One call, from `spawn` until its child ends: the ChildRun the composite holds, and what the create needs. It is
 * kept for every child in flight (10,000 of them in a fan-out), so it is one object with one promise: the
 * `node_run_id` promise is made only when the composite reads it, which `ctx.call` never does.
 */
class Call implements ChildRun {
  spec!: NodeRunCreateSpec;
  /** JSON length of the spec, to keep each request under the coordinator's body limit. */
  bytes = 0;
  readonly result: Promise<JsonObject>;
  private resolveResult!: (outputs: JsonObject) => void;
  private rejectResult!: (err: unknown) => void;
  /** The child's id once created, or why it never will be: whichever came first. */
  private idState: "pending" | "created" | "failed" = "pending";
  private idValue: unknown;
  private idPromise?: Promise<string>;
  private idWaiter?: { resolve(id: string): void; reject(err: unknown): void };

  constructor(readonly node_type_ref: NodeTypeRef) {
    this.result = new Promise<JsonObject>((resolve, reject) => {
      this.resolveResult = resolve;
      this.rejectResult = reject;
    });
  }

  get node_run_id(): Promise<string> {
    if (!this.idPromise) {
      if (this.idState === "created") this.idPromise = Promise.resolve(this.idValue as string);
      else if (this.idState === "failed") this.idPromise = Promise.reject(this.idValue);
      else this.idPromise = new Promise<string>((resolve, reject) => (this.idWaiter = { resolve, reject }));
      this.idPromise.catch(noop);
    }
    return this.idPromise;
  }

  resolveId(id: string): void {
    if (this.idState !== "pending") return;
    this.idState = "created";
    this.idValue = id;
    this.idWaiter?.resolve(id);
    this.idWaiter = undefined;
  }

  resolve(outputs: JsonObject): void {
    this.resolveResult(outputs);
  }

  /** Rejects the result, and the id too unless the child was created. */
  reject(err: unknown): void {
    if (this.idState === "pending") {
      this.idState = "failed";
      this.idValue = err;
      this.idWaiter?.reject(err);
      this.idWaiter = undefined;
    }
    this.rejectResult(err);
    // A composite may never await a child (or stop awaiting once one fails); that must not crash the executor. The
    // handler goes on in the same turn as the rejection, so no unhandled rejection is reported, and a child that
    // completes never needs one.
    this.result.catch(noop);
  }
}

export interface ChildCallsOptions {
  runId: string;
  parentId: string;
  /** The coordinator to call: the one that sent the latest `:begin` (it can change when another takes the run over). */
  client: () => CoordinatorClient;
  /** The NodeRun's current assignment token (a later `:begin` may bring a fresher one). */
  token: () => string | undefined;
  /** The composite's signal: once it fires, nothing more is sent and pending calls reject. */
  signal: AbortSignal;
  log: { warn(obj: object, msg?: string): void };
}

/** Specs per `POST /v1/node-runs`. */
export const MAX_SPECS_PER_REQUEST = 1000;
/** Bytes of specs per request, well under the coordinator's default 1 MiB body limit. */
const MAX_BYTES_PER_REQUEST = 512 * 1024;
/** How long a create is retried while the coordinator cannot be reached. */
const CREATE_RETRY_WINDOW_MS = 5 * 60_000;

/** Refusals that may concern only some specs of a request: splitting it finds the ones at fault. */
const SPLITTABLE = new Set([
  "constraint_violation",
  "candidate_binding_violation",
  "idempotency_conflict",
  "invalid_request",
  "node_type_not_found",
  "unknown_node_type",
  "payload_too_large",
]);

function isPlainObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Whether repeating the same request later may succeed (unreachable, overloaded, 5xx). */
export function isRetryable(err: unknown): boolean {
  if (!FabricError.is(err)) return false;
  return err.retryable === true || err.statusCode >= 500 || err.statusCode === 429;
}

/** A coordinator refusal as the error a composite's code sees: a HandlerError keeping the code and details. */
export function asHandlerError(err: unknown): HandlerError {
  if (HandlerError.is(err)) return err;
  if (FabricError.is(err)) return new HandlerError(err.code, err.message, { details: err.details, retryable: err.retryable });
  return fail("handler_error", err instanceof Error ? err.message : String(err));
}

/** Waits `ms`, or less when the signal fires. */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = () => {
      clearTimeout(t);
      resolve();
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Creates and tracks the children of one composite NodeRun. */
export class ChildCalls {
  private nextIndex = 0;
  private queue: Call[] = [];
  private flushScheduled = false;
  /** Children created and still open, by id. */
  private readonly waiting = new Map<string, Call>();
  /** Direct children the stream reported created and not yet ended. */
  private readonly open = new Set<string>();
  /** Ends of direct children whose create has not answered yet (always so in a replay). */
  private readonly early = new Map<string, ChildEnd>();
  /** The spec of every child this composite created, by id (what `retry` and `remap` repeat). */
  private readonly specs = new Map<string, NodeRunCreateSpec>();
  private failure?: HandlerError;
  /**
   * The creates under way, one request after another: the coordinator takes a run's creates one at a time anyway,
   * and ten requests of 1,000 specs sent together only wait there, each holding its specs, and then its answer of
   * 1,000 NodeRuns, in memory on both sides.
   */
  private sending: Promise<void> = Promise.resolve();

  constructor(private readonly o: ChildCallsOptions) {}

  /** Takes the next call index; `retry` and `remap` take theirs when asked, so the order never depends on timing. */
  reserveIndex(): number {
    return this.nextIndex++;
  }

  /** What was asked of a child this composite created, if it did. */
  request(nodeRunId: string): ChildRequest | undefined {
    const spec = this.specs.get(nodeRunId);
    return spec && { node_type_ref: spec.node_type_ref, inputs: spec.inputs as JsonObject, spec };
  }

  /** Starts a child; its create goes out with the other calls of this tick. */
  spawn(ref: NodeTypeRef, inputs: JsonObject, options: CallOptions = {}, extra: { index?: number; extensions?: Record<string, unknown>; base?: NodeRunCreateSpec } = {}): ChildRun {
    const index = extra.index ?? this.reserveIndex();
    const childRef = isPlainObject(ref) ? { node_type_id: String(ref.node_type_id), version: String(ref.version) } : (ref as NodeTypeRef);
    const run = new Call(childRef);
    if (!isPlainObject(ref) || typeof ref.node_type_id !== "string" || typeof ref.version !== "string") {
      run.reject(fail("invalid_request", "ctx.call needs a node type ref { node_type_id, version }"));
      return run;
    }
    if (!isPlainObject(inputs)) {
      run.reject(fail("invalid_request", `the inputs of a call to ${ref.node_type_id} must be a JSON object`));
      return run;
    }
    if (this.failure || this.o.signal.aborted) {
      run.reject(this.failure ?? fail("canceled", "the composite was canceled"));
      return run;
    }
    const spec: NodeRunCreateSpec = { ...(extra.base ?? {}), node_type_ref: childRef, inputs, idempotency_key: `${this.o.parentId}:${index}` };
    if (options.constraints) spec.constraints = options.constraints;
    if (options.metadata) spec.metadata = options.metadata;
    if (options.candidateSet) {
      const set = options.candidateSet;
      spec.candidate_set_id = set.candidate_set_id;
      spec.binding_decision = { subtask_id: set.subtask_id, chosen_node_type_ref: childRef, candidate_set_id: set.candidate_set_id };
    }
    if (extra.extensions) spec.extensions = { ...(spec.extensions ?? {}), ...extra.extensions };
    let bytes: number;
    try {
      bytes = JSON.stringify(spec).length;
    } catch (err) {
      run.reject(fail("invalid_request", `the inputs of a call to ${ref.node_type_id} are not JSON: ${(err as Error).message}`));
      return run;
    }
    run.spec = spec;
    run.bytes = bytes;
    this.queue.push(run);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
    return run;
  }

  /** Learns from the composite's event stream: which children are its own, and how they ended. */
  onEvent(e: RunEvent): void {
    const id = e.node_run_id;
    if (id === undefined) return;
    if (e.type === "node_run_created") {
      if (e.data?.parent_node_run_id === this.o.parentId) this.open.add(id);
      return;
    }
    if (e.type !== "node_run_completed" || !this.open.has(id)) return;
    this.open.delete(id);
    const data = (e.data ?? {}) as Record<string, unknown>;
    const end: ChildEnd = { state: data.state as ChildEnd["state"], outputs: data.outputs as JsonObject | undefined, error: data.error as FabricErrorBody | undefined };
    const pending = this.waiting.get(id);
    if (pending) {
      this.waiting.delete(id);
      this.settle(pending, id, end);
    } else {
      this.early.set(id, end);
    }
  }

  /** Rejects every pending and future call (the composite was canceled or ended). */
  failAll(err: HandlerError): void {
    this.failure ??= err;
    const queued = this.queue;
    this.queue = [];
    for (const p of queued) p.reject(err);
    for (const p of this.waiting.values()) p.reject(err);
    this.waiting.clear();
    this.early.clear();
  }

  private settle(p: Call, id: string, end: ChildEnd): void {
    if (end.state === "completed") {
      p.resolve(end.outputs ?? {});
      return;
    }
    const state = end.state === "canceled" ? "canceled" : "failed";
    const error = end.error ?? { code: state === "canceled" ? "canceled" : "handler_error", message: `the child ${state}` };
    p.reject(new ChildFailedError({ node_run_id: id, node_type_ref: p.node_type_ref, error, state }));
  }

  private flush(): void {
    this.flushScheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    let chunk: Call[] = [];
    let bytes = 0;
    for (const p of batch) {
      if (chunk.length > 0 && (chunk.length >= MAX_SPECS_PER_REQUEST || bytes + p.bytes > MAX_BYTES_PER_REQUEST)) {
        this.sendInTurn(chunk);
        chunk = [];
        bytes = 0;
      }
      chunk.push(p);
      bytes += p.bytes;
    }
    this.sendInTurn(chunk);
  }

  /** Sends a request once those before it have been answered. */
  private sendInTurn(items: Call[]): void {
    const send = () => this.send(items);
    this.sending = this.sending.then(send, send);
  }

  private async send(items: Call[]): Promise<void> {
    let created: NodeRun[];
    try {
      created = await this.create(items.map((p) => p.spec));
    } catch (err) {
      if (this.failure) {
        for (const p of items) p.reject(this.failure);
        return;
      }
      // The coordinator creates all specs of a request or none; a refusal that may concern only some of them is
      // narrowed down by halves, so each call succeeds or fails as if it had been sent alone.
      if (items.length > 1 && FabricError.is(err) && SPLITTABLE.has(err.code)) {
        const mid = items.length >> 1;
        await Promise.all([this.send(items.slice(0, mid)), this.send(items.slice(mid))]);
        return;
      }
      const e = asHandlerError(err);
      for (const p of items) p.reject(e);
      return;
    }
    for (let k = 0; k < items.length; k++) {
      const p = items[k];
      const nr = created[k];
      if (!nr) {
        p.reject(fail("upstream_error", "the coordinator answered fewer node runs than it was asked for"));
        continue;
      }
      const id = nr.node_run_id;
      this.specs.set(id, p.spec);
      p.resolveId(id);
      if (this.failure) {
        p.reject(this.failure);
        continue;
      }
      const end = this.early.get(id);
      if (end) {
        this.early.delete(id);
        this.settle(p, id, end);
      } else {
        this.waiting.set(id, p);
      }
    }
  }

  /** One create request, repeated while the coordinator is unreachable or overloaded (the keys make that safe). */
  private async create(specs: NodeRunCreateSpec[]): Promise<NodeRun[]> {
    const until = clock.now() + CREATE_RETRY_WINDOW_MS;
    let delay = 50;
    for (;;) {
      if (this.failure) throw this.failure;
      try {
        return await this.o.client().createNodeRuns({ run_id: this.o.runId, parent_node_run_id: this.o.parentId, node_runs: specs }, this.o.token());
      } catch (err) {
        if (!isRetryable(err) || clock.now() + delay > until || this.o.signal.aborted) throw err;
        this.o.log.warn({ err: (err as Error).message, ...runLogFields(this.o.runId, this.o.parentId), retry_in_ms: delay }, "creating children failed; retrying");
        await pause(delay, this.o.signal);
        delay = Math.min(delay * 2, 2000);
      }
    }
  }
}
