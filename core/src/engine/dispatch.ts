/**
 * Dispatch: claims dispatchable NodeRuns, asks the `node.run.execute` checkpoint, finds an executor, counts the
 * run's external calls against its budget, writes the NodeRun as `running` and only then sends it (an atomic
 * execute, or a composite's `:begin` with a fresh assignment token). Failures to reach an executor are retried with
 * backoff inside the same NodeRun.
 */
import type { AtomicExecuteRequest, AtomicExecuteResult, CompositeBeginRequest, ConstraintEnvelope, FabricErrorBody, NodeType, PolicyDecisionRequest } from "@nodefabric/schemas";
import { clock } from "../clock.js";
import { validatorFor } from "@nodefabric/schemas";
import { FabricError, isMalformedSuccess } from "../http/errors.js";
import { dedupeIssues, issuesFromAjv } from "../http/validation.js";
import type { NodeRunRecord, RunRecord, WriteBatch } from "../store/run-store.js";
import { FencedError } from "../store/run-store.js";
import { context, trace } from "../observe/tracing.js";
import { executorWaitPauseMs, retryDelayMs, retryPolicyOf, timeoutOf } from "./retry-policy.js";
import type { Decided, EngineCore } from "./engine-core.js";
import { runLogFields } from "../observe/log-fields.js";
import { errorBody, event, isTerminal, type DispatchPlan } from "./engine-types.js";
import { policyContextOf } from "./constraints.js";
import { RESERVATION_KEY, reserveFor, settleReservation } from "./reservations.js";

const LEASE_GRACE_MS = 10_000;
const isBeginResponse = validatorFor("composite_begin_response");

/** The failure of an executor that answered 2xx with something that is not what the contract says it sends. */
function protocolError(message: string, details?: Record<string, unknown>): FabricErrorBody {
  return errorBody("executor_protocol_error", message, { retryable: false, ...(details ? { details } : {}) });
}

/**
 * A NodeRun extension: how long it has been waiting for an executor it cannot reach. `since` (epoch ms) and `tries`
 * count the failures in a row; `total` counts every attempt that found no executor (not the handler's attempts).
 */
export const EXECUTOR_WAIT_KEY = "nodefabric.executor_wait";

function waitOf(ext: Record<string, unknown>): { since?: number; tries: number; total: number } {
  const w = (ext[EXECUTOR_WAIT_KEY] ?? {}) as { since?: unknown; tries?: unknown; total?: unknown };
  const count = (v: unknown) => (typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : 0);
  return { since: typeof w.since === "number" && Number.isFinite(w.since) ? w.since : undefined, tries: count(w.tries), total: count(w.total) };
}

/** The error a NodeRun fails with once it has waited `bound` ms for an executor: it names the bound. */
function waitedOut(last: FabricErrorBody, bound: number, waitedMs: number, tries: number): FabricErrorBody {
  return errorBody(
    "executor_unavailable",
    `no executor could take the NodeRun for ${(waitedMs / 1000).toFixed(1)} s (${tries} tries), past the bound coordinator.executor_wait_ms (${bound} ms): ${last.message}`,
    {
      retryable: true,
      details: { executor_wait_ms: bound, waited_ms: waitedMs, tries },
      cause: { code: last.code, message: last.message, ...(last.details ? { details: last.details } : {}) },
    },
  );
}

/** An executor's answer (or the failure to get one), on its way to being recorded. */
export interface ExecutorAnswer {
  runId: string;
  nodeRunId: string;
  attempt: number;
  nodeType: NodeType;
  durationMs: number;
  result?: AtomicExecuteResult;
  failure?: FabricErrorBody;
}

/** What the PDP is asked at `node.run.execute` for a NodeRun, under the envelope in force for it. */
function executeRequest(run: RunRecord, nr: NodeRunRecord, constraints: ConstraintEnvelope): PolicyDecisionRequest {
  return {
    action: "node.run.execute",
    run_id: nr.run_id,
    node_run_id: nr.node_run_id,
    node_type_ref: nr.node_run.node_type_ref,
    run_context: run.run.run_context,
    constraints,
    ...policyContextOf(nr.node_run),
  };
}

/** A plan with the envelope in force, as sent to the executor. */
export interface SendPlan extends DispatchPlan {
  constraints: ConstraintEnvelope;
}

/** Work for the dispatcher: a claimed NodeRun to prepare, or a plan to send. */
type DispatchWork = { claimed: NodeRunRecord } | { plan: SendPlan };

export class Dispatcher {
  private inFlight = 0;
  private pumpScheduled = false;
  private pumping = false;
  private pumpAgain = false;
  /** Work this coordinator holds but has no capacity for yet, with when it was queued. */
  private readonly localQueue: { work: DispatchWork; at: number }[] = [];
  /** Where executors' answers go; set by the engine to its results recorder. */
  onAnswer: (answer: ExecutorAnswer) => Promise<void> = async () => undefined;
  /** The base URL composite executors call back; set once the coordinator listens. */
  coordinatorEndpoint = "";

  constructor(
    private readonly core: EngineCore,
    private readonly maxInFlight: number,
  ) {
    core.wake = () => this.wake();
  }

  /** How many NodeRuns are with executors now. */
  inFlightCount(): number {
    return this.inFlight;
  }

  /** NodeRuns held here waiting for capacity, and when the oldest of them was queued (null with none). */
  waiting(): { count: number; oldestAt: number | null } {
    return { count: this.localQueue.length, oldestAt: this.localQueue[0]?.at ?? null };
  }

  /** Asks the dispatcher to look for work soon. */
  wake(): void {
    if (this.pumpScheduled || this.core.stopped) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      void this.pump();
    });
  }

  /** Sends a NodeRun this coordinator has planned and leased, as soon as there is capacity. */
  send(plan: SendPlan): void {
    this.dispatchSoon({ plan });
  }

  /** Dispatches a NodeRun this coordinator leased but could not plan yet. */
  sendClaimed(nr: NodeRunRecord): void {
    this.dispatchSoon({ claimed: nr });
  }

  private dispatchSoon(work: DispatchWork): void {
    if (this.core.stopped) return;
    if (this.inFlight >= this.maxInFlight) {
      this.localQueue.push({ work, at: clock.now() });
      return;
    }
    this.startDispatch(work);
  }

  private startDispatch(work: DispatchWork): void {
    this.inFlight++;
    const about = "plan" in work ? runLogFields(work.plan.run, work.plan.nr) : runLogFields(work.claimed.run_id, work.claimed);
    void this.dispatch(work)
      .catch((err) => {
        // A run another coordinator took over: its new holder dispatches the NodeRun again.
        if (FencedError.is(err)) this.core.o.log.info(about, "dropped a dispatch: the run moved to another coordinator");
        // The database went away: the NodeRun's lease runs out and it is claimed again once the database is back.
        else if (!this.core.outage.failed(err, "dispatching")) this.core.o.log.error({ err, ...about }, "dispatch failed");
      })
      .finally(() => {
        this.inFlight--;
        const next = this.localQueue.shift();
        if (next && !this.core.stopped) this.startDispatch(next.work);
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
      // While the database is down, claims are tried again only after the backoff (the recovery tick wakes us).
      if (this.core.outage.waiting()) return;
      while (!this.core.stopped && this.inFlight < this.maxInFlight) {
        const claimed = await this.core.store.claim({
          owner: this.core.o.instanceId,
          now: clock.now(),
          limit: Math.min(512, this.maxInFlight - this.inFlight),
          leaseMs: this.core.leaseMs,
        });
        this.core.outage.ok();
        if (claimed.length === 0) break;
        for (const rec of claimed) this.startDispatch({ claimed: rec });
      }
    } catch (err) {
      if (!this.core.outage.failed(err, "claiming work")) this.core.o.log.error({ err }, "claiming work failed");
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
    const plan = "plan" in work ? work.plan : await this.core.withLock(work.claimed.run_id, () => this.prepare(work.claimed.node_run_id));
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
    // Where the executor reports progress (POST /v1/node-runs/{id}:progress) and saves checkpoints, with a token
    // acting for this NodeRun. Most handlers do neither, so the token is signed only when it may be used: an executor
    // of this process mints it at the first report (with the claims it would have had now); one elsewhere is sent it
    // unless this coordinator checks no token (auth disabled) and shares its store with no coordinator that might.
    let assignmentToken: (() => Promise<string>) | undefined;
    if (this.coordinatorEndpoint) {
      body.extensions!["nodefabric.coordinator_endpoint"] = this.coordinatorEndpoint;
      const claims = { run_id: nr.run_id, node_run_id: nr.node_run_id };
      if (this.core.o.executors.inProcess?.(endpoint)) assignmentToken = this.core.tokens.minter(claims);
      else if (this.core.assignmentTokensChecked) body.extensions!["nodefabric.assignment_token"] = await this.core.tokens.mint(claims);
    }
    // What an earlier execution of this NodeRun saved to resume from (POST /v1/node-runs/{id}:checkpoint).
    const saved = nr.node_run.extensions?.["nodefabric.checkpoint"] as { data?: unknown } | undefined;
    if (saved && typeof saved.data === "object" && saved.data !== null) body.extensions!["nodefabric.checkpoint"] = saved.data;
    if (Object.keys(plan.constraints).length > 0) body.constraints = plan.constraints;
    if (run.run.run_context) body.run_context = run.run.run_context;
    const key = `${nr.node_run_id}:${nr.attempt}`;
    const started = clock.now();
    let result: AtomicExecuteResult | undefined;
    let failure: FabricErrorBody | undefined;
    const span = this.core.openNodeRunSpan(nr, run, endpoint);
    const execute = () => this.core.o.executors.execute(endpoint, body, { idempotencyKey: key, timeoutMs: Math.max(1, deadline - clock.now()) + 5_000, assignmentToken });
    try {
      // An executor at its concurrency limit answers 503 (or 429): wait and offer the same attempt again while the
      // deadline allows, without spending an attempt on it.
      for (let bounce = 0; ; bounce++) {
        try {
          result = span ? await context.with(trace.setSpan(context.active(), span), execute) : await execute();
          break;
        } catch (err) {
          const e = err as FabricError;
          const overloaded = FabricError.is(e) && (e.code === "unavailable" || e.code === "rate_limited");
          const pause = Math.min(1000, 20 * 2 ** Math.min(bounce, 6)) * (0.5 + Math.random());
          if (!overloaded || this.core.stopped || clock.now() + pause >= deadline) throw err;
          await new Promise((resolve) => setTimeout(resolve, pause));
        }
      }
    } catch (err) {
      const e = err as FabricError;
      if (isMalformedSuccess(e)) {
        failure = protocolError(`the executor at ${endpoint} answered with a body that is not JSON, or too large`);
      } else {
        if (!FabricError.is(e) || e.code === "upstream_unavailable") this.core.o.resolver.markUnreachable?.(endpoint);
        failure = FabricError.is(e)
        ? errorBody(e.code === "unknown_node_type" ? "unknown_node_type" : "executor_unavailable", e.message, { retryable: e.code !== "unknown_node_type" })
        : errorBody("executor_unavailable", (err as Error).message, { retryable: true });
      }
    }
    await this.onAnswer({ runId: nr.run_id, nodeRunId: nr.node_run_id, attempt: nr.attempt, nodeType, durationMs: clock.now() - started, result, failure });
    // Recorded: the NodeRun ended or has its next attempt, so this key is never sent again (an executor's answer only:
    // after a transport failure the executor may still hold a result that a delivery of the same key must find).
    if (result) this.core.o.executors.answerRecorded?.(endpoint, key);
  }

  /** The `:begin` of a composite, with a freshly minted assignment token and the envelope in force. */
  private async beginRequest(nr: NodeRunRecord, run: RunRecord, nodeType: NodeType): Promise<CompositeBeginRequest> {
    const body: CompositeBeginRequest = {
      run_id: nr.run_id,
      node_run_id: nr.node_run_id,
      node_type_ref: nr.node_run.node_type_ref,
      inputs: nr.node_run.inputs ?? {},
      coordinator_endpoint: this.coordinatorEndpoint,
      assignment_token: await this.core.tokens.mint({ run_id: nr.run_id, node_run_id: nr.node_run_id }),
      constraints: await this.core.envelopeOf(nr, run, nodeType),
      extensions: { "nodefabric.attempt": nr.attempt },
    };
    if (run.run.run_context) body.run_context = run.run.run_context;
    this.core.noteTokenMinted(nr.node_run_id);
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
      const nodeType = await this.core.o.resolver.nodeType(nr.node_run.node_type_ref);
      await this.core.o.executors.begin(endpoint, await this.beginRequest(nr, run, nodeType));
    } catch (err) {
      this.core.o.log.warn({ err, ...runLogFields(run, nr) }, "could not send a fresh assignment token");
    }
  }

  /** Hands a composite to its executor; one that refuses or cannot be reached is retried later. */
  private async begin(plan: SendPlan): Promise<void> {
    const { nr, endpoint, run, nodeType } = plan;
    let failure: FabricErrorBody | undefined;
    const span = this.core.openNodeRunSpan(nr, run, endpoint);
    try {
      const request = await this.beginRequest(nr, run, nodeType);
      const begin = () => this.core.o.executors.begin(endpoint, request);
      const res: unknown = span ? await context.with(trace.setSpan(context.active(), span), begin) : await begin();
      if (!isBeginResponse(res)) {
        failure = protocolError(`the composite executor at ${endpoint} answered :begin with something that is not a CompositeBeginResponse`, {
          errors: dedupeIssues(issuesFromAjv(isBeginResponse.errors)),
        });
      } else if (res.accepted) {
        if (waitOf(nr.node_run.extensions ?? {}).since !== undefined) await this.executorReached(nr);
        return;
      }
      else failure = errorBody("executor_unavailable", res.message ?? "the composite executor did not accept the NodeRun", { retryable: true });
    } catch (err) {
      const e = err as FabricError;
      if (isMalformedSuccess(e)) {
        failure = protocolError(`the composite executor at ${endpoint} answered :begin with a body that is not JSON, or too large`);
      } else if (FabricError.is(e) && e.code === "unknown_node_type") {
        failure = errorBody("unknown_node_type", e.message, { retryable: false, details: e.details });
      } else {
        if (!FabricError.is(e) || e.code === "upstream_unavailable") this.core.o.resolver.markUnreachable?.(endpoint);
        failure = errorBody("executor_unavailable", (err as Error).message, { retryable: true });
      }
    }
    await this.core.withLock(nr.run_id, async () => {
      const fresh = await this.core.store.getNodeRun(nr.node_run_id);
      if (!fresh || isTerminal(fresh.state) || fresh.attempt !== nr.attempt) return;
      const freshRun = (await this.core.store.getRun(nr.run_id))!;
      const batch: WriteBatch = { runs: [], nodeRuns: [], events: [] };
      if (failure!.retryable) this.scheduleRetry(batch, freshRun, fresh, nodeType, failure!);
      else this.core.finishNodeRun(batch, freshRun, fresh, "failed", undefined, failure);
      await this.core.write(batch);
    });
    this.wake();
  }

  /** A composite's executor took it after a wait for one: a later outage gets a bound of its own. */
  private async executorReached(nr: NodeRunRecord): Promise<void> {
    await this.core.withLock(nr.run_id, async () => {
      const fresh = await this.core.store.getNodeRun(nr.node_run_id);
      if (!fresh || isTerminal(fresh.state) || fresh.attempt !== nr.attempt) return;
      const ext = { ...fresh.node_run.extensions };
      ext[EXECUTOR_WAIT_KEY] = { tries: 0, total: waitOf(ext).total };
      fresh.node_run.extensions = ext;
      await this.core.write({ nodeRuns: [fresh] });
    });
  }

  /** Prepares a claimed NodeRun (under its run's lock): recovers what a dead holder left, then plans it. */
  private async prepare(nodeRunId: string): Promise<SendPlan | undefined> {
    const core = this.core;
    const nr = await core.store.getNodeRun(nodeRunId);
    if (!nr || isTerminal(nr.state) || nr.lease_owner !== core.o.instanceId || nr.approval_id) return undefined;
    const run = await core.store.getRun(nr.run_id);
    if (!run) return undefined;
    const batch: WriteBatch = { runs: [], nodeRuns: [], events: [] };
    if (isTerminal(run.state)) {
      core.finishNodeRun(batch, run, nr, "canceled", undefined, errorBody("canceled", "the run has ended"));
      await core.write(batch);
      return undefined;
    }
    const ext = { ...nr.node_run.extensions };
    const isComposite = nr.node_run.kind === "composite";
    if (isComposite && nr.state === "running" && !ext["nodefabric.retry_scheduled"]) {
      // A running composite whose lease ran out: if it made progress lately it is alive, so extend the lease;
      // otherwise send its `:begin` again (an executor that still drives it answers "already running").
      const last = core.progress.get(nr.node_run_id);
      if (last !== undefined && clock.now() - last < core.compositeLeaseMs) {
        nr.lease_expires_at = clock.now() + core.compositeLeaseMs;
        batch.nodeRuns!.push(nr);
        await core.write(batch);
        const minted = core.tokenMintedAt.get(nr.node_run_id) ?? 0;
        if (clock.now() - minted > (core.tokens.ttlSeconds * 1000) / 2) void this.refreshAssignment(nr, run);
        return undefined;
      }
    } else if ((nr.state === "assigned" || nr.state === "running") && !ext["nodefabric.retry_scheduled"]) {
      // A NodeRun found assigned or running without a scheduled retry was in flight when its holder died.
      // Its attempt's reservation is settled unanswered: the call may have been made, so the run counts all of it.
      settleReservation(core, batch, run, nr, "unanswered");
      delete ext[RESERVATION_KEY];
      nr.attempt += 1;
      batch.events!.push(event("node_run_retrying", nr.run_id, nr.node_run_id, { attempt: nr.attempt, reason: "lease_expired" }));
      core.attemptRetried(nr, "lease_expired");
    }
    delete ext["nodefabric.retry_scheduled"];
    ext["nodefabric.attempt"] = nr.attempt;
    nr.node_run.extensions = ext;

    let nodeType: NodeType;
    try {
      nodeType = await core.o.resolver.nodeType(nr.node_run.node_type_ref);
    } catch (err) {
      const e = err as FabricError;
      if (FabricError.is(e) && e.statusCode === 404) {
        core.finishNodeRun(batch, run, nr, "failed", undefined, errorBody("unknown_node_type", e.message, { details: { node_type_ref: nr.node_run.node_type_ref } }));
      } else {
        this.scheduleRetry(batch, run, nr, undefined, errorBody("executor_unavailable", `the registry could not be reached: ${(err as Error).message}`, { retryable: true }));
      }
      await core.write(batch);
      return undefined;
    }
    const ended: NodeRunRecord[] = [];
    const plan = await this.plan(batch, run, nr, nodeType, ended);
    await core.write(batch);
    for (const n of ended) core.cancelAtExecutor(n);
    return plan;
  }

  /**
   * Decides, into `batch`, what happens to a leased NodeRun: it fails (policy, budget), waits for an approval, waits
   * for an executor, or moves to `running` and is returned as a plan to send. The caller writes the batch before
   * acting on the plan, and then tells the executors of the NodeRuns put in `ended` (in flight when a budget
   * ended the run). `asked` is the PDP's answer to executeQuestion(run, nr, nodeType), when the caller already
   * asked it together with another question; without it the PDP is asked here.
   */
  async plan(batch: WriteBatch, run: RunRecord, nr: NodeRunRecord, nodeType: NodeType, ended: NodeRunRecord[], asked?: Decided): Promise<SendPlan | undefined> {
    const core = this.core;
    const constraints = await core.envelopeOf(nr, run, nodeType);
    if (core.o.policy && !core.approvedAt(nr, "node.run.execute")) {
      const d = asked ?? (await core.decide(executeRequest(run, nr, constraints)));
      batch.events!.push(event("policy_decided", nr.run_id, nr.node_run_id, { action: "node.run.execute", ...d.record }));
      if (d.error) {
        core.finishNodeRun(batch, run, nr, "failed", undefined, d.error);
        return undefined;
      }
      if (d.decision?.decision === "require_approval") {
        await core.park(batch, nr, d.decision, "node.run.execute");
        return undefined;
      }
    }

    const kind = nodeType.kind === "composite" ? "composite" : "atomic";
    if (kind === "atomic") {
      // Every attempt sent to an executor is an external call; the one that would pass the budget is not sent.
      const limit = core.budgetsOf(run).max_external_calls;
      const used = core.usageOf(run).external_calls;
      if (limit !== undefined && used + 1 > limit) {
        batch.nodeRuns!.push(nr);
        ended.push(...(await core.endOpenRun(batch, run, "failed", core.budgetError("max_external_calls", limit, used + 1))));
        return undefined;
      }
    }
    const executor = await core.o.resolver.executorFor(nr.node_run.node_type_ref, kind);
    if (!executor) {
      return this.scheduleRetry(batch, run, nr, nodeType, errorBody("executor_unavailable", `no ${kind} executor serves ${nr.node_run.node_type_ref.node_type_id}@${nr.node_run.node_type_ref.version}`, { retryable: true }));
    }
    if (kind === "atomic") {
      // A model call reserves the most it can spend from what the run has left, in this write (reservations.ts).
      const refused = reserveFor(core, batch, run, nr, nodeType);
      if (refused) {
        core.finishNodeRun(batch, run, nr, "failed", undefined, refused);
        return undefined;
      }
      core.addUsage(batch, run, { external_calls: 1 });
    }

    const now = clock.now();
    const nowIso = new Date(now).toISOString();
    const timeoutMs = timeoutOf(nodeType);
    const deadline = Math.min(now + timeoutMs, run.deadline_at ?? Number.POSITIVE_INFINITY);
    if (nr.state === "queued") {
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
    nr.lease_expires_at = kind === "composite" ? now + core.compositeLeaseMs : deadline + LEASE_GRACE_MS;
    if (kind === "composite") core.noteProgress(nr.node_run_id, now);
    batch.nodeRuns!.push(nr);
    if (run.state === "queued") {
      run.state = "running";
      run.run.state = "running";
      if (!batch.runs!.includes(run)) batch.runs!.push(run);
    }
    return { nr, nodeType, endpoint: executor.endpoint, deadline, run, constraints };
  }

  /**
   * The `node.run.execute` question plan() asks the PDP for a leased NodeRun, so a caller can ask it ahead, together
   * with another question, and hand plan() the answer; undefined when plan() asks none (no PDP, or already approved).
   */
  async executeQuestion(run: RunRecord, nr: NodeRunRecord, nodeType: NodeType): Promise<PolicyDecisionRequest | undefined> {
    if (!this.core.o.policy || this.core.approvedAt(nr, "node.run.execute")) return undefined;
    return executeRequest(run, nr, await this.core.envelopeOf(nr, run, nodeType));
  }

  /**
   * Schedules another attempt after a pause into `batch`, or fails the NodeRun. Two kinds of failure are told apart
   * (docs/upstream-failures.md, "Retries" and "An executor that cannot be reached"):
   * - `executor_unavailable`: no executor could take the work (unreachable, none in the directory, shut down mid-call).
   *   The NodeRun waits it out: tried again with a growing pause (EXECUTOR_WAIT_FIRST_PAUSE_MS doubling up to
   *   EXECUTOR_WAIT_MAX_PAUSE_MS) until it has waited `executorWaitMs` since the first such failure in a row, without
   *   spending the node type's attempts; past that bound it fails, its error naming the bound.
   * - any other retryable failure: the node type's retry policy (attempts and backoff).
   */
  scheduleRetry(batch: WriteBatch, run: RunRecord, nr: NodeRunRecord, nodeType: NodeType | undefined, error: FabricErrorBody): undefined {
    // The attempt's reservation, if results.ts has not settled it from an answer, counts whole.
    settleReservation(this.core, batch, run, nr, "unanswered");
    const policy = retryPolicyOf(nodeType);
    const now = clock.now();
    const ext = { ...nr.node_run.extensions };
    const wait = waitOf(ext);
    let delay: number;
    if (error.code === "executor_unavailable") {
      const since = wait.since ?? now;
      const tries = wait.tries + 1;
      const bound = this.core.executorWaitMs;
      if (now - since >= bound) {
        this.core.finishNodeRun(batch, run, nr, "failed", undefined, waitedOut(error, bound, now - since, tries));
        return undefined;
      }
      delay = Math.max(0, Math.min(executorWaitPauseMs(tries), since + bound - now));
      ext[EXECUTOR_WAIT_KEY] = { since, tries, total: wait.total + 1 };
    } else {
      // Attempts that only found no executor are not the handler's: they do not count against max_attempts.
      const spent = nr.attempt - wait.total;
      if (spent >= policy.max_attempts) {
        this.core.finishNodeRun(batch, run, nr, "failed", undefined, error);
        return undefined;
      }
      // An upstream's Retry-After (details.retry_after_ms) lengthens the wait, within max_interval_ms.
      delay = retryDelayMs(policy, spent + 1, error);
      // An executor answered: a later outage gets a bound of its own.
      if (wait.total > 0) ext[EXECUTOR_WAIT_KEY] = { tries: 0, total: wait.total };
    }
    const next = nr.attempt + 1;
    nr.attempt = next;
    nr.available_at = now + delay;
    nr.lease_owner = null;
    nr.lease_expires_at = null;
    nr.node_run.extensions = { ...ext, "nodefabric.attempt": next, "nodefabric.retry_scheduled": true };
    batch.nodeRuns!.push(nr);
    batch.events!.push(event("node_run_retrying", nr.run_id, nr.node_run_id, { attempt: next, delay_ms: delay, error }));
    this.core.o.log.warn({ ...runLogFields(run, nr), attempt: next, delay_ms: delay, error_code: error.code }, `NodeRun attempt ${next - 1} failed (${error.code}); retrying in ${delay} ms`);
    this.core.attemptRetried(nr, error.code, error);
    return undefined;
  }

}
