/**
 * The run lifecycle: starting a run (the `run.start` checkpoint, the envelope and budgets it runs under, the root's
 * allow and deny lists), cancelling it, failing it when its wall time runs out, and the person's side of approvals.
 */
import type { NodeRun, PolicyDecisionRequest, Run, RunContext, RunStartRequest } from "@nodefabric/schemas";
import { clock } from "../clock.js";
import { newId } from "../ids.js";
import { FabricError } from "../http/errors.js";
import { DECIDED_BY_KEY, DECISION_REASON_KEY, RunExistsError, type ApprovalRecord, type NewRunEvent, type NodeRunRecord, type RunRecord, type WriteBatch } from "../store/run-store.js";
import { MAX_TOKENS_KEY } from "./reservations.js";
import { mergeConstraints } from "./constraints.js";
import { publish } from "../observe/channels.js";
import { ATTR, context, inSpan, ROOT_CONTEXT, spanContextOf, trace, TraceFlags, TRACE_UNSAMPLED_KEY, type Span } from "../observe/tracing.js";
import { BUDGETS_KEY, CONSTRAINTS_KEY, USAGE_KEY, type Decided, type EngineCore, type RunUsage } from "./engine-core.js";
import type { Dispatcher, SendPlan } from "./dispatch.js";
import { listRefusal } from "./children.js";
import { errorBody, event, hashOf, isTerminal, type Caller, type Checkpoint } from "./engine-types.js";

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

export class RunLifecycle {
  private recovering = false;

  constructor(
    private readonly core: EngineCore,
    private readonly dispatcher: Dispatcher,
  ) {}

  /**
   * POST /v1/runs: stores the Run and its root NodeRun durably, then answers. The run's trace is anchored here: in a
   * `run.start` span whose ids the Run keeps in `run_context.trace`, for every later span of the run to descend from.
   * The span continues the trace the request's `run_context.trace` names, when it names one (linked to the request's
   * own span), and else the request's (its `traceparent`, or a new trace).
   */
  async start(req: RunStartRequest, caller: Caller = {}): Promise<Run> {
    const named = spanContextOf(req.run_context?.trace);
    const active = trace.getSpan(context.active())?.spanContext();
    const links = named && active && trace.isSpanContextValid(active) ? [{ context: active }] : undefined;
    const parent = named ? trace.setSpanContext(ROOT_CONTEXT, named) : context.active();
    const ref = req.root_node_type_ref;
    const attributes = { [ATTR.nodeTypeId]: ref.node_type_id, [ATTR.nodeTypeVersion]: ref.version, ...(req.run_id ? { [ATTR.runId]: req.run_id } : {}) };
    const { run, created } = await inSpan(`run.start ${ref.node_type_id}`, { parent, attributes, links }, (span) => this.startRun(req, caller, span));
    if (created) publish("runStarted", () => ({ node_type_id: ref.node_type_id }));
    return run;
  }

  private async startRun(req: RunStartRequest, caller: Caller, span: Span): Promise<{ run: Run; created: boolean }> {
    const core = this.core;
    // Only a client-chosen run_id can be repeated, so only then is the request's hash worth its cost.
    const requestHash = req.run_id ? hashOf({ req, tenant: caller.tenant_id ?? null }) : "";
    const runId = req.run_id ?? newId("run");
    // The same run_id started again answers the run it started (the same request) or a conflict (another one).
    const repeated = (existing: RunRecord): { run: Run; created: false } => {
      if (existing.request_hash === requestHash) return { run: existing.run, created: false };
      // Another tenant's run id answers the same as any other conflict, without revealing the run.
      throw new FabricError("run_already_exists", `run ${runId} already exists with a different request`, { details: { run_id: runId } });
    };
    const started = await core.withLock(runId, async () => {
      if (req.run_id) {
        const existing = await core.store.getRun(req.run_id);
        if (existing) return repeated(existing);
      }
      const nodeType = await core.o.resolver.nodeType(req.root_node_type_ref);
      const now = clock.now();
      const nowIso = new Date(now).toISOString();
      const envelope = mergeConstraints(req.constraints, nodeType.constraints);
      const budgets = envelope.budgets;
      const runContext: RunContext = { ...(req.run_context ?? {}) };
      stampIdentity(runContext, caller);
      // The run's anchor: the ids of this span, so that every later span of the run joins this trace.
      const anchor = span.spanContext();
      const anchored = trace.isSpanContextValid(anchor);
      if (anchored) runContext.trace = { ...runContext.trace, trace_id: anchor.traceId, span_id: anchor.spanId };
      span.setAttribute(ATTR.runId, runId);
      const rootId = newId("nr");
      const maxWall = budgets?.max_wall_time_ms;
      const run: Run = { run_id: runId, state: "queued", root_node_run_id: rootId, started_at: nowIso };
      if (Object.keys(runContext).length > 0) run.run_context = runContext;
      const usage: RunUsage = { steps: 1, external_calls: 0, cost: 0 };
      // What the run runs, on the Run itself: a list of runs can show it without reading every root NodeRun.
      const runExt: Record<string, unknown> = {
        [USAGE_KEY]: usage,
        "nodefabric.root_node_type_ref": { node_type_id: req.root_node_type_ref.node_type_id, version: req.root_node_type_ref.version },
      };
      if (req.constraints) runExt["nodefabric.constraints"] = req.constraints;
      // The token budget of the run's model calls (a constraint extension) is kept with the others (reservations.ts).
      const maxTokens = envelope.extensions?.[MAX_TOKENS_KEY];
      const kept = { ...budgets, ...(typeof maxTokens === "number" ? { max_tokens: maxTokens } : {}) };
      if (Object.keys(kept).length > 0) runExt[BUDGETS_KEY] = kept;
      if (req.metadata) runExt["nodefabric.metadata"] = req.metadata;
      if (anchored && (anchor.traceFlags & TraceFlags.SAMPLED) === 0) runExt[TRACE_UNSAMPLED_KEY] = true;
      run.extensions = runExt;
      const rootExt: Record<string, unknown> = { "nodefabric.attempt": 1, "nodefabric.depth": 0 };
      if (Object.keys(envelope).length > 0) rootExt[CONSTRAINTS_KEY] = envelope;
      const nodeRun: NodeRun = {
        node_run_id: rootId,
        run_id: runId,
        node_type_ref: { node_type_id: req.root_node_type_ref.node_type_id, version: req.root_node_type_ref.version },
        state: "queued",
        kind: nodeType.kind,
        created_at: nowIso,
        inputs: req.input,
        extensions: rootExt,
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
        lease_owner: core.o.instanceId,
        lease_expires_at: now + core.leaseMs,
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
      // Creating cannot overwrite: a coordinator sharing the store may create the same client-chosen run_id at the
      // same moment (a client retrying through another gateway), and the store lets only the first create it.
      const batch: WriteBatch = { runs: [runRec], nodeRuns: [nrRec], events, approvals: [], creates: [runId] };
      const write = async (): Promise<{ run: Run; created: false } | undefined> => {
        try {
          await core.write(batch);
          return undefined;
        } catch (err) {
          if (!RunExistsError.is(err)) throw err;
          core.progress.delete(rootId);
          const existing = await core.store.getRun(runId);
          if (!existing) throw err;
          return repeated(existing);
        }
      };
      const end = async () => (await write()) ?? { run: runRec.run, created: true };
      // The run's allow and deny lists apply to its root as to any other node.
      const refusal = listRefusal(envelope, nodeRun.node_type_ref.node_type_id);
      if (refusal) {
        core.finishNodeRun(batch, runRec, nrRec, "failed", undefined, errorBody(refusal.code, refusal.message, { retryable: false, details: { constraint: refusal.constraint, node_type_ref: nodeRun.node_type_ref } }));
        return end();
      }
      if (budgets?.max_steps !== undefined && usage.steps > budgets.max_steps) {
        core.finishNodeRun(batch, runRec, nrRec, "failed", undefined, core.budgetError("max_steps", budgets.max_steps, usage.steps));
        return end();
      }
      let executeDecided: Decided | undefined;
      if (core.o.policy) {
        const startRequest: PolicyDecisionRequest = { action: "run.start", run_id: runId, node_type_ref: nodeRun.node_type_ref, run_context: runContext, constraints: envelope };
        // The root is dispatched at once when run.start allows it, so its node.run.execute question goes to the PDP in
        // the same exchange. Its answer is recorded only where it would have been asked: after run.start allowed.
        const executeRequest = core.asksTogether() && !core.stopped ? await this.dispatcher.executeQuestion(runRec, nrRec, nodeType) : undefined;
        const together = executeRequest ? await core.decideTogether([startRequest, executeRequest]) : undefined;
        const decision = together?.[0] ?? (await core.decide(startRequest));
        executeDecided = together?.[1];
        events.push(event("policy_decided", runId, undefined, { action: "run.start", ...decision.record }));
        if (decision.error) {
          core.finishNodeRun(batch, runRec, nrRec, "failed", undefined, decision.error);
          return end();
        }
        if (decision.decision?.decision === "require_approval") {
          // The run waits, queued, with nothing dispatched, until a person decides.
          await core.park(batch, nrRec, decision.decision, "run.start");
          return end();
        }
      }
      // The root's first dispatch step is decided now and written with the run: one transaction instead of two.
      const ended: NodeRunRecord[] = [];
      const plan: SendPlan | undefined = core.stopped ? undefined : await this.dispatcher.plan(batch, runRec, nrRec, nodeType, ended, executeDecided);
      const lost = await write();
      if (lost) return lost;
      if (plan) this.dispatcher.send(plan);
      else if (!isTerminal(nrRec.state) && nrRec.lease_owner && !nrRec.approval_id) this.dispatcher.sendClaimed(nrRec);
      return { run: runRec.run, created: true };
    });
    return started;
  }

  /** POST /v1/runs/{id}:cancel: cancels the run and every open NodeRun; a run that has ended is returned unchanged. */
  async cancel(runId: string, caller: Caller = {}): Promise<Run> {
    const core = this.core;
    await core.getRunRecord(runId, caller);
    const { run, inFlight } = await core.withLock(runId, async () => {
      const rec = (await core.store.getRun(runId))!;
      if (isTerminal(rec.state)) return { run: rec.run, inFlight: [] as NodeRunRecord[] };
      const batch: WriteBatch = { runs: [], nodeRuns: [], events: [] };
      const inFlight = await core.endOpenRun(batch, rec, "canceled", errorBody("canceled", "the run was canceled"));
      await core.write(batch);
      return { run: rec.run, inFlight };
    });
    for (const nr of inFlight) core.cancelAtExecutor(nr);
    return run;
  }

  /** Fails runs past their deadline and wakes the dispatcher for backoffs and expired leases. */
  async recover(): Promise<void> {
    const core = this.core;
    // While the database is down, the pass waits out the backoff (store-outage.ts) instead of failing every tick.
    if (this.recovering || core.stopped || core.outage.waiting()) return;
    this.recovering = true;
    try {
      const overdue = await core.store.listOverdueRuns(clock.now(), 100);
      core.outage.ok();
      for (const r of overdue) {
        const inFlight = await core.withLock(r.run_id, async () => {
          const rec = await core.store.getRun(r.run_id);
          if (!rec || isTerminal(rec.state)) return [];
          const budget = rec.deadline_at! - Date.parse(rec.run.started_at ?? new Date(rec.created_at).toISOString());
          const batch: WriteBatch = { runs: [], nodeRuns: [], events: [] };
          const error = errorBody("budget_exceeded", `the run exceeded its max_wall_time_ms of ${budget} ms`, { retryable: false, details: { budget: "max_wall_time_ms", max_wall_time_ms: budget } });
          const inFlight = await core.endOpenRun(batch, rec, "failed", error);
          await core.write(batch);
          return inFlight;
        });
        for (const nr of inFlight) core.cancelAtExecutor(nr);
      }
      core.wake();
    } catch (err) {
      if (!core.outage.failed(err, "recovering runs")) core.o.log.error({ err }, "recovery pass failed");
    } finally {
      this.recovering = false;
    }
  }

  /**
   * POST /v1/approvals/{id}:approve|:reject. A decision counts only while its NodeRun still waits for it: once the
   * NodeRun has ended (or the approval was closed), a different decision is refused with 409 and changes nothing,
   * and repeating the decision already taken answers the same (keeping the first reason). The person's reason, and
   * who they are, are kept in the approval's stored document next to the PolicyDecision that asked.
   */
  async resolveApproval(approvalId: string, decision: "approved" | "rejected", caller: Caller = {}, reason?: string): Promise<void> {
    const core = this.core;
    const notFound = () => new FabricError("approval_not_found", `no approval ${approvalId}`, { details: { approval_id: approvalId } });
    const approval = await core.store.getApproval(approvalId);
    if (!approval) throw notFound();
    const runCheck = await core.store.getRun(approval.run_id);
    if (!runCheck || (caller.tenant_id !== undefined && runCheck.tenant_id !== caller.tenant_id)) throw notFound();
    if (caller.assignment) throw new FabricError("permission_denied", "an assignment token cannot decide approvals", { details: { approval_id: approvalId } });
    await core.withLock(approval.run_id, async () => {
      const a = (await core.store.getApproval(approvalId))!;
      const nr = await core.store.getNodeRun(a.node_run_id);
      const refused = (why: string) =>
        new FabricError("node_run_terminal", `approval ${approvalId} cannot be ${decision}: ${why}`, {
          details: { approval_id: approvalId, approval_state: a.state, node_run_id: a.node_run_id, node_run_state: nr?.state },
        });
      if (a.state !== "pending") {
        if (a.state === decision) return;
        throw refused(a.state === "canceled" ? "its node run ended before anyone decided" : `it was already ${a.state}`);
      }
      if (!nr || isTerminal(nr.state) || nr.approval_id !== approvalId) throw refused(`its node run has already ended (${nr?.state ?? "gone"})`);
      const run = (await core.store.getRun(a.run_id))!;
      const checkpoint = ((a.decision["nodefabric.checkpoint"] as Checkpoint | undefined) ?? "node.run.execute") as Checkpoint;
      const batch: WriteBatch = { runs: [], nodeRuns: [], events: [], approvals: [{ ...a, state: decision, resolved_at: clock.now(), decision: decidedDoc(a.decision, caller, reason) }] };
      const data: Record<string, unknown> = { approval_id: approvalId, action: checkpoint, decision, state: decision };
      if (reason !== undefined) data.reason = reason;
      batch.events!.push(event("approval_resolved", a.run_id, a.node_run_id, data));
      if (decision === "approved") {
        nr.approval_id = null;
        core.markApproved(nr, checkpoint, approvalId);
        nr.available_at = clock.now();
        nr.lease_owner = null;
        nr.lease_expires_at = null;
        batch.nodeRuns!.push(nr);
      } else {
        // The person's reason travels with the failure, so a parent composite can say why it stopped.
        const details: Record<string, unknown> = { approval_id: approvalId, action: checkpoint };
        if (reason !== undefined) details.reason = reason;
        core.finishNodeRun(batch, run, nr, "failed", undefined, errorBody("approval_rejected", `approval ${approvalId} was rejected${reason !== undefined ? `: ${reason}` : ""}`, { retryable: false, details }));
      }
      await core.write(batch);
    });
    core.wake();
  }
}

/** The stored document of an approval once decided: what the PDP asked, plus the person's reason and subject. */
function decidedDoc(asked: ApprovalRecord["decision"], caller: Caller, reason: string | undefined): ApprovalRecord["decision"] {
  const doc = { ...asked };
  if (reason !== undefined) doc[DECISION_REASON_KEY] = reason;
  if (caller.sub !== undefined) doc[DECIDED_BY_KEY] = caller.iss !== undefined ? { sub: caller.sub, iss: caller.iss } : { sub: caller.sub };
  return doc;
}
