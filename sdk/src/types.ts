/**
 * The types a handler author writes against: the definition of a node type and the context a handler runs in.
 */
import type { CandidateSet, ConstraintEnvelope, EvaluationResult, Metadata, NodeType, NodeTypeRef, RecoveryAction, SubtaskSpec } from "@nodefabric/schemas";

/** Any JSON value. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object: what inputs and outputs are on the wire. */
export type JsonObject = { [key: string]: JsonValue };

/** A NodeType as a handler package declares it: `kind` is set by `defineAtomic` (or `defineComposite`). */
export type NodeTypeDefinition = Omit<NodeType, "kind">;

/** One logging method: pino style, an object of fields and/or a message. */
export interface LogFn {
  (msg: string): void;
  (obj: object, msg?: string): void;
}

/** The handler's logger; every line carries the run_id and node_run_id. */
export interface HandlerLogger {
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
}

/** Secrets the executor was configured with; a handler reads them by name. */
export interface HandlerSecrets {
  get(name: string): string | undefined;
}

/** Options of `ctx.request`. */
export interface UpstreamRequestOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
}

/** The answer of `ctx.request`; read the body once, with `text()` or `json()`. */
export interface UpstreamResponse {
  readonly statusCode: number;
  readonly headers: Record<string, string | string[] | undefined>;
  text(): Promise<string>;
  json(): Promise<unknown>;
}

/**
 * Outbound calls under the executor operator's egress policy: what a handler that lets a published node type choose
 * its target (such as `http.request`) must use instead of `fetch` and `secrets`.
 */
export interface HandlerEgress {
  /**
   * `fetch` bound to the execution (as `ctx.fetch`) whose every connection, redirects included, goes through the
   * egress policy. A refused connection rejects with a HandlerError `egress_denied` (not retryable) naming the host,
   * the address and why. Each request is bounded by the executor's per-request time-out (30 s), body included; a
   * request that streams for longer (an MCP tool call's answer) passes `timeoutMs` (milliseconds) in its init to
   * replace it, and the execution's deadline still bounds it. A request made after the execution was stopped may pass
   * `final: true` (telling an upstream the call was canceled): it is then not aborted with the execution, still goes
   * through the egress policy, and gets at most 5 s. A request to a URL that comes from the operator's own
   * configuration, never from a run or a node type (an LLM profile's `base_url`), may pass `operatorConfigured: true`:
   * it may then also reach loopback, private, link-local and CGNAT addresses (a model server on the same host or
   * network), as `executor.egress.allow_private` allows; cloud metadata, unspecified and reserved addresses stay
   * refused unless the operator's allow lists name them.
   */
  readonly fetch: typeof globalThis.fetch;
  /**
   * The secret `name` for a request to `url`: undefined when the executor has no such secret; throws a HandlerError
   * `egress_denied` (not retryable) when the operator did not bind it to `url`'s host, or bound it to none.
   */
  secretFor(name: string, url: URL): string | undefined;
}

/** What an atomic handler gets besides its inputs. */
export interface AtomicContext {
  readonly run_id: string;
  readonly node_run_id: string;
  readonly node_type_ref: NodeTypeRef;
  /** 1 on the first execution of this NodeRun, then 2, 3… on retries. */
  readonly attempt: number;
  /**
   * The run's tenant (`run_context.tenant_id`): with authentication on, the tenant of the token that started the run,
   * never one the request claimed. Undefined for a run without one.
   */
  readonly tenant_id?: string;
  /** Fires on cancel, on timeout and when the executor shuts down; pass it to anything long. */
  readonly signal: AbortSignal;
  /** Epoch milliseconds after which the result is discarded. */
  readonly deadline: number;
  readonly log: HandlerLogger;
  /** `fetch` bound to this execution: aborted with `signal`, bounded by a per-request timeout. */
  readonly fetch: typeof globalThis.fetch;
  /**
   * A faster upstream client than `fetch` (undici's request API over the executor's keep-alive pool), bound to this
   * execution the same way. Tests mock it with an undici MockAgent (the executor's `upstreamDispatcher` option).
   */
  readonly request: (url: string | URL, options?: UpstreamRequestOptions) => Promise<UpstreamResponse>;
  readonly secrets: HandlerSecrets;
  /**
   * The NodeType being executed: the definition's own, or, for a `template` definition, the NodeType published in the
   * registry that names it in `extensions["nodefabric.implementation"]` (its extensions configure the handler).
   */
  readonly nodeType: NodeType;
  /**
   * Reports what this execution cost, in the unit the run's `constraints.budgets.max_cost` is written in (for example
   * cents or tokens). Calls add up; the total reaches the coordinator as the result's `extensions["nodefabric.cost"]`,
   * counted whether the handler succeeds or fails, and a run whose total passes `max_cost` fails with `budget_exceeded`.
   */
  reportCost(amount: number): void;
  /**
   * Reports how far this execution is: `progress` (growing), `total` when known, and a short `message`. The run
   * records it as a `node_run_progress` event (an extension), which event streams, the console and the fabric's MCP
   * server pass on. Best effort: reports are coalesced (at most about four a second reach the coordinator, the latest
   * one kept), and dropped when the executor was given nowhere to send them.
   */
  reportProgress(progress: number, total?: number, message?: string): void;
  /**
   * Reports text of the answer as it is written (an LLM's tokens as they stream). The run records it as
   * `node_run_output_delta` events (an extension) that event streams, `fabric runs follow`, the console and the
   * fabric's MCP server pass on; concatenated, one attempt's deltas are the text written. Coalesced (about ten deltas
   * a second), in order, bounded per execution (500 deltas, 256 Ki characters; the last one says `truncated`), sent
   * before the result; dropped when the executor was given nowhere to send them. It never changes the outputs.
   */
  reportOutputDelta(text: string): void;
  /**
   * What an earlier execution of this NodeRun saved with `saveCheckpoint` (a retry, or the execution sent again after
   * its executor was lost), or undefined on a first execution.
   */
  readonly checkpoint?: JsonObject;
  /**
   * Keeps `data` (a JSON object, at most 16 KiB, no secrets: readers of the NodeRun see it) with the NodeRun, so that
   * its next execution resumes from it as `ctx.checkpoint` instead of starting again (an upstream task's id). Resolves
   * once the coordinator stored it; rejects when it could not be (the executor was given nowhere to save it, or the
   * NodeRun is no longer running).
   */
  saveCheckpoint(data: JsonObject): Promise<void>;
  /** Egress-checked `fetch` and host-bound secrets (`executor.egress`, `executor.secret_hosts`); see HandlerEgress. */
  readonly egress: HandlerEgress;
  /** The constraint envelope in force for this NodeRun (budgets, gates, extensions), when the coordinator sent one. */
  readonly constraints?: ConstraintEnvelope;
}

/** An atomic handler: inputs in, outputs (a JSON object) out; throw `HandlerError` to fail with a code. */
export type HandlerFn<I = JsonObject, O = JsonObject> = (inputs: I, ctx: AtomicContext) => Promise<O> | O;

/** The kinds of node a definition can declare. */
export type DefinitionKind = "atomic" | "composite";

/** What every definition carries, whatever its kind; executors check `sdkVersion` against their own. */
export interface FabricDefinition {
  readonly kind: DefinitionKind;
  /** Version of the SDK that made the definition. */
  readonly sdkVersion: string;
  readonly nodeType: NodeType;
}

/** An atomic node type and its handler, as made by `defineAtomic`. */
export interface AtomicDefinition<I = JsonObject, O = JsonObject> extends FabricDefinition {
  readonly kind: "atomic";
  readonly nodeType: NodeType & { kind: "atomic" };
  readonly handler: HandlerFn<I, O>;
  /**
   * True when the handler may also execute node types published in the registry whose
   * `extensions["nodefabric.implementation"]` names this definition, under their own schemas (see `ctx.nodeType`).
   */
  readonly template?: boolean;
}

/** One line of a set's `index.json`: a node type and the file its NodeType is in, relative to the set's directory. */
export interface AtomicSetEntry {
  readonly node_type_id: string;
  readonly version: string;
  readonly file: string;
}

/**
 * Many atomic node types that share one handler, their NodeTypes kept as JSON files in a directory (a package
 * generated from a large API), as made by `defineAtomicSet`. Only the small index is held in memory; an executor
 * reads a node type's file when it is first asked to run it, and the handler reads which one it runs as `ctx.nodeType`.
 */
export interface AtomicSet<I = JsonObject, O = JsonObject> {
  readonly kind: "atomic-set";
  /** Version of the SDK that made the set. */
  readonly sdkVersion: string;
  /** Absolute path of the directory holding `index.json` and the NodeType files. */
  readonly directory: string;
  /** The node types of the set, as `index.json` lists them. */
  readonly entries: readonly AtomicSetEntry[];
  readonly handler: HandlerFn<I, O>;
  /** Reads and returns the NodeType of one member from its file, each time (the set keeps none of them). */
  load(nodeTypeId: string, version: string): NodeType & { kind: "atomic" };
  /** One member as an ordinary atomic definition (for `runHandler` in the package's tests); `version` may be left out when the id has one. */
  get(nodeTypeId: string, version?: string): AtomicDefinition<I, O>;
}

/** Options of `ctx.call` and `ctx.spawn`. */
export interface CallOptions {
  /** The candidate set the node type was chosen from; the child is then bound to it (checked by the coordinator). */
  candidateSet?: CandidateSet;
  /** Constraints for the child, merged with the run's and the node type's (the strictest wins). */
  constraints?: ConstraintEnvelope;
  metadata?: Metadata;
}

/** A child NodeRun started by `ctx.spawn`. */
export interface ChildRun {
  /** The child's id, once the coordinator created it. */
  readonly node_run_id: Promise<string>;
  readonly node_type_ref: NodeTypeRef;
  /** The child's outputs; rejects with a `ChildFailedError` when it failed or was canceled. */
  readonly result: Promise<JsonObject>;
}

/** What a composite's `run` gets besides its inputs. */
export interface CompositeContext {
  readonly run_id: string;
  readonly node_run_id: string;
  readonly node_type_ref: NodeTypeRef;
  /** Fires when the composite is canceled; pending calls then reject. */
  readonly signal: AbortSignal;
  readonly log: HandlerLogger;
  /** The constraint envelope in force for this composite (structural bounds, budgets, gates), when one was sent. */
  readonly constraints?: ConstraintEnvelope;
  /** Runs a child NodeRun and resolves with its outputs; rejects with a `ChildFailedError` when it fails. */
  call(ref: NodeTypeRef, inputs: JsonObject, options?: CallOptions): Promise<JsonObject>;
  /** Starts a child NodeRun without waiting for it. */
  spawn(ref: NodeTypeRef, inputs: JsonObject, options?: CallOptions): ChildRun;
  /** Asks Selection for a bounded, ranked candidate set for a subtask. */
  select(subtask: SubtaskSpec, constraints?: ConstraintEnvelope): Promise<CandidateSet>;
  /**
   * Reports an evaluation of a child NodeRun and applies the recovery action: `retry` and `remap` run a new child
   * and resolve with its outputs, `abort` rejects (failing the composite unless caught), the others resolve undefined.
   */
  evaluate(child: string, result: EvaluationResult, recoveryAction?: RecoveryAction): Promise<JsonObject | undefined>;
  /**
   * The problems of a declarative plan (the format of `extensions["nodefabric.plan"]`: steps with `after`, `when`,
   * `for_each` and JSONata references), each a JSON Pointer into the plan and a message; none when it compiles.
   * Absent on executors from before it existed.
   */
  checkPlan?(plan: unknown): Array<{ path: string; message: string }>;
  /**
   * Runs a declarative plan with `inputs` as its `inputs`, its steps as this composite's children (independent steps
   * in parallel), and resolves with its outputs; rejects when the plan is invalid or a step fails.
   */
  runPlan?(plan: JsonObject, inputs: JsonObject, options?: { onChild?: (child: ChildRun) => void }): Promise<JsonObject>;
}

/** A composite's code: inputs in, outputs (a JSON object) out, children through `ctx`. */
export type CompositeFn<I = JsonObject, O = JsonObject> = (inputs: I, ctx: CompositeContext) => Promise<O>;

/** A composite node type and its code, as made by `defineComposite`. */
export interface CompositeDefinition<I = JsonObject, O = JsonObject> extends FabricDefinition {
  readonly kind: "composite";
  readonly nodeType: NodeType & { kind: "composite" };
  readonly run: CompositeFn<I, O>;
}
