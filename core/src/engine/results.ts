/**
 * Results: what executors answer and what composites report. Nothing an executor says is taken on trust: an
 * AtomicExecuteResult is checked against the contract (its schema, the NodeRun it answers, an end state, outputs
 * when completed) and its outputs against the node type's `output_schema` before a NodeRun completes with them.
 * Reported cost counts against the run's `max_cost`.
 */
import type { ValidateFunction } from "ajv";
import { validatorFor } from "@nodefabric/schemas";
import type { AtomicExecuteResult, FabricErrorBody, NodeRunCompleteRequest, NodeRunEvaluationReportRequest, NodeTypeRef } from "@nodefabric/schemas";
import { FabricError } from "../http/errors.js";
import { compileHandlerSchema, createHandlerAjv } from "@nodefabric/sdk/runtime";
import { dedupeIssues, issuesFromAjv } from "../http/validation.js";
import type { NodeRunRecord, RunRecord, WriteBatch } from "../store/run-store.js";
import type { EngineCore } from "./engine-core.js";
import { sumOf, trackCache } from "../observe/caches.js";
import type { Dispatcher, ExecutorAnswer } from "./dispatch.js";
import { assignmentRefused, errorBody, event, isTerminal, type Caller } from "./engine-types.js";
import { modelCallOf, settleReservation, tokensReported } from "./reservations.js";

const isAtomicResult = validatorFor("atomic_execute_result");

/** The result extension in which an executor reports what an execution cost. */
export const COST_KEY = "nodefabric.cost";

type Outcome = { state: "completed"; outputs: Record<string, unknown>; cost: number } | { state: "failed" | "canceled"; error: FabricErrorBody; cost: number };

interface PendingAnswer extends ExecutorAnswer {
  done: { resolve: () => void; reject: (err: unknown) => void };
}

/** What `POST /v1/node-runs/{id}:progress` carries: how far an execution is, as MCP's progress notifications say it. */
export interface ProgressReport {
  progress: number;
  total?: number;
  message?: string;
}

/** The NodeRun extension holding an execution's checkpoint, and the execute-request extension giving it back. */
export const CHECKPOINT_KEY = "nodefabric.checkpoint";

/** At most this many `node_run_progress` events per NodeRun, and not closer together than PROGRESS_MIN_INTERVAL_MS. */
export const PROGRESS_MAX_EVENTS = 1000;
export const PROGRESS_MIN_INTERVAL_MS = 100;

/** NodeRuns whose progress reports are remembered (oldest forgotten first). */
const MAX_PROGRESS_SEEN = 10_000;
/** Compiled output schemas kept, one per node type version (oldest dropped first; compiled again when asked). */
const MAX_OUTPUT_VALIDATORS = 2_000;

export class Results {
  private readonly pending = new Map<string, PendingAnswer[]>();
  /** When each NodeRun last reported progress, and how many events it has had (in memory, oldest dropped first). */
  private readonly progressSeen = new Map<string, { at: number; count: number }>();
  /**
   * The compiled output schema of each node type version, or the promise of it while its NodeType is looked up: the
   * first answers of a new node type often arrive together (64 at once in the bench), and they share one compile.
   */
  private readonly outputValidators = new Map<string, Promise<ValidateFunction>>();

  constructor(
    private readonly core: EngineCore,
    private readonly dispatcher: Dispatcher,
  ) {
    trackCache("engine.pending_answers", this, (r) => ({ entries: sumOf(r.pending.values(), (q) => q.length) }));
    trackCache("engine.progress_seen", this, (r) => ({ entries: r.progressSeen.size }), { max_entries: MAX_PROGRESS_SEEN });
    trackCache("engine.output_validators", this, (r) => ({ entries: r.outputValidators.size }), { max_entries: MAX_OUTPUT_VALIDATORS });
  }

  /**
   * Records an executor's answer. Answers for one run are grouped: whoever takes the run's lock applies every
   * answer queued for that run so far, in one batch, so a composite with thousands of children does not commit
   * them one lock turn (and one tick) at a time.
   */
  record(answer: ExecutorAnswer): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let queue = this.pending.get(answer.runId);
      if (!queue) {
        queue = [];
        this.pending.set(answer.runId, queue);
        void this.core.withLock(answer.runId, () => this.drain(answer.runId)).catch(() => undefined);
      }
      queue.push({ ...answer, done: { resolve, reject } });
    });
  }

  private async drain(runId: string): Promise<void> {
    const queue = this.pending.get(runId) ?? [];
    this.pending.delete(runId);
    const ended: NodeRunRecord[] = [];
    try {
      const run = await this.core.store.getRun(runId);
      const batch: WriteBatch = { runs: [], nodeRuns: [], events: [] };
      if (run) for (const item of queue) await this.apply(batch, run, item, ended);
      await this.core.write(batch);
      for (const item of queue) item.done.resolve();
    } catch (err) {
      for (const item of queue) item.done.reject(err);
    }
    for (const n of ended) this.core.cancelAtExecutor(n);
  }

  private async apply(batch: WriteBatch, run: RunRecord, item: ExecutorAnswer, ended: NodeRunRecord[]): Promise<void> {
    // An answer for a NodeRun that ended meanwhile (canceled, or its run failed a budget), or for a stale attempt,
    // changes nothing.
    if (isTerminal(run.state)) return;
    const nr = await this.core.store.getNodeRun(item.nodeRunId);
    if (!nr || isTerminal(nr.state) || nr.attempt !== item.attempt) return;
    const outcome = await this.outcomeOf(nr, item);
    const data: Record<string, unknown> = { state: outcome.state, attempt: item.attempt, duration_ms: item.durationMs };
    if (outcome.state !== "completed") data.error = outcome.error;
    if (outcome.cost > 0) data.cost = outcome.cost;
    // A model call's reservation settles to what the answer reports; an attempt that never reached an executor
    // releases it; an answer that breaks the contract says nothing to trust, so the run counts all of it.
    if (item.failure) settleReservation(this.core, batch, run, nr, "unsent");
    else if (outcome.state === "failed" && outcome.error.code === "executor_protocol_error") settleReservation(this.core, batch, run, nr, "unanswered");
    else {
      const tokens = tokensReported(modelCallOf(item.nodeType), outcome.state === "completed" ? outcome.outputs : undefined, outcome.state === "completed" ? undefined : outcome.error);
      if (tokens > 0) data.tokens = tokens;
      settleReservation(this.core, batch, run, nr, { tokens });
    }
    batch.events!.push(event("atomic_executed", nr.run_id, nr.node_run_id, data));

    if (outcome.cost > 0) {
      const usage = this.core.addUsage(batch, run, { cost: outcome.cost });
      const limit = this.core.budgetsOf(run).max_cost;
      if (limit !== undefined && usage.cost > limit) {
        const error = this.core.budgetError("max_cost", limit, usage.cost);
        this.core.finishNodeRun(batch, run, nr, "failed", undefined, error);
        ended.push(...(await this.core.endOpenRun(batch, run, "failed", error)));
        return;
      }
    }
    if (outcome.state === "completed") this.core.finishNodeRun(batch, run, nr, "completed", outcome.outputs);
    else if (outcome.state === "canceled") this.core.finishNodeRun(batch, run, nr, "canceled", undefined, outcome.error);
    else if (outcome.error.retryable === true) this.dispatcher.scheduleRetry(batch, run, nr, item.nodeType, outcome.error);
    else this.core.finishNodeRun(batch, run, nr, "failed", undefined, outcome.error);
  }

  /** What an answer means for its NodeRun, once checked. */
  private async outcomeOf(nr: NodeRunRecord, item: ExecutorAnswer): Promise<Outcome> {
    if (item.failure) return { state: "failed", error: item.failure, cost: 0 };
    const raw = item.result as unknown;
    const problems = this.protocolProblems(nr, raw);
    if (problems.length > 0) {
      return {
        state: "failed",
        cost: 0,
        error: errorBody("executor_protocol_error", `the executor's answer for ${nr.node_run_id} is not a valid AtomicExecuteResult: ${problems[0].message}`, {
          retryable: false,
          details: { errors: problems },
        }),
      };
    }
    const result = raw as AtomicExecuteResult;
    const cost = (result.extensions?.[COST_KEY] as number | undefined) ?? 0;
    const state = (result.state as string) === "succeeded" ? "completed" : (result.state as "completed" | "failed" | "canceled");
    if (state !== "completed") return { state, error: result.error as FabricErrorBody, cost };
    const outputs = result.outputs as Record<string, unknown>;
    const issues = await this.outputIssues(nr, outputs);
    if (issues.length > 0) {
      return {
        state: "failed",
        cost,
        error: errorBody("invalid_outputs", `the outputs of ${nr.node_run.node_type_ref.node_type_id} do not match its output_schema`, { retryable: false, details: { errors: issues } }),
      };
    }
    return { state, outputs, cost };
  }

  /** Why an executor's answer breaks the contract, if it does. */
  private protocolProblems(nr: NodeRunRecord, raw: unknown): Array<{ path: string; message: string }> {
    if (raw === null || typeof raw !== "object" || Array.isArray(raw)) return [{ path: "", message: "the answer is not a JSON object" }];
    const r = raw as Record<string, unknown>;
    // D1: a peer's `succeeded` is our `completed`.
    const normalised = r.state === "succeeded" ? { ...r, state: "completed" } : r;
    if (!isAtomicResult(normalised)) return dedupeIssues(issuesFromAjv(isAtomicResult.errors));
    const problems: Array<{ path: string; message: string }> = [];
    if (r.node_run_id !== nr.node_run_id) problems.push({ path: "/node_run_id", message: `it answers node run ${String(r.node_run_id)}, not ${nr.node_run_id}` });
    const state = normalised.state as string;
    if (!isTerminal(state)) problems.push({ path: "/state", message: `${state} is not an end state` });
    if (state === "completed" && (r.outputs === null || typeof r.outputs !== "object" || Array.isArray(r.outputs))) {
      problems.push({ path: "/outputs", message: "a completed result must carry outputs (D2)" });
    }
    if ((state === "failed" || state === "canceled") && (r.error === null || typeof r.error !== "object")) {
      problems.push({ path: "/error", message: `a ${state} result must carry an error` });
    }
    const cost = (r.extensions as Record<string, unknown> | undefined)?.[COST_KEY];
    if (cost !== undefined && (typeof cost !== "number" || !Number.isFinite(cost) || cost < 0)) {
      problems.push({ path: `/extensions/${COST_KEY}`, message: "a reported cost must be a number of at least 0" });
    }
    return problems;
  }

  /** Validation issues of outputs against the NodeRun's output_schema (none when the type has no schema). */
  private async outputIssues(nr: NodeRunRecord, outputs: Record<string, unknown>): Promise<Array<{ path: string; message: string }>> {
    const validate = await this.outputValidator(nr.node_run.node_type_ref);
    return validate(outputs) ? [] : dedupeIssues(issuesFromAjv(validate.errors));
  }

  /**
   * The validator of a node type's outputs, compiled once. A NodeType that cannot be looked up, or a schema that does
   * not compile, fails the answers waiting for it and is tried again by the next one: a failure is never kept.
   */
  private outputValidator(ref: NodeTypeRef): Promise<ValidateFunction> {
    const key = `${ref.node_type_id}@${ref.version}`;
    let pending = this.outputValidators.get(key);
    if (!pending) {
      const compiled = this.core.o.resolver.nodeType(ref).then((nodeType) => compileHandlerSchema(createHandlerAjv(), nodeType.output_schema as Record<string, unknown> | undefined));
      pending = compiled;
      this.outputValidators.set(key, compiled);
      compiled.catch(() => {
        if (this.outputValidators.get(key) === compiled) this.outputValidators.delete(key);
      });
      if (this.outputValidators.size > MAX_OUTPUT_VALIDATORS) this.outputValidators.delete(this.outputValidators.keys().next().value!);
    }
    return pending;
  }

  // ---------------------------------------------------------------- node-run reports

  /** POST /v1/node-runs/{id}:complete. */
  async complete(nodeRunId: string, req: NodeRunCompleteRequest, caller: Caller = {}): Promise<void> {
    // A composite completes itself; its children are completed by their own executors.
    if (caller.assignment && caller.assignment.node_run_id !== nodeRunId) throw assignmentRefused(caller, `node run ${nodeRunId}`);
    const found = await this.core.getNodeRunRecord(nodeRunId, caller);
    const inFlight = await this.core.withLock(found.run_id, async () => {
      const nr = (await this.core.store.getNodeRun(nodeRunId))!;
      if (isTerminal(nr.state)) {
        throw new FabricError("node_run_terminal", `node run ${nodeRunId} has already ended (${nr.state})`, { details: { node_run_id: nodeRunId, state: nr.state } });
      }
      const run = (await this.core.store.getRun(nr.run_id))!;
      let state = (req.state as string) === "succeeded" ? "completed" : (req.state as "completed" | "failed" | "canceled");
      const batch: WriteBatch = { runs: [], nodeRuns: [], events: [] };
      if (req.output_artifacts) nr.node_run.output_artifacts = req.output_artifacts;
      let err = state === "completed" ? undefined : ((req.error as FabricErrorBody | undefined) ?? errorBody(state === "canceled" ? "canceled" : "handler_error", `the node run ${state}`));
      if (state === "completed") {
        // Outputs that break the node type's output_schema are never passed on.
        const issues = await this.outputIssues(nr, req.outputs ?? {});
        if (issues.length > 0) {
          state = "failed";
          err = errorBody("invalid_outputs", `the outputs of ${nr.node_run.node_type_ref.node_type_id} do not match its output_schema`, { retryable: false, details: { errors: issues } });
        }
      }
      // Descendants end first, so the NodeRun's own end (and the run's) are the last events.
      const inFlight = nr.node_run.kind === "composite" ? await this.core.endDescendants(batch, run, nr) : [];
      this.core.finishNodeRun(batch, run, nr, state, state === "completed" ? (req.outputs ?? {}) : undefined, err);
      await this.core.write(batch);
      return inFlight;
    });
    for (const d of inFlight) this.core.cancelAtExecutor(d);
  }

  /**
   * POST /v1/node-runs/{id}:evaluation. Composites evaluate children after they end, so an ended NodeRun takes the
   * report; it records the evaluation only, and never changes the NodeRun's state, outputs or error.
   */
  /**
   * Records what an executor reports about an execution in progress as a `node_run_progress` event (an extension
   * event type). Only the NodeRun's own assignment token (sent with its execute request) or a service token may
   * report; reports for a NodeRun that is not running are dropped, and so are those past PROGRESS_MAX_EVENTS or
   * closer than PROGRESS_MIN_INTERVAL_MS to the previous one (the last one before the end is kept by the executor).
   * True when an event was written.
   */
  async progress(nodeRunId: string, report: ProgressReport, caller: Caller = {}): Promise<boolean> {
    if (caller.assignment && caller.assignment.node_run_id !== nodeRunId) throw assignmentRefused(caller, `node run ${nodeRunId}`);
    const found = await this.core.getNodeRunRecord(nodeRunId, caller);
    const now = Date.now();
    const seen = this.progressSeen.get(nodeRunId);
    if (seen && (seen.count >= PROGRESS_MAX_EVENTS || now - seen.at < PROGRESS_MIN_INTERVAL_MS)) return false;
    return this.core.withLock(found.run_id, async () => {
      const nr = await this.core.store.getNodeRun(nodeRunId);
      if (!nr || nr.state !== "running") return false;
      const data: Record<string, unknown> = { progress: report.progress, attempt: nr.attempt };
      if (report.total !== undefined) data.total = report.total;
      if (report.message !== undefined) data.message = report.message;
      await this.core.write({ events: [event("node_run_progress", nr.run_id, nr.node_run_id, data)] });
      this.progressSeen.set(nodeRunId, { at: now, count: (seen?.count ?? 0) + 1 });
      if (this.progressSeen.size > MAX_PROGRESS_SEEN) this.progressSeen.delete(this.progressSeen.keys().next().value!);
      return true;
    });
  }

  /**
   * Keeps what an execution asks to resume from (`POST /v1/node-runs/{id}:checkpoint`, an extension) on the NodeRun,
   * as `extensions["nodefabric.checkpoint"]` (`{ data, attempt, saved_at }`); the next execution of the NodeRun (a
   * retry, or a re-dispatch after its executor was lost) gets `data` back. Only while the NodeRun is running, and only
   * with its own assignment token or a service token; 409 node_run_terminal otherwise.
   */
  async checkpoint(nodeRunId: string, data: Record<string, unknown>, caller: Caller = {}): Promise<void> {
    if (caller.assignment && caller.assignment.node_run_id !== nodeRunId) throw assignmentRefused(caller, `node run ${nodeRunId}`);
    const found = await this.core.getNodeRunRecord(nodeRunId, caller);
    await this.core.withLock(found.run_id, async () => {
      const nr = (await this.core.store.getNodeRun(nodeRunId))!;
      if (nr.state !== "running") {
        throw new FabricError("node_run_terminal", `node run ${nodeRunId} is ${nr.state}, not running: its checkpoint is not kept`, { details: { node_run_id: nodeRunId, state: nr.state } });
      }
      nr.node_run.extensions = { ...nr.node_run.extensions, [CHECKPOINT_KEY]: { data, attempt: nr.attempt, saved_at: new Date().toISOString() } };
      await this.core.write({ nodeRuns: [nr] });
    });
  }

  async evaluation(nodeRunId: string, req: NodeRunEvaluationReportRequest, caller: Caller = {}): Promise<void> {
    const found = await this.core.getNodeRunRecord(nodeRunId, caller);
    await this.core.withLock(found.run_id, async () => {
      const nr = (await this.core.store.getNodeRun(nodeRunId))!;
      const run = (await this.core.store.getRun(nr.run_id))!;
      if (isTerminal(run.state)) {
        throw new FabricError("node_run_terminal", `run ${run.run_id} has ended`, { details: { run_id: run.run_id, state: run.state } });
      }
      nr.node_run.evaluation_result = req.evaluation_result;
      const batch: WriteBatch = { nodeRuns: [nr], events: [event("node_evaluated", nr.run_id, nr.node_run_id, { evaluation_result: req.evaluation_result })] };
      if (req.recovery_action) {
        nr.node_run.recovery_actions = [...(nr.node_run.recovery_actions ?? []), req.recovery_action];
        batch.events!.push(event("recovery_applied", nr.run_id, nr.node_run_id, { recovery_action: req.recovery_action }));
      }
      await this.core.write(batch);
    });
  }
}
