/**
 * The state the parts of the coordinator's engine share, and the one way each shared step is done: per-run locks,
 * the tick writer, policy questions, parking a NodeRun for approval, the envelope of constraints in force, the
 * run's usage against its budgets, and every ending of a NodeRun or a run. An ending never touches a record that
 * has already ended: terminal states do not change.
 */
import type { ConstraintEnvelope, FabricErrorBody, NodeType, PolicyDecision, PolicyDecisionRequest, RunEvent } from "@nodefabric/schemas";
import { clock } from "../clock.js";
import { newId } from "../ids.js";
import { FabricError } from "../http/errors.js";
import type { ApprovalRecord, NodeRunRecord, RunRecord, RunStore, WriteBatch } from "../store/run-store.js";
import { EventHub } from "./event-hub.js";
import { publish } from "../observe/channels.js";
import { trackCache } from "../observe/caches.js";
import { ATTR, context, endSpan, inSpan, recording, runTraceContext, SpanKind, tracer, tracingOn, type Context, type Span } from "../observe/tracing.js";
import { TickWriter } from "./tick-writer.js";
import { StoreOutage } from "./store-outage.js";
import { AssignmentTokens } from "./assignment-tokens.js";
import { DEFAULT_EXECUTOR_WAIT_MS } from "./retry-policy.js";
import { mergeConstraints } from "./constraints.js";
import { MAX_TOKENS_KEY, settleReservation } from "./reservations.js";
import { assignmentRefused, errorBody, event, isTerminal, type Caller, type Checkpoint, type RunEngineOptions } from "./engine-types.js";

/** What a run has used so far, kept durably on the Run as `extensions["nodefabric.usage"]`. */
export interface RunUsage {
  /** NodeRuns created in the run, the root included. */
  steps: number;
  /** Atomic executions sent to executors, every attempt counted. */
  external_calls: number;
  /** The sum of the cost executors reported (`extensions["nodefabric.cost"]` of AtomicExecuteResults). */
  cost: number;
  /** Tokens model calls used, as settled (reservations.ts); present once the run made a model call. */
  tokens?: number;
  /** Tokens reserved by model calls in flight. */
  reserved_tokens?: number;
  /** Cost reserved by model calls in flight. */
  reserved_cost?: number;
}

/** The run's usage fields of model calls (reservations.ts), written only once a run has made one. */
const MODEL_USAGE = ["tokens", "reserved_tokens", "reserved_cost"] as const;

/** A run's budgets: the envelope's, and the token budget of its model calls (`nodefabric.llm.max_tokens`). */
type Budgets = NonNullable<ConstraintEnvelope["budgets"]> & { max_tokens?: number };

/** The Run extension holding the envelope's budgets, fixed when the run starts. */
export const BUDGETS_KEY = "nodefabric.budgets";
/** The Run extension holding what the run has used (RunUsage). */
export const USAGE_KEY = "nodefabric.usage";
/** A NodeRun extension: the constraint envelope in force for it (and, merged further, for its descendants). */
export const CONSTRAINTS_KEY = "nodefabric.constraints";
/** A NodeRun extension: the checkpoints a person approved for it, each with its approval id. */
const APPROVED_KEY = "nodefabric.approvals";

/** The node type a run runs (its root's), as the Run records it. */
export function rootTypeOf(run: RunRecord): string {
  const ref = run.run.extensions?.["nodefabric.root_node_type_ref"] as { node_type_id?: unknown } | undefined;
  return typeof ref?.node_type_id === "string" ? ref.node_type_id : "unknown";
}

/** The PDP's answer at a checkpoint as the engine records it: the decision, its event's data, and the failure a deny means. */
export interface Decided {
  decision?: PolicyDecision;
  record: Record<string, unknown>;
  error?: FabricErrorBody;
}

/** What a decision means at the checkpoint `req` asked about. */
function decided(req: PolicyDecisionRequest, decision: PolicyDecision): Decided {
  const record: Record<string, unknown> = { decision: decision.decision };
  if (decision.reason_code) record.reason_code = decision.reason_code;
  if (decision.message) record.message = decision.message;
  if (decision.approval_ref) record.approval_ref = decision.approval_ref;
  if (decision.decision === "deny") {
    return { decision, record, error: errorBody("policy_denied", decision.message ?? `policy denied ${req.action}`, { details: { action: req.action, reason_code: decision.reason_code } }) };
  }
  return { decision, record };
}

/** A PDP that could not be reached counts as a deny (pdp_unavailable). */
function unreachable(err: unknown): Decided {
  const message = `the PDP could not be reached: ${(err as Error).message}`;
  return { record: { decision: "deny", reason_code: "pdp_unavailable", message }, error: errorBody("pdp_unavailable", message, { retryable: true }) };
}

/** A pending approval id that the PDP may name, when it is a safe id nobody used yet. */
const APPROVAL_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

export class EngineCore {
  readonly hub = new EventHub();
  readonly writer: TickWriter;
  readonly store: RunStore;
  readonly leaseMs: number;
  readonly compositeLeaseMs: number;
  /** How long a NodeRun waits for an executor it cannot reach (ms; docs/upstream-failures.md). */
  readonly executorWaitMs: number;
  readonly tokens: AssignmentTokens;
  /** Whether a coordinator may check the assignment tokens of atomic executions (RunEngineOptions.assignmentTokensChecked). */
  readonly assignmentTokensChecked: boolean;
  /** Whether the store is down, as the background loops saw it; they back off on it (store-outage.ts). */
  readonly outage: StoreOutage;
  /** When each composite last made progress (children created or ended, evaluations), in memory. */
  readonly progress = new Map<string, number>();
  /** When each composite's current assignment token was minted, in memory. */
  readonly tokenMintedAt = new Map<string, number>();
  private readonly locks = new Map<string, Promise<unknown>>();
  /** The open span of each NodeRun attempt this process dispatched, ended with the attempt (only while traced). */
  private readonly nodeRunSpans = new Map<string, Span>();
  /** The traced context each child NodeRun was created in (the composite's call), its spans' parent (in memory). */
  private readonly createdIn = new Map<string, Context>();
  stopped = false;
  /** Told of every event this process committed, after the hub (set by the engine when other coordinators write too). */
  afterPublish: (events: RunEvent[]) => void = () => undefined;
  /** Asks the dispatcher to look for work soon; set by the engine once its dispatcher exists. */
  wake: () => void = () => undefined;

  constructor(readonly o: RunEngineOptions) {
    this.store = o.store;
    this.writer = new TickWriter(o.store, (events) => {
      this.hub.publish(events);
      this.afterPublish(events);
    });
    this.leaseMs = o.leaseMs ?? 30_000;
    this.compositeLeaseMs = o.compositeLeaseMs ?? Math.min(this.leaseMs, 10_000);
    this.executorWaitMs = o.executorWaitMs ?? DEFAULT_EXECUTOR_WAIT_MS;
    this.tokens = o.assignmentTokens ?? new AssignmentTokens();
    this.assignmentTokensChecked = o.assignmentTokensChecked ?? true;
    // Lease renewal backs off too: the pause stays well inside a lease, so the database back means leases renewed.
    this.outage = new StoreOutage(o.log, Math.max(100, Math.min(2_000, Math.floor((o.runLeaseMs ?? 10_000) / 4))));
    // Per-NodeRun and per-run state of this coordinator: each entry leaves when its NodeRun (run) ends here, or is
    // taken by another coordinator (docs/memory.md).
    trackCache("engine.composite_progress", this, (c) => ({ entries: c.progress.size }));
    trackCache("engine.token_minted_at", this, (c) => ({ entries: c.tokenMintedAt.size }));
    trackCache("engine.run_locks", this, (c) => ({ entries: c.locks.size }));
    trackCache("engine.node_run_spans", this, (c) => ({ entries: c.nodeRunSpans.size + c.createdIn.size }));
    trackCache("engine.event_followers", this.hub, (h) => ({ entries: h.followers() }));
  }

  /** Runs `fn` after every earlier holder of `key` (a run id): changes to one run never interleave. */
  withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.locks.set(key, tail);
    void tail.then(() => {
      if (this.locks.get(key) === tail) this.locks.delete(key);
    });
    return next;
  }

  write(batch: WriteBatch): Promise<RunEvent[]> {
    return this.writer.write(batch);
  }

  // ---------------------------------------------------------------- tracing

  /** Remembers the traced context a child NodeRun is created in, so its attempts' spans descend from that call. */
  noteCreatedIn(nodeRunId: string): void {
    if (recording()) this.createdIn.set(nodeRunId, context.active());
  }

  /**
   * Opens the span of a NodeRun's attempt (`node_run <node_type_id>`), a child of the call that created it, or else
   * of the run's anchor: so after a restart, in another coordinator, it is still in the run's trace. The span stays
   * open until the attempt ends (its NodeRun ends, or is retried). Not sampled, it records nothing but is still the
   * context of the executor's call, so the decision goes on. Undefined when no SDK is registered.
   */
  openNodeRunSpan(nr: NodeRunRecord, run: RunRecord, endpoint?: string): Span | undefined {
    if (!tracingOn()) return undefined;
    const parent = this.createdIn.get(nr.node_run_id) ?? runTraceContext(run.run);
    const ref = nr.node_run.node_type_ref;
    const span = tracer.startSpan(`node_run ${ref.node_type_id}`, {
      kind: SpanKind.INTERNAL,
      attributes: {
        [ATTR.runId]: nr.run_id,
        [ATTR.nodeRunId]: nr.node_run_id,
        [ATTR.nodeTypeId]: ref.node_type_id,
        [ATTR.nodeTypeVersion]: ref.version,
        [ATTR.kind]: nr.node_run.kind ?? "atomic",
        [ATTR.attempt]: nr.attempt,
        ...(endpoint ? { "nodefabric.executor.endpoint": endpoint } : {}),
      },
    }, parent);
    if (span.isRecording()) {
      this.nodeRunSpans.get(nr.node_run_id)?.end();
      this.nodeRunSpans.set(nr.node_run_id, span);
    }
    return span;
  }

  /** Ends the open span of a NodeRun's attempt with the state it reached (a failure recorded as its status). */
  private closeNodeRunSpan(nodeRunId: string, state: string, error?: FabricErrorBody): void {
    const span = this.nodeRunSpans.get(nodeRunId);
    if (!span) return;
    this.nodeRunSpans.delete(nodeRunId);
    span.setAttribute(ATTR.state, state);
    endSpan(span, error && state !== "completed" ? error : undefined);
  }

  /** Ends every open span (the engine stops): their attempts go on elsewhere, or after the restart. */
  endSpans(): void {
    for (const [id, span] of this.nodeRunSpans) {
      span.setAttribute(ATTR.state, "handed_over");
      span.end();
      this.nodeRunSpans.delete(id);
    }
    this.createdIn.clear();
  }

  /** A NodeRun's attempt is given up to be tried again: its span ends, and observers learn why. */
  attemptRetried(nr: NodeRunRecord, reason: string, error?: FabricErrorBody): void {
    this.closeNodeRunSpan(nr.node_run_id, "retrying", error);
    publish("nodeRunRetrying", () => ({ node_type_id: nr.node_run.node_type_ref.node_type_id, reason, attempt: nr.attempt }));
  }

  // ---------------------------------------------------------------- reads

  /** A run visible to the caller, or 404 run_not_found. */
  async getRunRecord(runId: string, caller: Caller = {}): Promise<RunRecord> {
    if (caller.assignment && caller.assignment.run_id !== runId) throw assignmentRefused(caller, `run ${runId}`);
    const rec = await this.store.getRun(runId);
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
    const rec = await this.store.getNodeRun(nodeRunId);
    if (caller.assignment) {
      const bound = caller.assignment.node_run_id;
      if (!rec || (rec.node_run_id !== bound && rec.parent_node_run_id !== bound)) throw assignmentRefused(caller, `node run ${nodeRunId}`);
      return rec;
    }
    if (rec && caller.tenant_id !== undefined) {
      const run = await this.store.getRun(rec.run_id);
      if (!run || run.tenant_id !== caller.tenant_id) throw new FabricError("node_run_not_found", `no node run ${nodeRunId}`, { details: { node_run_id: nodeRunId } });
    }
    if (!rec) throw new FabricError("node_run_not_found", `no node run ${nodeRunId}`, { details: { node_run_id: nodeRunId } });
    return rec;
  }

  // ---------------------------------------------------------------- constraints

  /** The envelope in force for a NodeRun: stored on it when it was created, or rebuilt for records older than that. */
  async envelopeOf(nr: NodeRunRecord, run: RunRecord, nodeType?: NodeType): Promise<ConstraintEnvelope> {
    const stored = nr.node_run.extensions?.[CONSTRAINTS_KEY] as ConstraintEnvelope | undefined;
    if (stored) return stored;
    const type = nodeType ?? (await this.o.resolver.nodeType(nr.node_run.node_type_ref));
    return mergeConstraints(run.run.extensions?.["nodefabric.constraints"] as ConstraintEnvelope | undefined, type.constraints);
  }

  // ---------------------------------------------------------------- budgets

  usageOf(run: RunRecord): RunUsage {
    const u = run.run.extensions?.[USAGE_KEY] as Partial<RunUsage> | undefined;
    const legacySteps = run.run.extensions?.["nodefabric.node_count"];
    const out: RunUsage = {
      steps: typeof u?.steps === "number" ? u.steps : typeof legacySteps === "number" ? legacySteps : 1,
      external_calls: typeof u?.external_calls === "number" ? u.external_calls : 0,
      cost: typeof u?.cost === "number" ? u.cost : 0,
    };
    for (const k of MODEL_USAGE) if (typeof u?.[k] === "number") out[k] = u[k];
    return out;
  }

  /** Records new usage on the run (in `batch`). */
  addUsage(batch: WriteBatch, run: RunRecord, add: Partial<RunUsage>): RunUsage {
    const u = this.usageOf(run);
    const next: RunUsage = { steps: u.steps + (add.steps ?? 0), external_calls: u.external_calls + (add.external_calls ?? 0), cost: u.cost + (add.cost ?? 0) };
    // Sums of floating-point prices: what was reserved and released again must come back to exactly 0.
    const tidy = (v: number) => Math.max(0, Math.round(v * 1e12) / 1e12);
    if (MODEL_USAGE.some((k) => u[k] !== undefined || add[k] !== undefined)) for (const k of MODEL_USAGE) next[k] = tidy((u[k] ?? 0) + (add[k] ?? 0));
    const ext: Record<string, unknown> = { ...run.run.extensions, [USAGE_KEY]: next };
    delete ext["nodefabric.node_count"];
    run.run.extensions = ext;
    if (!(batch.runs ??= []).includes(run)) batch.runs.push(run);
    return next;
  }

  budgetsOf(run: RunRecord): Budgets {
    const stored = (run.run.extensions?.[BUDGETS_KEY] as Budgets | undefined) ?? {};
    if (stored.max_tokens !== undefined) return stored;
    // Runs started before the token budget was kept with the others have it in their constraints only.
    const t = (run.run.extensions?.["nodefabric.constraints"] as ConstraintEnvelope | undefined)?.extensions?.[MAX_TOKENS_KEY];
    return typeof t === "number" ? { ...stored, max_tokens: t } : stored;
  }

  /** The failure of a run that passed one of its budgets. */
  budgetError(budget: "max_steps" | "max_external_calls" | "max_cost", limit: number, wouldUse: number): FabricErrorBody {
    const what = { max_steps: "node runs", max_external_calls: "external calls", max_cost: "cost" }[budget];
    return errorBody("budget_exceeded", `the run passed its ${budget} of ${limit}: ${wouldUse} ${what}`, { retryable: false, details: { budget, limit, used: wouldUse } });
  }

  // ---------------------------------------------------------------- policy and approvals

  /** Asks the PDP; a deny, or an unreachable PDP, comes back as the failure to record. */
  async decide(req: PolicyDecisionRequest): Promise<Decided> {
    if (!recording()) return this.askPolicy(req);
    return inSpan(`policy ${req.action}`, { attributes: { "nodefabric.pdp.action": req.action, [ATTR.runId]: req.run_id } }, async (span) => {
      const out = await this.askPolicy(req);
      span.setAttribute("nodefabric.pdp.decision", out.decision?.decision ?? "error");
      return out;
    });
  }

  /** Whether the PDP may answer several questions in one exchange (a PDP over HTTP; one in process never needs to). */
  asksTogether(): boolean {
    return this.o.policy?.decideMany !== undefined;
  }

  /**
   * Asks several checkpoints in one exchange (PolicyClient.decideMany): each answer is what `decide` gives for its
   * request. Undefined when the PDP answers one question at a time: the caller then asks each with `decide` when it
   * reaches it, as it would have without this. An unreachable PDP answers every question as `decide` would.
   */
  async decideTogether(reqs: PolicyDecisionRequest[]): Promise<Decided[] | undefined> {
    if (!recording()) return this.askTogether(reqs);
    const actions = reqs.map((r) => r.action);
    return inSpan(`policy ${actions.join("+")}`, { attributes: { "nodefabric.pdp.actions": actions, [ATTR.runId]: reqs[0]?.run_id } }, async (span) => {
      const out = await this.askTogether(reqs);
      span.setAttribute("nodefabric.pdp.decisions", out ? out.map((d) => d.decision?.decision ?? "error") : ["one_at_a_time"]);
      return out;
    });
  }

  private async askPolicy(req: PolicyDecisionRequest): Promise<Decided> {
    try {
      return decided(req, await this.o.policy!.decide(req));
    } catch (err) {
      return unreachable(err);
    }
  }

  private async askTogether(reqs: PolicyDecisionRequest[]): Promise<Decided[] | undefined> {
    let decisions: PolicyDecision[] | undefined;
    try {
      decisions = await this.o.policy!.decideMany!(reqs);
    } catch (err) {
      return reqs.map(() => unreachable(err));
    }
    return decisions?.map((d, i) => decided(reqs[i]!, d));
  }

  /** Whether a person already approved this checkpoint for the NodeRun. */
  approvedAt(nr: NodeRunRecord, checkpoint: Checkpoint): boolean {
    const ext = nr.node_run.extensions ?? {};
    const approved = ext[APPROVED_KEY] as Record<string, string> | undefined;
    if (approved?.[checkpoint]) return true;
    // Records written before approvals covered every checkpoint knew only node.run.execute.
    return checkpoint === "node.run.execute" && typeof ext["nodefabric.approved"] === "string";
  }

  /** Records that a person approved a checkpoint for the NodeRun. */
  markApproved(nr: NodeRunRecord, checkpoint: Checkpoint, approvalId: string): void {
    const ext = { ...nr.node_run.extensions };
    ext[APPROVED_KEY] = { ...(ext[APPROVED_KEY] as Record<string, string> | undefined), [checkpoint]: approvalId };
    nr.node_run.extensions = ext;
  }

  /**
   * Parks a NodeRun until a person decides (into `batch`): it stays `queued` (or where it is), holds no lease and is
   * not dispatched. The PDP may name the approval; a name already taken, or not a safe id, gets one of ours.
   */
  async park(batch: WriteBatch, nr: NodeRunRecord, decision: PolicyDecision, checkpoint: Checkpoint): Promise<void> {
    let approvalId = decision.approval_ref?.approval_id;
    const inBatch = (id: string) => (batch.approvals ?? []).some((a) => a.approval_id === id);
    if (!approvalId || !APPROVAL_ID.test(approvalId) || inBatch(approvalId) || (await this.store.getApproval(approvalId))) approvalId = newId("apr");
    const approval: ApprovalRecord = {
      approval_id: approvalId,
      run_id: nr.run_id,
      node_run_id: nr.node_run_id,
      state: "pending",
      created_at: clock.now(),
      resolved_at: null,
      decision: { ...(decision as unknown as Record<string, unknown>), "nodefabric.checkpoint": checkpoint },
    };
    nr.approval_id = approvalId;
    nr.lease_owner = null;
    nr.lease_expires_at = null;
    nr.node_run.extensions = { ...nr.node_run.extensions, "nodefabric.approval_id": approvalId };
    (batch.approvals ??= []).push(approval);
    (batch.nodeRuns ??= []).push(nr);
    const data: Record<string, unknown> = { approval_id: approvalId, action: checkpoint };
    if (decision.reason_code) data.reason_code = decision.reason_code;
    if (decision.message) data.message = decision.message;
    (batch.events ??= []).push(event("approval_requested", nr.run_id, nr.node_run_id, data));
  }

  /** Closes the pending approvals of NodeRuns that end without a decision (into `batch`). */
  private async closeApprovals(batch: WriteBatch, nrs: NodeRunRecord[]): Promise<void> {
    for (const nr of nrs) {
      if (!nr.approval_id) continue;
      const approval = await this.store.getApproval(nr.approval_id);
      if (approval && approval.state === "pending") (batch.approvals ??= []).push({ ...approval, state: "canceled", resolved_at: clock.now() });
    }
  }

  // ---------------------------------------------------------------- endings

  /**
   * Moves a NodeRun to a terminal state inside `batch`; when it is the root, the run ends with it. A NodeRun that
   * has already ended is left as it is. Mutates the records it is given.
   */
  /**
   * Notes that a composite made progress now. Entries outlive their use when a composite ends on another coordinator
   * or a child ends after its parent; an entry older than a composite lease says nothing any more, nor does a token
   * age past the token's lifetime (a missing one means "refresh", as an old one does), so once the maps have grown,
   * what is that old is swept: both stay bounded by the composites live in the last lease.
   */
  noteProgress(nodeRunId: string, at = clock.now()): void {
    this.progress.set(nodeRunId, at);
    if (this.progress.size + this.tokenMintedAt.size > this.livenessSweepAt) this.sweepLiveness(clock.now());
  }

  /** Notes that a composite's assignment token was minted now (see noteProgress). */
  noteTokenMinted(nodeRunId: string, at = clock.now()): void {
    this.tokenMintedAt.set(nodeRunId, at);
    if (this.progress.size + this.tokenMintedAt.size > this.livenessSweepAt) this.sweepLiveness(clock.now());
  }

  private livenessSweepAt = 1024;

  private sweepLiveness(now: number): void {
    for (const [id, at] of this.progress) if (now - at >= this.compositeLeaseMs) this.progress.delete(id);
    const tokenLife = this.tokens.ttlSeconds * 1000;
    for (const [id, at] of this.tokenMintedAt) if (now - at >= tokenLife) this.tokenMintedAt.delete(id);
    this.livenessSweepAt = Math.max(1024, 2 * (this.progress.size + this.tokenMintedAt.size));
  }

  finishNodeRun(batch: WriteBatch, run: RunRecord, nr: NodeRunRecord, state: "completed" | "failed" | "canceled", outputs?: Record<string, unknown>, error?: FabricErrorBody): void {
    if (isTerminal(nr.state)) return;
    // An attempt still holding a reservation ends without an answer: the run counts all of it (reservations.ts).
    settleReservation(this, batch, run, nr, "unanswered");
    const nowIso = clock.isoNow();
    nr.state = state;
    nr.node_run.state = state;
    nr.node_run.ended_at = nowIso;
    nr.lease_owner = null;
    nr.lease_expires_at = null;
    nr.approval_id = null;
    // An ended composite needs neither its liveness nor its token age any more.
    this.progress.delete(nr.node_run_id);
    this.tokenMintedAt.delete(nr.node_run_id);
    if (state === "completed") nr.node_run.outputs = outputs ?? {};
    else delete nr.node_run.outputs;
    if (error && state !== "completed") nr.node_run.extensions = { ...nr.node_run.extensions, "nodefabric.error": error };
    (batch.nodeRuns ??= []).push(nr);
    // The outputs travel in the event, so a composite following its children needs no read per child.
    const data: Record<string, unknown> = { state };
    if (state === "completed") data.outputs = nr.node_run.outputs;
    if (error && state !== "completed") data.error = error;
    (batch.events ??= []).push(event("node_run_completed", nr.run_id, nr.node_run_id, data));
    if (nr.parent_node_run_id) this.noteProgress(nr.parent_node_run_id);
    this.closeNodeRunSpan(nr.node_run_id, state, error);
    this.createdIn.delete(nr.node_run_id);
    publish("nodeRunEnded", () => ({
      node_type_id: nr.node_run.node_type_ref.node_type_id,
      kind: nr.node_run.kind === "composite" ? "composite" : "atomic",
      state,
      duration_ms: Math.max(0, clock.now() - nr.created_at),
      ...(error && state !== "completed" ? { error_code: error.code } : {}),
    }));
    if (nr.node_run_id === run.run.root_node_run_id) this.finishRun(batch, run, state, outputs, error);
  }

  /** Ends a run inside `batch` (a run that has already ended is left as it is). */
  private finishRun(batch: WriteBatch, run: RunRecord, state: "completed" | "failed" | "canceled", outputs?: Record<string, unknown>, error?: FabricErrorBody): void {
    if (isTerminal(run.state)) return;
    run.state = state;
    run.run.state = state;
    run.run.ended_at = clock.isoNow();
    const ext = { ...run.run.extensions };
    if (state === "completed") ext["nodefabric.outputs"] = outputs ?? {};
    else ext["nodefabric.error"] = error ?? errorBody(state === "canceled" ? "canceled" : "handler_error", `the run ${state}`);
    run.run.extensions = ext;
    if (!(batch.runs ??= []).includes(run)) batch.runs.push(run);
    const data: Record<string, unknown> = { state };
    if (state !== "completed") data.error = ext["nodefabric.error"];
    (batch.events ??= []).push(event("run_completed", run.run_id, undefined, data));
    publish("runEnded", () => ({ node_type_id: rootTypeOf(run), state, duration_ms: Math.max(0, clock.now() - run.created_at) }));
    const failure = ext["nodefabric.error"] as FabricErrorBody | undefined;
    if (state !== "completed" && failure?.code === "budget_exceeded") {
      publish("budgetExceeded", () => ({ budget: String((failure.details as { budget?: unknown } | undefined)?.budget ?? "unknown") }));
    }
  }

  /**
   * Ends a run and every open NodeRun in it (cancel, budgets), into `batch`. NodeRuns already changed in `batch` are
   * taken as they are there. Returns the NodeRuns that were in flight, for their executors to be told.
   */
  async endOpenRun(batch: WriteBatch, run: RunRecord, state: "canceled" | "failed", error: FabricErrorBody): Promise<NodeRunRecord[]> {
    const pending = new Map((batch.nodeRuns ?? []).map((n) => [n.node_run_id, n]));
    // Only open ones: one that ended stays ended, whatever `batch` holds for it.
    const stored = await this.openNodeRuns(run.run_id);
    const storedIds = new Set(stored.map((n) => n.node_run_id));
    const all = stored.map((n) => pending.get(n.node_run_id) ?? n);
    for (const n of pending.values()) if (!storedIds.has(n.node_run_id)) all.push(n);
    const open = all.filter((n) => !isTerminal(n.state)).sort((a, b) => b.depth - a.depth);
    await this.closeApprovals(batch, open);
    const inFlight: NodeRunRecord[] = [];
    // Children first, so the run's last events are the root's end and run_completed.
    for (const nr of open) {
      if (nr.state === "running" && nr.node_run.executor_binding) inFlight.push(nr);
      this.finishNodeRun(batch, run, nr, state, undefined, error);
    }
    this.finishRun(batch, run, state, undefined, error);
    return inFlight;
  }

  /** The open NodeRuns of a run, from the store; one without `listOpenNodeRuns` reads them all and filters. */
  private async openNodeRuns(runId: string): Promise<NodeRunRecord[]> {
    if (this.store.listOpenNodeRuns) return this.store.listOpenNodeRuns(runId);
    return (await this.store.listNodeRuns(runId)).filter((n) => !isTerminal(n.state));
  }

  /** Cancels every open descendant of a NodeRun that is ending, into `batch`; returns those that were in flight. */
  async endDescendants(batch: WriteBatch, run: RunRecord, nr: NodeRunRecord): Promise<NodeRunRecord[]> {
    // Only the open NodeRuns of the run are read (a fan-out's composite ends with thousands of ended children): each
    // is a descendant when its chain of parents reaches `nr`. A parent that is not open itself (it ended and its
    // own end should have canceled this one) is read on its own, so the answer never rests on that.
    const candidates = await this.openNodeRuns(run.run_id);
    const parentOf = new Map<string, string | null>();
    for (const n of candidates) parentOf.set(n.node_run_id, n.parent_node_run_id);
    const verdict = new Map<string, boolean>([[nr.node_run_id, true]]);
    const descends = async (id: string): Promise<boolean> => {
      const chain: string[] = [];
      let at: string | null | undefined = id;
      let found = false;
      while (at) {
        const known = verdict.get(at);
        if (known !== undefined) {
          found = known;
          break;
        }
        chain.push(at);
        let parent = parentOf.get(at);
        if (parent === undefined) {
          parent = (await this.store.getNodeRun(at))?.parent_node_run_id ?? null;
          parentOf.set(at, parent);
        }
        at = parent;
      }
      for (const c of chain) verdict.set(c, found);
      return found;
    };
    const open: NodeRunRecord[] = [];
    for (const c of candidates) {
      if (c.node_run_id === nr.node_run_id || isTerminal(c.state)) continue;
      if (c.parent_node_run_id && (await descends(c.parent_node_run_id))) open.push(c);
    }
    await this.closeApprovals(batch, open);
    const inFlight: NodeRunRecord[] = [];
    for (const c of open.sort((a, b) => b.depth - a.depth)) {
      if (c.state === "running" && c.node_run.executor_binding) inFlight.push(c);
      this.finishNodeRun(batch, run, c, "canceled", undefined, errorBody("canceled", `its parent ${nr.node_run_id} ended`));
    }
    return inFlight;
  }

  /** Tells the executor of a NodeRun that was in flight that it ended; best effort. */
  cancelAtExecutor(nr: NodeRunRecord): void {
    const binding = nr.node_run.executor_binding;
    if (!binding) return;
    if (nr.node_run.kind === "composite") void this.o.executors.cancelComposite(binding.endpoint, nr.node_run_id);
    else void this.o.executors.cancel(binding.endpoint, nr.node_run_id);
  }
}
