/**
 * Drives one composite NodeRun: runs its code (or plan) with a CompositeContext, follows the composite's event stream
 * (one stream, resumed with `after_seq` when it breaks, never polled) to learn how children end, and reports the
 * result with `:complete`. A composite ended by someone else (canceled, its run ended) stops without reporting.
 */
import type { FastifyBaseLogger } from "fastify";
import type {
  CandidateSet,
  CandidateSetRequest,
  CompositeBeginRequest,
  ConstraintEnvelope,
  EvaluationResult,
  FabricErrorBody,
  NodeRunCompleteRequest,
  NodeRunCreateSpec,
  NodeRunEvaluationReportRequest,
  PolicyDecision,
  RecoveryAction,
  RunEvent,
  SubtaskSpec,
} from "@nodefabric/schemas";
import { clock } from "../../clock.js";
import { FabricError } from "../../http/errors.js";
import { dedupeIssues, issuesFromAjv } from "../../http/validation.js";
import type { CoordinatorClient } from "../../clients/coordinator-client.js";
import type { SelectionClient } from "../../clients/selection-client.js";
import type { PolicyClient } from "../../engine/engine-types.js";
import { mergeConstraints } from "../../engine/constraints.js";
import { ChildFailedError } from "@nodefabric/sdk";
import { HandlerError } from "@nodefabric/sdk";
import type { CompositeContext, HandlerLogger, JsonObject } from "@nodefabric/sdk";
import { runLogFields } from "../../observe/log-fields.js";
import { ChildCalls, asHandlerError, isRetryable, pause, type ChildRequest } from "./child-calls.js";
import type { CompositeTarget } from "./composite-targets.js";
import { PLAN_POINTER, PlanEvaluationError, PlanInvalidError, runPlan, validatePlan } from "./plan/index.js";
import { ATTR, inSpan } from "../../observe/tracing.js";
import { fail } from "../../http/failure-codes.js";

export interface CompositeDriverOptions {
  begin: CompositeBeginRequest;
  target: CompositeTarget;
  client: CoordinatorClient;
  selection?: SelectionClient;
  /** Decides, per candidate, whether this run may create a child of it; the denied ones never reach `ctx.select`. */
  policy?: PolicyClient;
  log: FastifyBaseLogger;
  /** Called once when the driver stops, whatever the reason. */
  onEnd(driver: CompositeDriver): void;
}

/**
 * The events a driver acts on ("run_completed" also matches "node_run_completed"). Skipped events are never seen, so
 * a resumed stream may repeat some of them after the last seq seen; that is harmless, as they are skipped again.
 */
const FOLLOWED_TYPES = ["node_run_created", "node_run_completed", "run_completed"];

/** How long `:complete` is retried while the coordinator cannot be reached. */
const COMPLETE_RETRY_WINDOW_MS = 5 * 60_000;

function isPlainObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function describeValue(v: unknown): string {
  if (v === undefined) return "undefined";
  if (v === null) return "null";
  return Array.isArray(v) ? "an array" : `a ${typeof v}`;
}

/** The `error` a composite fails with, from what its code threw. */
export function failureOf(err: unknown): FabricErrorBody {
  if (ChildFailedError.is(err)) {
    return { code: "child_failed", message: err.message, details: { node_run_id: err.node_run_id, error: err.error } };
  }
  if (err instanceof PlanInvalidError) {
    return { code: "handler_error", message: err.message, details: { errors: err.issues } };
  }
  if (err instanceof PlanEvaluationError) {
    const details: Record<string, unknown> = { field: err.field };
    if (err.step !== undefined) details.step = err.step;
    if (err.item !== undefined) details.item = err.item;
    return { code: "handler_error", message: err.message, details };
  }
  if (HandlerError.is(err)) {
    const body: FabricErrorBody = { code: err.code, message: err.message };
    if (err.details !== undefined) body.details = err.details;
    if (err.retryable !== undefined) body.retryable = err.retryable;
    return body;
  }
  // Only the message crosses the wire: stacks stay in the executor's log.
  return { code: "handler_error", message: err instanceof Error ? err.message : `the composite threw ${describeValue(err)}` };
}

/** The options of a retried child that still apply: its constraints, metadata and binding. */
function retrySpecOf(spec: NodeRunCreateSpec): NodeRunCreateSpec | undefined {
  const base: Partial<NodeRunCreateSpec> = {};
  if (spec.constraints) base.constraints = spec.constraints;
  if (spec.metadata) base.metadata = spec.metadata;
  if (spec.candidate_set_id) base.candidate_set_id = spec.candidate_set_id;
  if (spec.binding_decision) base.binding_decision = spec.binding_decision;
  return Object.keys(base).length > 0 ? (base as NodeRunCreateSpec) : undefined;
}

/** One composite NodeRun being driven by this executor. */
export class CompositeDriver {
  readonly nodeRunId: string;
  private phase: "running" | "completing" | "done" = "running";
  private readonly cancelController = new AbortController();
  private readonly streamController = new AbortController();
  private lastSeq = -1;
  private readonly calls: ChildCalls;
  private token?: string;
  private logger?: HandlerLogger;
  private currentStream?: AbortController;

  constructor(private readonly o: CompositeDriverOptions) {
    this.nodeRunId = o.begin.node_run_id;
    this.token = o.begin.assignment_token;
    this.calls = new ChildCalls({
      runId: o.begin.run_id,
      parentId: o.begin.node_run_id,
      client: () => this.o.client,
      token: () => this.token,
      signal: this.cancelController.signal,
      log: o.log,
    });
  }

  /** Starts following the stream and running the composite, both in the background. */
  start(): void {
    void this.follow();
    const { begin } = this.o;
    const ref = begin.node_type_ref;
    const attempt = begin.extensions?.["nodefabric.attempt"];
    const attributes = {
      [ATTR.runId]: begin.run_id,
      [ATTR.nodeRunId]: begin.node_run_id,
      [ATTR.nodeTypeId]: ref.node_type_id,
      [ATTR.nodeTypeVersion]: ref.version,
      ...(typeof attempt === "number" ? { [ATTR.attempt]: attempt } : {}),
    };
    // The composite's calls (its children's creation) descend from this span, and so do the children's own spans.
    void inSpan(`composite ${ref.node_type_id}`, { attributes }, () => this.drive());
  }

  /**
   * Takes what a repeated `:begin` brings: a fresh token (the coordinator mints one per `:begin`, and the first may
   * expire) and the coordinator that sent it, which may be another one than before when coordinators share a
   * database and one took the run over. Calls and the event stream move to it.
   */
  refresh(token: string | undefined, client?: CoordinatorClient): void {
    if (token) this.token = token;
    if (client && client !== this.o.client) {
      this.o.client = client;
      this.currentStream?.abort();
    }
  }

  /** Stops driving without reporting: ctx.signal fires and pending calls reject. */
  stop(reason: "canceled" | "ended" | "shutdown"): void {
    if (this.phase === "done") return;
    this.phase = "done";
    const err = fail("canceled", reason === "shutdown" ? "the composite executor is shutting down" : "the composite was canceled");
    this.cancelController.abort(err);
    this.calls.failAll(err);
    this.streamController.abort();
    this.o.onEnd(this);
  }

  private isStopped(): boolean {
    return this.phase === "done";
  }

  private get log(): HandlerLogger {
    // A pino child per composite, made on first use.
    return (this.logger ??= this.o.log.child({
      ...runLogFields(this.o.begin, this.nodeRunId),
      node_type_id: this.o.begin.node_type_ref.node_type_id,
    }) as unknown as HandlerLogger);
  }

  private context(): CompositeContext {
    const { begin } = this.o;
    const calls = this.calls;
    const driver = this;
    return {
      run_id: begin.run_id,
      node_run_id: begin.node_run_id,
      node_type_ref: { node_type_id: begin.node_type_ref.node_type_id, version: begin.node_type_ref.version },
      signal: this.cancelController.signal,
      get log() {
        return driver.log;
      },
      ...(begin.constraints ? { constraints: begin.constraints } : {}),
      call: (ref, inputs, options) => calls.spawn(ref, inputs, options).result,
      spawn: (ref, inputs, options) => calls.spawn(ref, inputs, options),
      select: (subtask, constraints) => this.select(subtask, constraints),
      evaluate: (child, result, action) => this.evaluate(child, result, action),
      // Declarative plans written at run time (by a model, say): the same compiler and runner as a published plan,
      // whose steps are this composite's children.
      checkPlan: (plan) => validatePlan(plan).map((i) => ({ path: i.path.startsWith(PLAN_POINTER) ? i.path.slice(PLAN_POINTER.length) || "/" : i.path, message: i.message })),
      runPlan: (plan, inputs, options) =>
        runPlan(plan, inputs, {
          call: (ref, childInputs) => {
            const child = calls.spawn(ref, childInputs);
            options?.onChild?.(child);
            return child.result;
          },
          signal: this.cancelController.signal,
        }),
    };
  }

  private async drive(): Promise<void> {
    const { begin, target } = this.o;
    let body: NodeRunCompleteRequest;
    if (!target.validateInputs(begin.inputs)) {
      body = {
        state: "failed",
        error: {
          code: "invalid_inputs",
          message: `the inputs do not match the input_schema of ${begin.node_type_ref.node_type_id}`,
          details: { errors: dedupeIssues(issuesFromAjv(target.validateInputs.errors)) },
        },
      };
    } else {
      try {
        const outputs = await target.run(begin.inputs as JsonObject, this.context());
        body = isPlainObject(outputs)
          ? { state: "completed", outputs }
          : { state: "failed", error: { code: "handler_error", message: `the composite must resolve with a JSON object, not ${describeValue(outputs)}` } };
      } catch (err) {
        body = { state: "failed", error: failureOf(err) };
        if (!HandlerError.is(err) && !ChildFailedError.is(err)) this.log.debug({ err }, "composite threw");
      }
    }
    if (this.phase !== "running") return;
    this.phase = "completing";
    await this.complete(body);
    // A cancel may have stopped the driver while `:complete` was on its way.
    if (this.isStopped()) return;
    this.phase = "done";
    this.streamController.abort();
    this.o.onEnd(this);
  }

  private async complete(body: NodeRunCompleteRequest): Promise<void> {
    const until = clock.now() + COMPLETE_RETRY_WINDOW_MS;
    let delay = 100;
    for (;;) {
      try {
        await this.o.client.completeNodeRun(this.nodeRunId, body, this.token);
        return;
      } catch (err) {
        // Ended meanwhile (canceled, its run failed): nothing left to report.
        if (FabricError.is(err) && err.code === "node_run_terminal") return;
        if (!isRetryable(err) || clock.now() + delay > until) {
          this.o.log.error({ err, ...runLogFields(this.o.begin, this.nodeRunId) }, "the coordinator refused the composite's :complete");
          return;
        }
        await pause(delay);
        delay = Math.min(delay * 2, 2000);
      }
    }
  }

  /** Follows the composite's events until it ends, resuming after the last seq seen when the stream breaks. */
  private async follow(): Promise<void> {
    const signal = this.streamController.signal;
    let delay = 100;
    while (!signal.aborted) {
      const before = this.lastSeq;
      // One stream at a time, which `refresh` ends when the composite moves to another coordinator.
      const stream = new AbortController();
      const stopStream = () => stream.abort();
      signal.addEventListener("abort", stopStream, { once: true });
      this.currentStream = stream;
      try {
        await this.o.client.followNodeRunEvents(this.nodeRunId, (e) => this.onEvent(e), {
          afterSeq: this.lastSeq,
          token: this.token,
          signal: stream.signal,
          types: FOLLOWED_TYPES,
        });
      } catch (err) {
        if (signal.aborted) return;
        if (stream.signal.aborted) continue;
        if (FabricError.is(err) && (err.code === "node_run_not_found" || err.code === "run_not_found")) {
          this.o.log.warn(runLogFields(this.o.begin, this.nodeRunId), "the coordinator does not know this composite; it is no longer driven");
          this.stop("ended");
          return;
        }
        this.o.log.warn({ err: (err as Error).message, ...runLogFields(this.o.begin, this.nodeRunId), after_seq: this.lastSeq }, "the composite's event stream broke; resuming");
      } finally {
        signal.removeEventListener("abort", stopStream);
      }
      if (signal.aborted) return;
      if (this.lastSeq > before) delay = 100;
      await pause(delay, signal);
      delay = Math.min(delay * 2, 2000);
    }
  }

  private onEvent(e: RunEvent): void {
    if (e.seq <= this.lastSeq) return;
    this.lastSeq = e.seq;
    if ((e.type === "node_run_completed" && e.node_run_id === this.nodeRunId) || e.type === "run_completed") {
      if (this.phase === "running") this.stop("ended");
      else this.streamController.abort();
      return;
    }
    this.calls.onEvent(e);
  }

  private async select(subtask: SubtaskSpec, constraints?: ConstraintEnvelope): Promise<CandidateSet> {
    const selection = this.o.selection;
    if (!selection) throw fail("upstream_error", "this composite executor has no Selection service configured (selectionUrl)");
    const request: CandidateSetRequest = { subtask_spec: subtask };
    // The composite's own limits (allow and deny lists, side-effect cap) bound what Selection may propose.
    const merged = constraints ? mergeConstraints(this.o.begin.constraints, constraints) : this.o.begin.constraints;
    if (merged && Object.keys(merged).length > 0) request.constraints = merged;
    if (this.o.begin.run_context) request.run_context = this.o.begin.run_context;
    let set: CandidateSet;
    try {
      set = await selection.createCandidateSet(request);
    } catch (err) {
      throw asHandlerError(err);
    }
    return this.o.policy ? await this.allowedCandidates(this.o.policy, set, merged) : set;
  }

  /**
   * The candidates of `set` the PDP lets this run create a child of (`node.run.create`, as the coordinator asks when
   * the child is created), in Selection's order. A denied one is left out and named, with the PDP's reason, in the
   * set's `extensions["nodefabric.policy_refused"]`, so what the composite (a model among them) chooses from is what
   * the policy allows. A PDP that cannot answer fails the call as retryable, never opens the set.
   */
  private async allowedCandidates(policy: PolicyClient, set: CandidateSet, constraints: ConstraintEnvelope | undefined): Promise<CandidateSet> {
    if (set.candidates.length === 0) return set;
    let decisions: PolicyDecision[];
    try {
      decisions = await Promise.all(
        set.candidates.map((c) =>
          policy.decide({
            action: "node.run.create",
            run_id: this.o.begin.run_id,
            node_type_ref: c.node_type_ref,
            ...(this.o.begin.run_context ? { run_context: this.o.begin.run_context } : {}),
            // What the coordinator would hold as the child's envelope: the composite's, then the node type's own (its
            // side-effect gate).
            constraints: mergeConstraints(constraints, (c as { constraints?: ConstraintEnvelope }).constraints),
          }),
        ),
      );
    } catch (err) {
      throw fail("pdp_unavailable", `the PDP could not decide the candidates of subtask ${set.subtask_id ?? ""}: ${(err as Error).message}`, { retryable: true });
    }
    const refused: JsonObject[] = [];
    const candidates = set.candidates.filter((c, i) => {
      const d = decisions[i]!;
      if (d.decision !== "deny") return true;
      refused.push({ node_type_ref: c.node_type_ref as unknown as JsonObject, ...(d.reason_code ? { reason_code: d.reason_code } : {}), ...(d.message ? { message: d.message } : {}) });
      return false;
    });
    if (refused.length === 0) return set;
    this.o.log.info({ ...runLogFields(this.o.begin, this.nodeRunId), candidate_set_id: set.candidate_set_id, refused: refused.length }, "candidates the PDP denies left out");
    return { ...set, candidates, extensions: { ...(set.extensions ?? {}), "nodefabric.policy_refused": refused } };
  }

  private async childRequest(nodeRunId: string): Promise<ChildRequest> {
    const known = this.calls.request(nodeRunId);
    if (known) return known;
    // A child of an earlier incarnation that this one has not called again: ask the coordinator.
    try {
      const nr = await this.o.client.getNodeRun(nodeRunId, this.token);
      if (nr.parent_node_run_id !== this.nodeRunId) {
        throw fail("invalid_request", `node run ${nodeRunId} is not a child of this composite`, { details: { node_run_id: nodeRunId } });
      }
      const inputs = (nr.inputs ?? {}) as JsonObject;
      return { node_type_ref: nr.node_type_ref, inputs, spec: { node_type_ref: nr.node_type_ref, inputs } };
    } catch (err) {
      throw asHandlerError(err);
    }
  }

  private async evaluate(child: string, result: EvaluationResult, action?: RecoveryAction): Promise<JsonObject | undefined> {
    // The new child's call index is taken now, not after the report answers, so the order of calls never depends
    // on timing (a replay must give every call the same key).
    const index = action?.type === "retry" || action?.type === "remap" ? this.calls.reserveIndex() : undefined;
    const body: NodeRunEvaluationReportRequest = { evaluation_result: result };
    if (action) body.recovery_action = action;
    try {
      await this.o.client.reportEvaluation(child, body, this.token);
    } catch (err) {
      throw asHandlerError(err);
    }
    switch (action?.type) {
      case "retry": {
        const req = await this.childRequest(child);
        return this.calls.spawn(req.node_type_ref, req.inputs, {}, { index, base: retrySpecOf(req.spec), extensions: { "nodefabric.retry_of": child } }).result;
      }
      case "remap": {
        const target = action.target_node_type_ref;
        if (!target) throw fail("invalid_request", "a remap recovery action needs target_node_type_ref");
        const req = await this.childRequest(child);
        return this.calls.spawn(target, req.inputs, {}, { index, extensions: { "nodefabric.remap_of": child } }).result;
      }
      case "abort":
        throw fail("child_failed", action.message ?? `the composite aborted after evaluating child ${child}`, {
          details: { node_run_id: child, recovery: "abort", evaluation_result: result },
        });
      default:
        // decompose_further and ask_user are recorded; what follows is up to the composite's code.
        return undefined;
    }
  }
}
