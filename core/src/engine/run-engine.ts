/**
 * The coordinator's engine: the Run and NodeRun state machine, dispatch with leases, retries, cancel, budgets,
 * policy checkpoints and approvals. Every state change is written with its events through the TickWriter (one
 * transaction per tick) before anything acts on it; live followers hear of events only after they are durable.
 */
import { createHash } from "node:crypto";
import type {
  AtomicExecuteRequest,
  AtomicExecuteResult,
  CandidateSet,
  CompositeBeginRequest,
  CompositeBeginResponse,
  NodeRunsCreateRequest,
  ConstraintEnvelope,
  FabricErrorBody,
  NodeRun,
  NodeRunCompleteRequest,
  NodeRunEvaluationReportRequest,
  NodeType,
  NodeTypeRef,
  PolicyDecision,
  PolicyDecisionRequest,
  Run,
  RunContext,
  RunEvent,
  RunStartRequest,
} from "@nodefabric/schemas";
import { clock } from "../clock.js";
import { canonicalJson } from "../canonical-json.js";
import { newId } from "../ids.js";
import { FabricError } from "../http/errors.js";
import { TERMINAL_STATES, type ApprovalRecord, type NewRunEvent, type NodeRunRecord, type RunRecord, type RunStore, type WriteBatch } from "../store/run-store.js";
import { EventHub } from "./event-hub.js";
import { TickWriter } from "./tick-writer.js";
import type { NodeTypeResolver } from "./node-type-resolver.js";
import { backoffMs, retryPolicyOf, timeoutOf } from "./retry-policy.js";
import { mergeConstraints } from "./constraints.js";
import { AssignmentTokens } from "./assignment-tokens.js";
import type { ValidateFunction } from "ajv";
import { compileHandlerSchema, createHandlerAjv } from "../services/atomic-executor/handler-schemas.js";
import { dedupeIssues, issuesFromAjv } from "../http/validation.js";

/** Asks the PDP; throws when it cannot be reached. */
export interface PolicyClient {
  decide(request: PolicyDecisionRequest): Promise<PolicyDecision>;
}

/** Sends work to executors. */
export interface ExecutorCaller {
  /** Executes an atomic NodeRun; throws a FabricError for transport failures and non-2xx answers. */
  execute(endpoint: string, body: AtomicExecuteRequest, options: { idempotencyKey: string; timeoutMs: number }): Promise<AtomicExecuteResult>;
  /** Asks an atomic executor to cancel a NodeRun in flight; never throws. */
  cancel(endpoint: string, nodeRunId: string): Promise<void>;
  /** Hands a composite NodeRun to a composite executor; throws a FabricError for transport failures and non-2xx. */
  begin(endpoint: string, body: CompositeBeginRequest): Promise<CompositeBeginResponse>;
  /** Asks a composite executor to stop driving a NodeRun; never throws. */
  cancelComposite(endpoint: string, nodeRunId: string): Promise<void>;
}

export interface Logger {
  info(obj: unknown, msg?: string): void;
  warn(obj: unknown, msg?: string): void;
  error(obj: unknown, msg?: string): void;
}

export interface RunEngineOptions {
  store: RunStore;
  resolver: NodeTypeResolver;
  executors: ExecutorCaller;
  policy?: PolicyClient;
  log: Logger;
  /** Stable id of this coordinator; leases it held before a restart are reclaimed at start. */
  instanceId: string;
  /** Lease of a claim before the NodeRun is dispatched (ms). */
  leaseMs?: number;
  /** NodeRuns in flight at once from this coordinator. */
  maxInFlight?: number;
  /** How often recovery (deadlines, expired leases, backoff) runs (ms). */
  tickMs?: number;
  /** Stored candidate sets, to check bindings of children against them. */
  selection?: { getCandidateSet(id: string): Promise<CandidateSet> };
  /** Mints assignment tokens for composite NodeRuns. */
  assignmentTokens?: AssignmentTokens;
  /** A composite that makes no progress for this long gets its `:begin` sent again (ms, default leaseMs). */
  compositeLeaseMs?: number;
}

/** Who is asking: stamped on runs and checked on reads. */
export interface Caller {
  /** A tenant sees only its runs; `null` (an anonymous caller) sees only runs without one; absent sees all. */
  tenant_id?: string | null;
  /** The authenticated subject and its issuer: stamped on the runs it starts, for the PDP. */
  sub?: string;
  iss?: string;
  /** Set for a caller who presented a valid token. */
  authenticated?: true;
  /** An assignment token: the caller may act for this one composite NodeRun only. */
  assignment?: { run_id: string; node_run_id: string };
}

/** The caller's identity as it goes into a run's `run_context` (and so to the PDP as the principal). */
function stampIdentity(runContext: RunContext, caller: Caller): void {
  // An authenticated (or anonymous) caller's run carries the token's tenant and identity, never ones the request
  // claims for itself.
  if (!caller.authenticated && caller.tenant_id === undefined) return;
  delete runContext.tenant_id;
  delete runContext.actor;
  delete runContext.identity;
  if (typeof caller.tenant_id === "string") runContext.tenant_id = caller.tenant_id;
  if (caller.sub !== undefined) {
    runContext.actor = { type: "user", id: caller.sub };
    const identity: Record<string, unknown> = { sub: caller.sub };
    if (caller.iss !== undefined) identity.iss = caller.iss;
    if (typeof caller.tenant_id === "string") identity.tenant_id = caller.tenant_id;
    runContext.identity = identity;
  }
}

function assignmentRefused(caller: Caller, what: string): FabricError {
  return new FabricError("permission_denied", `this assignment token acts for node run ${caller.assignment!.node_run_id} only, not ${what}`, {
    details: { node_run_id: caller.assignment!.node_run_id },
  });
}

const LEASE_GRACE_MS = 10_000;

/** A stable hash of a JSON value (key order does not matter). */
export function hashOf(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value)).digest("base64url");
}

function isTerminal(state: string): boolean {
  return TERMINAL_STATES.has(state);
}

function errorBody(code: string, message: string, extra: Partial<FabricErrorBody> = {}): FabricErrorBody {
  return { code, message, ...extra };
}

function event(type: RunEvent["type"], runId: string, nodeRunId: string | undefined, data?: Record<string, unknown>): NewRunEvent {
  const e: NewRunEvent = { run_id: runId, type, time: clock.isoNow() };
  if (nodeRunId !== undefined) e.node_run_id = nodeRunId;
  if (data !== undefined) e.data = data;
  return e;
}

/** A NodeRun ready to go to its executor, written as `running` already. */
interface DispatchPlan {
  nr: NodeRunRecord;
  nodeType: NodeType;
  endpoint: string;
  deadline: number;
  run: RunRecord;
}

/** An executor's answer waiting to be recorded. */
interface PendingResult {
  runId: string;
  nodeRunId: string;
  attempt: number;
  nodeType: NodeType;
  durationMs: number;
  result?: AtomicExecuteResult;
  failure?: FabricErrorBody;
  done: { resolve: () => void; reject: (err: unknown) => void };
}

/** Work for the dispatcher: a claimed NodeRun to prepare, or a plan to send. */
type DispatchWork = { claimed: NodeRunRecord } | { plan: DispatchPlan };

/** The Run and NodeRun state machine of one coordinator. */
export class RunEngine {
  readonly hub = new EventHub();
  private readonly writer: TickWriter;
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly leaseMs: number;
  private readonly maxInFlight: number;
  private readonly tickMs: number;
  private inFlight = 0;
  private pumpScheduled = false;
  private pumping = false;
  private pumpAgain = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly pendingResults = new Map<string, PendingResult[]>();
  /** When each composite last made progress (children created or ended, evaluations), in memory. */
  private readonly progress = new Map<string, number>();
  private readonly outputValidators = new Map<string, ValidateFunction>();
  private readonly tokens: AssignmentTokens;
  /** When each composite's current assignment token was minted, in memory. */
  private readonly tokenMintedAt = new Map<string, number>();
  private readonly compositeLeaseMs: number;
  /** The base URL composite executors call back; set once the coordinator listens. */
  coordinatorEndpoint = "";

  constructor(private readonly o: RunEngineOptions) {
    this.writer = new TickWriter(o.store, (events) => this.hub.publish(events));
    this.leaseMs = o.leaseMs ?? 30_000;
    this.maxInFlight = o.maxInFlight ?? 1024;
    this.tickMs = o.tickMs ?? 100;
    this.tokens = o.assignmentTokens ?? new AssignmentTokens();
    this.compositeLeaseMs = o.compositeLeaseMs ?? this.leaseMs;
  }

  /** Reclaims this instance's leases, then starts dispatch and recovery. */
  async start(): Promise<void> {
    const released = await this.o.store.releaseLeases(this.o.instanceId);
    if (released > 0) this.o.log.info({ released }, "reclaimed NodeRuns that were in flight before a restart");
    this.timer = setInterval(() => void this.recover(), this.tickMs);
    this.timer.unref();
    await this.recover();
    this.wake();
  }

  /** Stops dispatching and flushes pending writes. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.writer.drain();
  }

  private async withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.locks.set(key, tail);
    void tail.then(() => {
      if (this.locks.get(key) === tail) this.locks.delete(key);
    });
    return next;
  }

  private write(batch: WriteBatch): Promise<RunEvent[]> {
    return this.writer.write(batch);
  }

  // ---------------------------------------------------------------- reads

  /** A run visible to the caller, or 404 run_not_found. */
  async getRunRecord(runId: string, caller: Caller = {}): Promise<RunRecord> {
    if (caller.assignment && caller.assignment.run_id !== runId) throw assignmentRefused(caller, `run ${runId}`);
    const rec = await this.o.store.getRun(runId);
    if (!rec || (caller.tenant_id !== undefined && rec.tenant_id !== caller.tenant_id)) {
      throw new FabricError("run_not_found", `no run ${runId}`, { details: { run_id: runId } });
    }
    return rec;
  }

  /**
   * A NodeRun visible to the caller, or 404 node_run_not_found. With an assignment token only the bound NodeRun and
   * its children are visible (403 for any other, found or not).
   */
  async getNodeRunRecord(nodeRunId: string, caller: Caller = {}): Promise<NodeRunRecord> {
    const rec = await this.o.store.getNodeRun(nodeRunId);
    if (caller.assignment) {
      const bound = caller.assignment.node_run_id;
      if (!rec || (rec.node_run_id !== bound && rec.parent_node_run_id !== bound)) throw assignmentRefused(caller, `node run ${nodeRunId}`);
      return rec;
    }
    if (rec && caller.tenant_id !== undefined) {
      const run = await this.o.store.getRun(rec.run_id);
      if (!run || run.tenant_id !== caller.tenant_id) throw new FabricError("node_run_not_found", `no node run ${nodeRunId}`, { details: { node_run_id: nodeRunId } });
    }
    if (!rec) throw new FabricError("node_run_not_found", `no node run ${nodeRunId}`, { details: { node_run_id: nodeRunId } });
    return rec;
  }

  // ---------------------------------------------------------------- start

  /** POST /v1/runs: stores the Run and its root NodeRun durably, then answers. */
  async startRun(req: RunStartRequest, caller: Caller = {}): Promise<Run> {
    // Only a client-chosen run_id can be repeated, so only then is the request's hash worth its cost.
    const requestHash = req.run_id ? hashOf({ req, tenant: caller.tenant_id ?? null }) : "";
    const runId = req.run_id ?? newId("run");
    return this.withLock(runId, async () => {
      if (req.run_id) {
        const existing = await this.o.store.getRun(req.run_id);
        if (existing) {
          if (existing.request_hash === requestHash) return existing.run;
          // Another tenant's run id answers the same as any other conflict, without revealing the run.
          throw new FabricError("run_already_exists", `run ${req.run_id} already exists with a different request`, { details: { run_id: req.run_id } });
        }
      }
      const nodeType = await this.o.resolver.nodeType(req.root_node_type_ref);
      const now = clock.now();
      const nowIso = new Date(now).toISOString();
      const constraints = mergeConstraints(req.constraints, nodeType.constraints);
      const runContext: RunContext = { ...(req.run_context ?? {}) };
      stampIdentity(runContext, caller);
      const rootId = newId("nr");
      const maxWall = constraints.budgets?.max_wall_time_ms;
      const run: Run = { run_id: runId, state: "queued", root_node_run_id: rootId, started_at: nowIso };
      if (Object.keys(runContext).length > 0) run.run_context = runContext;
      const runExt: Record<string, unknown> = {};
      if (req.constraints) runExt["nodefabric.constraints"] = req.constraints;
      if (req.metadata) runExt["nodefabric.metadata"] = req.metadata;
      if (Object.keys(runExt).length) run.extensions = runExt;
      const nodeRun: NodeRun = {
        node_run_id: rootId,
        run_id: runId,
        node_type_ref: { node_type_id: req.root_node_type_ref.node_type_id, version: req.root_node_type_ref.version },
        state: "queued",
        kind: nodeType.kind,
        created_at: nowIso,
        inputs: req.input,
        extensions: { "nodefabric.attempt": 1, "nodefabric.depth": 0 },
      };
      const runRec: RunRecord = {
        run_id: runId,
        tenant_id: caller.tenant_id ?? null,
        state: "queued",
        run,
        request_hash: requestHash,
        deadline_at: typeof maxWall === "number" ? now + maxWall : null,
        created_at: now,
      };
      const nrRec: NodeRunRecord = {
        node_run_id: rootId,
        run_id: runId,
        parent_node_run_id: null,
        state: "queued",
        node_run: nodeRun,
        attempt: 1,
        available_at: now,
        // The creator holds the lease from the start and dispatches at once, without a claim round trip;
        // if it dies, the lease runs out (or is released at its restart) and a claim picks the NodeRun up.
        lease_owner: this.o.instanceId,
        lease_expires_at: now + this.leaseMs,
        approval_id: null,
        idempotency_key: null,
        spec_hash: null,
        depth: 0,
        created_at: now,
      };
      const events: NewRunEvent[] = [
        event("run_started", runId, undefined, { root_node_run_id: rootId, root_node_type_ref: nodeRun.node_type_ref }),
        event("node_run_created", runId, rootId, { node_type_ref: nodeRun.node_type_ref, kind: nodeType.kind }),
      ];
      const batch: WriteBatch = { runs: [runRec], nodeRuns: [nrRec], events, approvals: [] };
      if (this.o.policy) {
        const decision = await this.decide({ action: "run.start", run_id: runId, node_type_ref: nodeRun.node_type_ref, run_context: runContext, constraints });
        events.push(event("policy_decided", runId, undefined, { action: "run.start", ...decision.record }));
        if (decision.error) {
          this.finishNodeRun(batch, runRec, nrRec, "failed", undefined, decision.error);
          await this.write(batch);
          return runRec.run;
        }
      }
      // The root's first dispatch step is decided now and written with the run: one transaction instead of two.
      const plan = this.stopped ? undefined : await this.planDispatch(batch, runRec, nrRec, nodeType);
      await this.write(batch);
      if (plan) this.dispatchSoon({ plan });
      else if (!isTerminal(nrRec.state) && nrRec.lease_owner) this.dispatchSoon({ claimed: nrRec });
      return runRec.run;
    });
  }

  /** Asks the PDP; a deny, or an unreachable PDP, comes back as the failure to record. */
  private async decide(req: PolicyDecisionRequest): Promise<{ decision?: PolicyDecision; record: Record<string, unknown>; error?: FabricErrorBody }> {
    try {
      const decision = await this.o.policy!.decide(req);
      const record: Record<string, unknown> = { decision: decision.decision };
      if (decision.reason_code) record.reason_code = decision.reason_code;
      if (decision.message) record.message = decision.message;
      if (decision.approval_ref) record.approval_ref = decision.approval_ref;
      if (decision.decision === "deny") {
        return { decision, record, error: errorBody("policy_denied", decision.message ?? `policy denied ${req.action}`, { details: { action: req.action, reason_code: decision.reason_code } }) };
      }
      return { decision, record };
    } catch (err) {
      const message = `the PDP could not be reached: ${(err as Error).message}`;
      return { record: { decision: "deny", reason_code: "pdp_unavailable", message }, error: errorBody("pdp_unavailable", message, { retryable: true }) };
    }
  }

  // ---------------------------------------------------------------- endings

  /**
   * Moves a NodeRun to a terminal state inside `batch`; when it is the root, the run ends with it.
   * Mutates the records it is given.
   */
  private finishNodeRun(batch: WriteBatch, run: RunRecord, nr: NodeRunRecord, state: "completed" | "failed" | "canceled", outputs?: Record<string, unknown>, error?: FabricErrorBody): void {
    const nowIso = clock.isoNow();
    nr.state = state;
    nr.node_run.state = state;
    nr.node_run.ended_at = nowIso;
    nr.lease_owner = null;
    nr.lease_expires_at = null;
    // An ended composite needs neither its liveness nor its token age any more.
    this.progress.delete(nr.node_run_id);
    this.tokenMintedAt.delete(nr.node_run_id);
    if (outputs !== undefined) nr.node_run.outputs = outputs;
    if (error) nr.node_run.extensions = { ...nr.node_run.extensions, "nodefabric.error": error };
    (batch.nodeRuns ??= []).push(nr);
    // The outputs travel in the event, so a composite following its children needs no read per child.
    const data: Record<string, unknown> = { state };
    if (state === "completed") data.outputs = nr.node_run.outputs ?? {};
    if (error) data.error = error;
    (batch.events ??= []).push(event("node_run_completed", nr.run_id, nr.node_run_id, data));
    if (nr.parent_node_run_id) this.progress.set(nr.parent_node_run_id, clock.now());
    if (nr.node_run_id === run.run.root_node_run_id && !isTerminal(run.state)) {
      this.finishRun(batch, run, state, outputs, error);
    }
  }

  private finishRun(batch: WriteBatch, run: RunRecord, state: "completed" | "failed" | "canceled", outputs?: Record<string, unknown>, error?: FabricErrorBody): void {
    run.state = state;
    run.run.state = state;
    run.run.ended_at = clock.isoNow();
    const ext = { ...run.run.extensions };
    if (state === "completed") ext["nodefabric.outputs"] = outputs ?? {};
    else ext["nodefabric.error"] = error ?? errorBody(state === "canceled" ? "canceled" : "handler_error", `the run ${state}`);
    run.run.extensions = ext;
    (batch.runs ??= []).push(run);
    const data: Record<string, unknown> = { state };
    if (state !== "completed") data.error = ext["nodefabric.error"];
    (batch.events ??= []).push(event("run_completed", run.run_id, undefined, data));
  }

  /** Ends a run and every open NodeRun in it (cancel, budget). Returns the NodeRuns that were in flight. */
  private async endOpenRun(run: RunRecord, state: "canceled" | "failed", error: FabricErrorBody): Promise<{ batch: WriteBatch; inFlight: NodeRunRecord[] }> {
    const batch: WriteBatch = { runs: [], nodeRuns: [], events: [] };
    const all = await this.o.store.listNodeRuns(run.run_id);
    const inFlight: NodeRunRecord[] = [];
    // Children first, so the run's last events are the root's end and run_completed.
    for (const nr of all.filter((n) => !isTerminal(n.state)).sort((a, b) => b.depth - a.depth)) {
      if (nr.state === "running" && nr.node_run.executor_binding) inFlight.push(nr);
      if (nr.approval_id) {
        const approval = await this.o.store.getApproval(nr.approval_id);
        if (approval && approval.state === "pending") {
          (batch.approvals ??= []).push({ ...approval, state: "rejected", resolved_at: clock.now() });
        }
        nr.approval_id = null;
      }
      this.finishNodeRun(batch, run, nr, state, undefined, error);
    }
    if (!isTerminal(run.state)) this.finishRun(batch, run, state, undefined, error);
    return { batch, inFlight };
  }

  /** POST /v1/runs/{id}:cancel: cancels the run and every open NodeRun; a run that has ended is returned unchanged. */
  async cancelRun(runId: string, caller: Caller = {}): Promise<Run> {
    await this.getRunRecord(runId, caller);
    const { run, inFlight } = await this.withLock(runId, async () => {
      const rec = (await this.o.store.getRun(runId))!;
      if (isTerminal(rec.state)) return { run: rec.run, inFlight: [] as NodeRunRecord[] };
      const { batch, inFlight } = await this.endOpenRun(rec, "canceled", errorBody("canceled", "the run was canceled"));
      await this.write(batch);
      return { run: rec.run, inFlight };
    });
    for (const nr of inFlight) this.cancelAtExecutor(nr);
    return run;
  }

  private cancelAtExecutor(nr: NodeRunRecord): void {
    const binding = nr.node_run.executor_binding;
    if (!binding) return;
    if (nr.node_run.kind === "composite") void this.o.executors.cancelComposite(binding.endpoint, nr.node_run_id);
    else void this.o.executors.cancel(binding.endpoint, nr.node_run_id);
  }

  // ---------------------------------------------------------------- dispatch

  /** Asks the dispatcher to look for work soon. */
  wake(): void {
    if (this.pumpScheduled || this.stopped) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      void this.pump();
    });
  }

  private readonly localQueue: DispatchWork[] = [];

  /** Sends a NodeRun this coordinator has planned and leased, as soon as there is capacity. */
  private dispatchSoon(work: DispatchWork): void {
    if (this.stopped) return;
    if (this.inFlight >= this.maxInFlight) {
      this.localQueue.push(work);
      return;
    }
    this.startDispatch(work);
  }

  private startDispatch(work: DispatchWork): void {
    this.inFlight++;
    const id = "plan" in work ? work.plan.nr.node_run_id : work.claimed.node_run_id;
    void this.dispatch(work)
      .catch((err) => this.o.log.error({ err, node_run_id: id }, "dispatch failed"))
      .finally(() => {
        this.inFlight--;
        const next = this.localQueue.shift();
        if (next && !this.stopped) this.startDispatch(next);
        else if (this.inFlight === this.maxInFlight - 1) this.wake();
      });
  }

  private async pump(): Promise<void> {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    try {
      while (!this.stopped && this.inFlight < this.maxInFlight) {
        const claimed = await this.o.store.claim({
          owner: this.o.instanceId,
          now: clock.now(),
          limit: Math.min(512, this.maxInFlight - this.inFlight),
          leaseMs: this.leaseMs,
        });
        if (claimed.length === 0) break;
        for (const rec of claimed) this.startDispatch({ claimed: rec });
      }
    } catch (err) {
      this.o.log.error({ err }, "claiming work failed");
    } finally {
      this.pumping = false;
      if (this.pumpAgain) {
        this.pumpAgain = false;
        this.wake();
      }
    }
  }

  /** Takes one claimed NodeRun through policy and into its executor. */
  private async dispatch(work: DispatchWork): Promise<void> {
    const plan = "plan" in work ? work.plan : await this.withLock(work.claimed.run_id, () => this.prepareDispatch(work.claimed.node_run_id));
    if (!plan) return;
    if (plan.nodeType.kind === "composite") {
      await this.begin(plan);
      return;
    }
    const { nr, nodeType, endpoint, deadline, run } = plan;
    const body: AtomicExecuteRequest = {
      run_id: nr.run_id,
      node_run_id: nr.node_run_id,
      node_type_ref: nr.node_run.node_type_ref,
      inputs: nr.node_run.inputs ?? {},
      extensions: { "nodefabric.attempt": nr.attempt, "nodefabric.deadline": new Date(deadline).toISOString() },
    };
    if (run.run.run_context) body.run_context = run.run.run_context;
    const key = `${nr.node_run_id}:${nr.attempt}`;
    const started = clock.now();
    let result: AtomicExecuteResult | undefined;
    let failure: FabricErrorBody | undefined;
    try {
      // An executor at its concurrency limit answers 503 (or 429): wait and offer the same attempt again while the
      // deadline allows, without spending an attempt on it.
      for (let bounce = 0; ; bounce++) {
        try {
          result = await this.o.executors.execute(endpoint, body, { idempotencyKey: key, timeoutMs: Math.max(1, deadline - clock.now()) + 5_000 });
          break;
        } catch (err) {
          const e = err as FabricError;
          const overloaded = FabricError.is(e) && (e.code === "unavailable" || e.code === "rate_limited");
          const pause = Math.min(1000, 20 * 2 ** Math.min(bounce, 6)) * (0.5 + Math.random());
          if (!overloaded || this.stopped || clock.now() + pause >= deadline) throw err;
          await new Promise((resolve) => setTimeout(resolve, pause));
        }
      }
    } catch (err) {
      const e = err as FabricError;
      if (!FabricError.is(e) || e.code === "upstream_unavailable") this.o.resolver.markUnreachable?.(endpoint);
      failure = FabricError.is(e)
        ? errorBody(e.code === "unknown_node_type" ? "unknown_node_type" : "executor_unavailable", e.message, { retryable: e.code !== "unknown_node_type" })
        : errorBody("executor_unavailable", (err as Error).message, { retryable: true });
    }
    await this.recordResult({ runId: nr.run_id, nodeRunId: nr.node_run_id, attempt: nr.attempt, nodeType, durationMs: clock.now() - started, result, failure });
  }

  /** The `:begin` of a composite, with a freshly minted assignment token. */
  private async beginRequest(nr: NodeRunRecord, run: RunRecord, nodeType: NodeType): Promise<CompositeBeginRequest> {
    const body: CompositeBeginRequest = {
      run_id: nr.run_id,
      node_run_id: nr.node_run_id,
      node_type_ref: nr.node_run.node_type_ref,
      inputs: nr.node_run.inputs ?? {},
      coordinator_endpoint: this.coordinatorEndpoint,
      assignment_token: await this.tokens.mint({ run_id: nr.run_id, node_run_id: nr.node_run_id }),
      constraints: mergeConstraints(run.run.extensions?.["nodefabric.constraints"] as ConstraintEnvelope | undefined, nodeType.constraints),
      extensions: { "nodefabric.attempt": nr.attempt },
    };
    if (run.run.run_context) body.run_context = run.run.run_context;
    this.tokenMintedAt.set(nr.node_run_id, clock.now());
    return body;
  }

  /**
   * Sends a live composite a fresh assignment token before its current one expires: a repeated `:begin`, which an
   * executor already driving the NodeRun answers "already running" after taking the new token. Best effort: a
   * composite whose executor is gone is found by its lease.
   */
  private async refreshAssignment(nr: NodeRunRecord, run: RunRecord): Promise<void> {
    const endpoint = nr.node_run.executor_binding?.endpoint;
    if (!endpoint) return;
    try {
      const nodeType = await this.o.resolver.nodeType(nr.node_run.node_type_ref);
      await this.o.executors.begin(endpoint, await this.beginRequest(nr, run, nodeType));
    } catch (err) {
      this.o.log.warn({ err, node_run_id: nr.node_run_id }, "could not send a fresh assignment token");
    }
  }

  /** Hands a composite to its executor; one that refuses or cannot be reached is retried later. */
  private async begin(plan: DispatchPlan): Promise<void> {
    const { nr, endpoint, run, nodeType } = plan;
    let failure: FabricErrorBody | undefined;
    try {
      const res = await this.o.executors.begin(endpoint, await this.beginRequest(nr, run, nodeType));
      if (res.accepted) return;
      failure = errorBody("executor_unavailable", res.message ?? "the composite executor did not accept the NodeRun", { retryable: true });
    } catch (err) {
      const e = err as FabricError;
      if (FabricError.is(e) && e.code === "unknown_node_type") {
        failure = errorBody("unknown_node_type", e.message, { retryable: false, details: e.details });
      } else {
        if (!FabricError.is(e) || e.code === "upstream_unavailable") this.o.resolver.markUnreachable?.(endpoint);
        failure = errorBody("executor_unavailable", (err as Error).message, { retryable: true });
      }
    }
    await this.withLock(nr.run_id, async () => {
      const fresh = await this.o.store.getNodeRun(nr.node_run_id);
      if (!fresh || isTerminal(fresh.state) || fresh.attempt !== nr.attempt) return;
      const freshRun = (await this.o.store.getRun(nr.run_id))!;
      const batch: WriteBatch = { runs: [], nodeRuns: [], events: [] };
      if (failure!.retryable) this.scheduleRetry(batch, freshRun, fresh, nodeType, failure!);
      else this.finishNodeRun(batch, freshRun, fresh, "failed", undefined, failure);
      await this.write(batch);
    });
    this.wake();
  }

  private async prepareDispatch(nodeRunId: string): Promise<DispatchPlan | undefined> {
    const nr = await this.o.store.getNodeRun(nodeRunId);
    if (!nr || isTerminal(nr.state) || nr.lease_owner !== this.o.instanceId || nr.approval_id) return undefined;
    const run = await this.o.store.getRun(nr.run_id);
    if (!run) return undefined;
    const batch: WriteBatch = { runs: [], nodeRuns: [], events: [] };
    if (isTerminal(run.state)) {
      this.finishNodeRun(batch, run, nr, "canceled", undefined, errorBody("canceled", "the run has ended"));
      await this.write(batch);
      return undefined;
    }
    const ext = { ...nr.node_run.extensions };
    const isComposite = nr.node_run.kind === "composite";
    if (isComposite && nr.state === "running" && !ext["nodefabric.retry_scheduled"]) {
      // A running composite whose lease ran out: if it made progress lately it is alive, so extend the lease;
      // otherwise send its `:begin` again (an executor that still drives it answers "already running").
      const last = this.progress.get(nr.node_run_id);
      if (last !== undefined && clock.now() - last < this.compositeLeaseMs) {
        nr.lease_expires_at = clock.now() + this.compositeLeaseMs;
        batch.nodeRuns!.push(nr);
        await this.write(batch);
        const minted = this.tokenMintedAt.get(nr.node_run_id) ?? 0;
        if (clock.now() - minted > (this.tokens.ttlSeconds * 1000) / 2) void this.refreshAssignment(nr, run);
        return undefined;
      }
    } else if ((nr.state === "assigned" || nr.state === "running") && !ext["nodefabric.retry_scheduled"]) {
      // A NodeRun found assigned or running without a scheduled retry was in flight when its holder died.
      nr.attempt += 1;
      batch.events!.push(event("node_run_retrying", nr.run_id, nr.node_run_id, { attempt: nr.attempt, reason: "lease_expired" }));
    }
    delete ext["nodefabric.retry_scheduled"];
    ext["nodefabric.attempt"] = nr.attempt;
    nr.node_run.extensions = ext;

    let nodeType: NodeType;
    try {
      nodeType = await this.o.resolver.nodeType(nr.node_run.node_type_ref);
    } catch (err) {
      const e = err as FabricError;
      if (FabricError.is(e) && e.statusCode === 404) {
        this.finishNodeRun(batch, run, nr, "failed", undefined, errorBody("unknown_node_type", e.message, { details: { node_type_ref: nr.node_run.node_type_ref } }));
      } else {
        this.scheduleRetry(batch, run, nr, undefined, errorBody("executor_unavailable", `the registry could not be reached: ${(err as Error).message}`, { retryable: true }));
      }
      await this.write(batch);
      return undefined;
    }
    const plan = await this.planDispatch(batch, run, nr, nodeType);
    await this.write(batch);
    return plan;
  }

  /**
   * Decides, into `batch`, what happens to a leased NodeRun: it fails (policy, kind), waits for an approval, waits
   * for an executor, or moves to `running` and is returned as a plan to send. The caller writes the batch before
   * acting on the plan.
   */
  private async planDispatch(batch: WriteBatch, run: RunRecord, nr: NodeRunRecord, nodeType: NodeType): Promise<DispatchPlan | undefined> {
    const ext = (nr.node_run.extensions ??= {});
    if (this.o.policy && !ext["nodefabric.approved"]) {
      const d = await this.decide({
        action: "node.run.execute",
        run_id: nr.run_id,
        node_run_id: nr.node_run_id,
        node_type_ref: nr.node_run.node_type_ref,
        run_context: run.run.run_context,
        constraints: mergeConstraints(run.run.extensions?.["nodefabric.constraints"] as ConstraintEnvelope | undefined, nodeType.constraints),
      });
      batch.events!.push(event("policy_decided", nr.run_id, nr.node_run_id, { action: "node.run.execute", ...d.record }));
      if (d.error) {
        this.finishNodeRun(batch, run, nr, "failed", undefined, d.error);
        return undefined;
      }
      if (d.decision?.decision === "require_approval") {
        const approvalId = d.decision.approval_ref?.approval_id ?? newId("apr");
        const approval: ApprovalRecord = {
          approval_id: approvalId,
          run_id: nr.run_id,
          node_run_id: nr.node_run_id,
          state: "pending",
          created_at: clock.now(),
          resolved_at: null,
          decision: d.decision as unknown as Record<string, unknown>,
        };
        nr.approval_id = approvalId;
        nr.lease_owner = null;
        nr.lease_expires_at = null;
        ext["nodefabric.approval_id"] = approvalId;
        (batch.approvals ??= []).push(approval);
        batch.nodeRuns!.push(nr);
        batch.events!.push(event("approval_requested", nr.run_id, nr.node_run_id, { approval_id: approvalId, reason_code: d.decision.reason_code, message: d.decision.message }));
        return undefined;
      }
    }

    const kind = nodeType.kind === "composite" ? "composite" : "atomic";
    const executor = await this.o.resolver.executorFor(nr.node_run.node_type_ref, kind);
    if (!executor) {
      return this.scheduleRetry(batch, run, nr, nodeType, errorBody("executor_unavailable", `no ${kind} executor serves ${nr.node_run.node_type_ref.node_type_id}@${nr.node_run.node_type_ref.version}`, { retryable: true }));
    }

    const now = clock.now();
    const nowIso = new Date(now).toISOString();
    const timeoutMs = timeoutOf(nodeType);
    const deadline = Math.min(now + timeoutMs, run.deadline_at ?? Number.POSITIVE_INFINITY);
    if (nr.state === "queued") {
      nr.node_run.executor_binding = { executor_instance_id: executor.executor_instance_id, endpoint: executor.endpoint };
      batch.events!.push(event("node_run_assigned", nr.run_id, nr.node_run_id, { executor_instance_id: executor.executor_instance_id, endpoint: executor.endpoint, attempt: nr.attempt }));
    }
    if (nr.state !== "running") {
      nr.node_run.started_at = nowIso;
      batch.events!.push(event("node_run_started", nr.run_id, nr.node_run_id, { attempt: nr.attempt }));
    }
    nr.state = "running";
    nr.node_run.state = "running";
    nr.node_run.executor_binding = { executor_instance_id: executor.executor_instance_id, endpoint: executor.endpoint };
    // An atomic NodeRun's lease covers its attempt; a composite's is renewed by its progress.
    nr.lease_expires_at = kind === "composite" ? now + this.compositeLeaseMs : deadline + LEASE_GRACE_MS;
    if (kind === "composite") this.progress.set(nr.node_run_id, now);
    batch.nodeRuns!.push(nr);
    if (run.state === "queued") {
      run.state = "running";
      run.run.state = "running";
      batch.runs!.push(run);
    }
    return { nr, nodeType, endpoint: executor.endpoint, deadline, run };
  }


  /** Schedules another attempt after backoff into `batch`, or fails the NodeRun when attempts are used up. */
  private scheduleRetry(batch: WriteBatch, run: RunRecord, nr: NodeRunRecord, nodeType: NodeType | undefined, error: FabricErrorBody): undefined {
    const policy = retryPolicyOf(nodeType);
    if (nr.attempt >= policy.max_attempts) {
      this.finishNodeRun(batch, run, nr, "failed", undefined, error);
    } else {
      const next = nr.attempt + 1;
      const delay = backoffMs(policy, next);
      nr.attempt = next;
      nr.available_at = clock.now() + delay;
      nr.lease_owner = null;
      nr.lease_expires_at = null;
      nr.node_run.extensions = { ...nr.node_run.extensions, "nodefabric.attempt": next, "nodefabric.retry_scheduled": true };
      batch.nodeRuns!.push(nr);
      batch.events!.push(event("node_run_retrying", nr.run_id, nr.node_run_id, { attempt: next, delay_ms: delay, error }));
    }
    return undefined;
  }

  /**
   * Records an executor's answer. Answers for one run are grouped: whoever takes the run's lock applies every
   * answer queued for that run so far, in one batch, so a composite with thousands of children does not commit
   * them one lock turn (and one tick) at a time.
   */
  private recordResult(item: Omit<PendingResult, "done">): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let queue = this.pendingResults.get(item.runId);
      if (!queue) {
        queue = [];
        this.pendingResults.set(item.runId, queue);
        void this.withLock(item.runId, () => this.drainResults(item.runId)).catch(() => undefined);
      }
      queue.push({ ...item, done: { resolve, reject } });
    });
  }

  private async drainResults(runId: string): Promise<void> {
    const queue = this.pendingResults.get(runId) ?? [];
    this.pendingResults.delete(runId);
    try {
      const run = await this.o.store.getRun(runId);
      const batch: WriteBatch = { runs: [], nodeRuns: [], events: [] };
      if (run) for (const item of queue) await this.applyResult(batch, run, item);
      await this.write(batch);
      for (const item of queue) item.done.resolve();
    } catch (err) {
      for (const item of queue) item.done.reject(err);
    }
  }

  private async applyResult(batch: WriteBatch, run: RunRecord, item: PendingResult): Promise<void> {
    const { nodeRunId, attempt, nodeType, durationMs, result, failure } = item;
    const nr = await this.o.store.getNodeRun(nodeRunId);
    if (!nr || isTerminal(nr.state) || nr.attempt !== attempt) return; // canceled meanwhile, or a stale attempt
    const state = result ? ((result.state as string) === "succeeded" ? "completed" : result.state) : "failed";
    const error = failure ?? (result?.error as FabricErrorBody | undefined);
    const data: Record<string, unknown> = { state, attempt, duration_ms: durationMs };
    if (error && state !== "completed") data.error = error;
    batch.events!.push(event("atomic_executed", nr.run_id, nr.node_run_id, data));
    if (state === "completed") {
      this.finishNodeRun(batch, run, nr, "completed", (result!.outputs ?? {}) as Record<string, unknown>);
      return;
    }
    const err = error ?? errorBody("handler_error", `the executor answered ${state}`);
    if (state === "canceled") this.finishNodeRun(batch, run, nr, "canceled", undefined, err);
    else if (err.retryable === true) this.scheduleRetry(batch, run, nr, nodeType, err);
    else this.finishNodeRun(batch, run, nr, "failed", undefined, err);
  }

  // ---------------------------------------------------------------- recovery and budgets

  private recovering = false;

  /** Fails runs past their deadline and wakes the dispatcher for backoffs and expired leases. */
  async recover(): Promise<void> {
    if (this.recovering || this.stopped) return;
    this.recovering = true;
    try {
      const overdue = await this.o.store.listOverdueRuns(clock.now(), 100);
      for (const r of overdue) {
        const inFlight = await this.withLock(r.run_id, async () => {
          const rec = await this.o.store.getRun(r.run_id);
          if (!rec || isTerminal(rec.state)) return [];
          const budget = rec.deadline_at! - Date.parse(rec.run.started_at ?? new Date(rec.created_at).toISOString());
          const res = await this.endOpenRun(rec, "failed", errorBody("budget_exceeded", `the run exceeded its max_wall_time_ms of ${budget} ms`, { details: { max_wall_time_ms: budget } }));
          await this.write(res.batch);
          return res.inFlight;
        });
        for (const nr of inFlight) this.cancelAtExecutor(nr);
      }
      this.wake();
    } catch (err) {
      this.o.log.error({ err }, "recovery pass failed");
    } finally {
      this.recovering = false;
    }
  }

  // ---------------------------------------------------------------- approvals

  /** POST /v1/approvals/{id}:approve|:reject. */
  async resolveApproval(approvalId: string, decision: "approved" | "rejected", caller: Caller = {}): Promise<void> {
    const approval = await this.o.store.getApproval(approvalId);
    if (!approval) throw new FabricError("approval_not_found", `no approval ${approvalId}`, { details: { approval_id: approvalId } });
    const runCheck = await this.o.store.getRun(approval.run_id);
    if (!runCheck || (caller.tenant_id !== undefined && runCheck.tenant_id !== caller.tenant_id)) {
      throw new FabricError("approval_not_found", `no approval ${approvalId}`, { details: { approval_id: approvalId } });
    }
    await this.withLock(approval.run_id, async () => {
      const a = (await this.o.store.getApproval(approvalId))!;
      if (a.state !== "pending") {
        if (a.state === decision) return;
        throw new FabricError("node_run_terminal", `approval ${approvalId} was already ${a.state}`, { details: { approval_id: approvalId, state: a.state } });
      }
      const run = (await this.o.store.getRun(a.run_id))!;
      const nr = (await this.o.store.getNodeRun(a.node_run_id))!;
      const batch: WriteBatch = { runs: [], nodeRuns: [], events: [], approvals: [{ ...a, state: decision, resolved_at: clock.now() }] };
      batch.events!.push(event("approval_resolved", a.run_id, a.node_run_id, { approval_id: approvalId, decision }));
      nr.approval_id = null;
      if (decision === "approved") {
        nr.node_run.extensions = { ...nr.node_run.extensions, "nodefabric.approved": approvalId };
        nr.available_at = clock.now();
        batch.nodeRuns!.push(nr);
      } else {
        this.finishNodeRun(batch, run, nr, "failed", undefined, errorBody("approval_rejected", `approval ${approvalId} was rejected`, { details: { approval_id: approvalId } }));
      }
      await this.write(batch);
    });
    this.wake();
  }

  // ---------------------------------------------------------------- children

  /**
   * POST /v1/node-runs: creates children under a running composite of the same run. Idempotency keys return the
   * existing child; structural limits, allow/deny lists and candidate bindings are checked for the whole request
   * before anything is written (all or nothing).
   */
  async createChildren(req: NodeRunsCreateRequest, caller: Caller = {}): Promise<NodeRun[]> {
    if (caller.assignment && (caller.assignment.run_id !== req.run_id || caller.assignment.node_run_id !== req.parent_node_run_id)) {
      throw assignmentRefused(caller, `children of node run ${req.parent_node_run_id}`);
    }
    const parentCheck = await this.o.store.getNodeRun(req.parent_node_run_id);
    const invalidParent = (why: string) =>
      new FabricError("parent_node_run_invalid", `node run ${req.parent_node_run_id} cannot take children: ${why}`, {
        details: { run_id: req.run_id, parent_node_run_id: req.parent_node_run_id },
      });
    if (!parentCheck || parentCheck.run_id !== req.run_id) throw invalidParent(`it is not a node run of run ${req.run_id}`);
    await this.getRunRecord(req.run_id, caller);
    const { created, result } = await this.withLock(req.run_id, async () => {
      const parent = (await this.o.store.getNodeRun(req.parent_node_run_id))!;
      const run = (await this.o.store.getRun(req.run_id))!;
      if (isTerminal(run.state)) throw invalidParent(`run ${run.run_id} has ended (${run.state})`);
      if (parent.node_run.kind !== "composite") throw invalidParent("it is not a composite");
      if (parent.state !== "running") throw invalidParent(`it is ${parent.state}, not running`);
      const parentType = await this.o.resolver.nodeType(parent.node_run.node_type_ref);
      const base = mergeConstraints(run.run.extensions?.["nodefabric.constraints"] as ConstraintEnvelope | undefined, parentType.constraints);

      // Repeated keys first: they return what exists and count against nothing.
      const result: Array<NodeRun | undefined> = new Array(req.node_runs.length);
      const fresh: Array<{ index: number; spec: (typeof req.node_runs)[number]; hash: string }> = [];
      const seenKeys = new Map<string, number>();
      for (let i = 0; i < req.node_runs.length; i++) {
        const spec = req.node_runs[i];
        const hash = hashOf({ ref: { node_type_id: spec.node_type_ref.node_type_id, version: spec.node_type_ref.version }, inputs: spec.inputs });
        if (spec.idempotency_key) {
          const earlier = seenKeys.get(spec.idempotency_key);
          if (earlier !== undefined) {
            if (fresh.find((f) => f.index === earlier)?.hash !== hash) throw this.idempotencyConflict(spec.idempotency_key);
            continue; // resolved to the same child below
          }
          const existing = await this.o.store.findChild(req.run_id, req.parent_node_run_id, spec.idempotency_key);
          if (existing) {
            if (existing.spec_hash !== hash) throw this.idempotencyConflict(spec.idempotency_key);
            result[i] = existing.node_run;
            continue;
          }
          seenKeys.set(spec.idempotency_key, i);
        }
        fresh.push({ index: i, spec, hash });
      }

      // Limits, lists and bindings, for the whole request before anything is written.
      const violations: Array<{ index: number; constraint: string; message: string }> = [];
      const pExt = parent.node_run.extensions ?? {};
      const rExt = run.run.extensions ?? {};
      const children = (typeof pExt["nodefabric.children"] === "number" ? pExt["nodefabric.children"] : 0) as number;
      const rounds = (typeof pExt["nodefabric.decomposition_rounds"] === "number" ? pExt["nodefabric.decomposition_rounds"] : 0) as number;
      const total = (typeof rExt["nodefabric.node_count"] === "number" ? rExt["nodefabric.node_count"] : 1) as number;
      const types: NodeType[] = [];
      for (const f of fresh) {
        const c = mergeConstraints(base, f.spec.constraints);
        const s = c.structural ?? {};
        const id = f.spec.node_type_ref.node_type_id;
        if (s.max_depth !== undefined && parent.depth + 1 > s.max_depth) violations.push({ index: f.index, constraint: "structural.max_depth", message: `depth ${parent.depth + 1} exceeds max_depth ${s.max_depth}` });
        if (s.max_children_per_composite !== undefined && children + fresh.length > s.max_children_per_composite) violations.push({ index: f.index, constraint: "structural.max_children_per_composite", message: `${children + fresh.length} children exceed max_children_per_composite ${s.max_children_per_composite}` });
        if (s.max_total_nodes_per_run !== undefined && total + fresh.length > s.max_total_nodes_per_run) violations.push({ index: f.index, constraint: "structural.max_total_nodes_per_run", message: `${total + fresh.length} node runs exceed max_total_nodes_per_run ${s.max_total_nodes_per_run}` });
        if (s.max_decomposition_rounds_per_node !== undefined && rounds + 1 > s.max_decomposition_rounds_per_node) violations.push({ index: f.index, constraint: "structural.max_decomposition_rounds_per_node", message: `round ${rounds + 1} exceeds max_decomposition_rounds_per_node ${s.max_decomposition_rounds_per_node}` });
        const lists = c.candidates ?? {};
        if (lists.denied_node_type_ids?.includes(id)) violations.push({ index: f.index, constraint: "candidates.denied_node_type_ids", message: `${id} is denied (node_type_denied)` });
        if (lists.allowed_node_type_ids && !lists.allowed_node_type_ids.includes(id)) violations.push({ index: f.index, constraint: "candidates.allowed_node_type_ids", message: `${id} is not allowed (node_type_not_allowed)` });
        types.push(await this.o.resolver.nodeType(f.spec.node_type_ref));
      }
      if (violations.length > 0) {
        throw new FabricError("constraint_violation", violations[0].message, { details: { violations: violations.map((v) => ({ ...v, path: `/node_runs/${v.index}` })) } });
      }
      const bindingEvents: NewRunEvent[] = [];
      for (const f of fresh) {
        const setId = f.spec.candidate_set_id ?? f.spec.binding_decision?.candidate_set_id;
        const chosen = f.spec.binding_decision?.chosen_node_type_ref ?? f.spec.node_type_ref;
        if (!setId && !f.spec.binding_decision) continue;
        const bad = (message: string) =>
          new FabricError("candidate_binding_violation", message, { details: { path: `/node_runs/${f.index}`, candidate_set_id: setId, node_type_ref: f.spec.node_type_ref } });
        if (chosen.node_type_id !== f.spec.node_type_ref.node_type_id || chosen.version !== f.spec.node_type_ref.version) {
          throw bad("binding_decision.chosen_node_type_ref differs from the node_type_ref of the spec");
        }
        if (!setId) throw bad("a binding_decision needs a candidate_set_id");
        if (!this.o.selection) throw bad("no Selection service is configured to check the binding against");
        let set: CandidateSet;
        try {
          set = await this.o.selection.getCandidateSet(setId);
        } catch (err) {
          if (FabricError.is(err) && err.statusCode === 404) throw bad(`candidate set ${setId} does not exist`);
          throw err;
        }
        const member = set.candidates.some((c) => c.node_type_ref.node_type_id === chosen.node_type_id && c.node_type_ref.version === chosen.version);
        if (!member) throw bad(`${chosen.node_type_id}@${chosen.version} is not a member of candidate set ${setId}`);
        bindingEvents.push(event("candidate_set_generated", run.run_id, parent.node_run_id, { candidate_set_id: set.candidate_set_id, subtask_id: set.subtask_id, candidates: set.candidates.length }));
        bindingEvents.push(
          event("subtask_mapped", run.run_id, parent.node_run_id, {
            subtask_id: f.spec.binding_decision?.subtask_id ?? set.subtask_id,
            candidate_set_id: setId,
            chosen_node_type_ref: chosen,
          }),
        );
      }

      const now = clock.now();
      const nowIso = new Date(now).toISOString();
      const batch: WriteBatch = { runs: [], nodeRuns: [], events: [...bindingEvents], approvals: [] };
      const created: NodeRunRecord[] = [];
      const createdTypes: NodeType[] = [];
      for (let k = 0; k < fresh.length; k++) {
        const f = fresh[k];
        const nodeType = types[k];
        const id = newId("nr");
        const ext: Record<string, unknown> = { "nodefabric.attempt": 1, "nodefabric.depth": parent.depth + 1 };
        if (f.spec.idempotency_key) ext["nodefabric.idempotency_key"] = f.spec.idempotency_key;
        if (f.spec.candidate_set_id) ext["nodefabric.candidate_set_id"] = f.spec.candidate_set_id;
        if (f.spec.binding_decision) ext["nodefabric.binding_decision"] = f.spec.binding_decision;
        if (f.spec.constraints) ext["nodefabric.constraints"] = f.spec.constraints;
        for (const [key, value] of Object.entries(f.spec.extensions ?? {})) if (!(key in ext)) ext[key] = value;
        const node: NodeRun = {
          node_run_id: id,
          run_id: run.run_id,
          parent_node_run_id: parent.node_run_id,
          node_type_ref: { node_type_id: f.spec.node_type_ref.node_type_id, version: f.spec.node_type_ref.version },
          state: "queued",
          kind: nodeType.kind,
          created_at: nowIso,
          inputs: f.spec.inputs,
          extensions: ext,
        };
        const rec: NodeRunRecord = {
          node_run_id: id,
          run_id: run.run_id,
          parent_node_run_id: parent.node_run_id,
          state: "queued",
          node_run: node,
          attempt: 1,
          available_at: now,
          lease_owner: this.o.instanceId,
          lease_expires_at: now + this.leaseMs,
          approval_id: null,
          idempotency_key: f.spec.idempotency_key ?? null,
          spec_hash: f.hash,
          depth: parent.depth + 1,
          created_at: now,
        };
        const data: Record<string, unknown> = { node_type_ref: node.node_type_ref, kind: nodeType.kind, parent_node_run_id: parent.node_run_id };
        if (f.spec.idempotency_key) data.idempotency_key = f.spec.idempotency_key;
        batch.events!.push(event("node_run_created", run.run_id, id, data));
        batch.nodeRuns!.push(rec);
        created.push(rec);
        createdTypes.push(nodeType);
        result[f.index] = node;
      }
      // Specs that repeated a key within this request resolve to the child created for its first use.
      for (let i = 0; i < req.node_runs.length; i++) {
        if (result[i]) continue;
        const first = seenKeys.get(req.node_runs[i].idempotency_key!)!;
        result[i] = result[first];
      }
      if (created.length > 0) {
        batch.events!.push(event("composite_decomposed", run.run_id, parent.node_run_id, { child_node_run_ids: created.map((c) => c.node_run_id), round: rounds + 1 }));
        parent.node_run.extensions = { ...pExt, "nodefabric.children": children + created.length, "nodefabric.decomposition_rounds": rounds + 1 };
        batch.nodeRuns!.unshift(parent);
        run.run.extensions = { ...rExt, "nodefabric.node_count": total + created.length };
        batch.runs!.push(run);
        this.progress.set(parent.node_run_id, now);
      }

      // The node.run.create checkpoint, then each child's first dispatch step, written with its creation.
      const plans: DispatchPlan[] = [];
      for (let k = 0; k < created.length; k++) {
        const rec = created[k];
        if (this.o.policy) {
          const d = await this.decide({ action: "node.run.create", run_id: run.run_id, node_run_id: rec.node_run_id, node_type_ref: rec.node_run.node_type_ref, run_context: run.run.run_context, constraints: mergeConstraints(base, createdTypes[k].constraints) });
          batch.events!.push(event("policy_decided", run.run_id, rec.node_run_id, { action: "node.run.create", ...d.record }));
          if (d.error) {
            this.finishNodeRun(batch, run, rec, "failed", undefined, d.error);
            continue;
          }
        }
        if (this.stopped) continue;
        const plan = await this.planDispatch(batch, run, rec, createdTypes[k]);
        if (plan) plans.push(plan);
      }
      await this.write(batch);
      return { created: plans, result: result as NodeRun[] };
    });
    for (const plan of created) this.dispatchSoon({ plan });
    return result;
  }

  private idempotencyConflict(key: string): FabricError {
    return new FabricError("idempotency_conflict", `idempotency_key ${key} was already used under this parent for a different node type or inputs`, {
      details: { idempotency_key: key },
    });
  }

  // ---------------------------------------------------------------- node-run reports

  /** POST /v1/node-runs/{id}:complete. */
  async completeNodeRun(nodeRunId: string, req: NodeRunCompleteRequest, caller: Caller = {}): Promise<void> {
    // A composite completes itself; its children are completed by their own executors.
    if (caller.assignment && caller.assignment.node_run_id !== nodeRunId) throw assignmentRefused(caller, `node run ${nodeRunId}`);
    const found = await this.getNodeRunRecord(nodeRunId, caller);
    const inFlight = await this.withLock(found.run_id, async () => {
      const nr = (await this.o.store.getNodeRun(nodeRunId))!;
      if (isTerminal(nr.state)) {
        throw new FabricError("node_run_terminal", `node run ${nodeRunId} has already ended (${nr.state})`, { details: { node_run_id: nodeRunId, state: nr.state } });
      }
      const run = (await this.o.store.getRun(nr.run_id))!;
      let state = (req.state as string) === "succeeded" ? "completed" : (req.state as "completed" | "failed" | "canceled");
      const batch: WriteBatch = { runs: [], nodeRuns: [], events: [] };
      if (req.output_artifacts) nr.node_run.output_artifacts = req.output_artifacts;
      let err = state === "completed" ? undefined : ((req.error as FabricErrorBody | undefined) ?? errorBody(state === "canceled" ? "canceled" : "handler_error", `the node run ${state}`));
      if (state === "completed") {
        // Outputs that break the node type's output_schema are never passed on.
        const issues = await this.checkOutputs(nr, req.outputs ?? {});
        if (issues.length > 0) {
          state = "failed";
          err = errorBody("invalid_outputs", `the outputs of ${nr.node_run.node_type_ref.node_type_id} do not match its output_schema`, { retryable: false, details: { errors: issues } });
        }
      }
      // Descendants end first, so the NodeRun's own end (and the run's) are the last events.
      const inFlight = nr.node_run.kind === "composite" ? await this.endDescendants(batch, run, nr) : [];
      this.finishNodeRun(batch, run, nr, state, state === "completed" ? (req.outputs ?? {}) : undefined, err);
      await this.write(batch);
      return inFlight;
    });
    for (const d of inFlight) this.cancelAtExecutor(d);
  }

  /** Validation issues of outputs against the NodeRun's output_schema (none when the type has no schema). */
  private async checkOutputs(nr: NodeRunRecord, outputs: Record<string, unknown>): Promise<Array<{ path: string; message: string }>> {
    const ref = nr.node_run.node_type_ref;
    const key = `${ref.node_type_id}@${ref.version}`;
    let validate = this.outputValidators.get(key);
    if (!validate) {
      const nodeType = await this.o.resolver.nodeType(ref);
      validate = compileHandlerSchema(createHandlerAjv(), nodeType.output_schema as Record<string, unknown> | undefined);
      this.outputValidators.set(key, validate);
    }
    return validate(outputs) ? [] : dedupeIssues(issuesFromAjv(validate.errors));
  }

  /** Cancels every open descendant of a NodeRun that just ended, into `batch`; returns those that were in flight. */
  private async endDescendants(batch: WriteBatch, run: RunRecord, nr: NodeRunRecord): Promise<NodeRunRecord[]> {
    const all = await this.o.store.listNodeRuns(run.run_id);
    const children = new Map<string, NodeRunRecord[]>();
    for (const n of all) {
      if (!n.parent_node_run_id) continue;
      let list = children.get(n.parent_node_run_id);
      if (!list) children.set(n.parent_node_run_id, (list = []));
      list.push(n);
    }
    const inFlight: NodeRunRecord[] = [];
    const open: NodeRunRecord[] = [];
    const walk = (id: string) => {
      for (const c of children.get(id) ?? []) {
        if (!isTerminal(c.state)) open.push(c);
        walk(c.node_run_id);
      }
    };
    walk(nr.node_run_id);
    for (const c of open.sort((a, b) => b.depth - a.depth)) {
      if (c.state === "running" && c.node_run.executor_binding) inFlight.push(c);
      this.finishNodeRun(batch, run, c, "canceled", undefined, errorBody("canceled", `its parent ${nr.node_run_id} ended`));
    }
    return inFlight;
  }

  /** POST /v1/node-runs/{id}:evaluation. */
  async reportEvaluation(nodeRunId: string, req: NodeRunEvaluationReportRequest, caller: Caller = {}): Promise<void> {
    const found = await this.getNodeRunRecord(nodeRunId, caller);
    await this.withLock(found.run_id, async () => {
      const nr = (await this.o.store.getNodeRun(nodeRunId))!;
      const run = (await this.o.store.getRun(nr.run_id))!;
      if (isTerminal(run.state)) {
        throw new FabricError("node_run_terminal", `run ${run.run_id} has ended`, { details: { run_id: run.run_id, state: run.state } });
      }
      nr.node_run.evaluation_result = req.evaluation_result;
      const batch: WriteBatch = { nodeRuns: [nr], events: [event("node_evaluated", nr.run_id, nr.node_run_id, { evaluation_result: req.evaluation_result })] };
      if (req.recovery_action) {
        nr.node_run.recovery_actions = [...(nr.node_run.recovery_actions ?? []), req.recovery_action];
        batch.events!.push(event("recovery_applied", nr.run_id, nr.node_run_id, { recovery_action: req.recovery_action }));
      }
      await this.write(batch);
    });
  }

  /** How many NodeRuns are with executors now. */
  inFlightCount(): number {
    return this.inFlight;
  }
}

export type { NodeTypeRef };
