/**
 * The coordinator's engine: the Run and NodeRun state machine, behind one face. Its parts live beside it:
 * - `run-lifecycle.ts`: starting, cancelling and timing out runs, and approvals;
 * - `dispatch.ts`: claims, the execute checkpoint, leases, sending work and retries;
 * - `children.ts`: children of composites and the constraints that flow down the tree;
 * - `results.ts`: what executors answer and composites report, checked before it counts;
 * - `engine-core.ts`: the state they share, and every ending of a NodeRun or a run.
 * Every state change is written with its events through the TickWriter (one transaction per tick) before anything
 * acts on it; live followers hear of events only after they are durable.
 */
import type { NodeRun, NodeRunCompleteRequest, NodeRunEvaluationReportRequest, NodeRunsCreateRequest, NodeTypeRef, Run, RunStartRequest } from "@nodefabric/schemas";
import type { NodeRunRecord, RunRecord } from "../store/run-store.js";
import { EngineCore } from "./engine-core.js";
import { Dispatcher } from "./dispatch.js";
import { Results, type ProgressReport } from "./results.js";
import { OutputDeltas, type OutputDeltaReport } from "./output-deltas.js";
import { Children } from "./children.js";
import { RunLifecycle } from "./run-lifecycle.js";
import type { EventHub } from "./event-hub.js";
import { clock } from "../clock.js";
import type { Caller, RunEngineOptions } from "./engine-types.js";
import { RunOwnership, type RunPlace } from "./ownership.js";
import { RemoteEvents } from "./remote-events.js";
import { FencedError, type RunStore, type SharedRunStore } from "../store/run-store.js";
import { HeldRunCache } from "../store/held-run-cache.js";
import { FabricError } from "../http/errors.js";
import { storeUnavailable } from "../store/store-unavailable.js";
import type { ExecutorAnswer } from "./dispatch.js";

export type { RunPlace } from "./ownership.js";

/** A write refused by fencing reaches a client as a retryable 503: the run now lives on another coordinator. */
function movedAway(err: unknown): never {
  if (FencedError.is(err)) {
    throw new FabricError("unavailable", "the run moved to another coordinator while this request was served; try again", {
      retryable: true,
      details: { run_ids: err.runIds },
      headers: { "retry-after": "1" },
    });
  }
  throw err;
}

export type { Caller, ExecutorCaller, Logger, PolicyClient, RunEngineOptions } from "./engine-types.js";
export { hashOf } from "./engine-types.js";

/** The Run and NodeRun state machine of one coordinator. */
export class RunEngine {
  readonly hub: EventHub;
  private readonly core: EngineCore;
  private readonly dispatcher: Dispatcher;
  private readonly results: Results;
  private readonly outputDeltas: OutputDeltas;
  private readonly children: Children;
  private readonly lifecycle: RunLifecycle;
  private readonly tickMs: number;
  private timer: NodeJS.Timeout | undefined;
  private readonly ownership?: RunOwnership;
  private readonly remote?: RemoteEvents;
  private started = false;

  private readonly o: RunEngineOptions;

  constructor(o: RunEngineOptions) {
    // With a shared store, the records of the runs this coordinator holds are read from memory (it is their only
    // writer); the engine's reads of them then cost no round trip to the database.
    const shared = o.store.shared;
    const cache = shared ? new HeldRunCache(o.store as RunStore & { shared: SharedRunStore }) : undefined;
    if (cache) o = { ...o, store: cache };
    this.o = o;
    this.core = new EngineCore(o);
    this.hub = this.core.hub;
    this.dispatcher = new Dispatcher(this.core, o.maxInFlight ?? 1024);
    this.results = new Results(this.core, this.dispatcher);
    this.outputDeltas = new OutputDeltas(this.core);
    this.dispatcher.onAnswer = (answer) => this.recordAnswer(answer);
    this.children = new Children(this.core, this.dispatcher);
    this.lifecycle = new RunLifecycle(this.core, this.dispatcher);
    this.tickMs = o.tickMs ?? 100;
    if (shared) {
      this.ownership = new RunOwnership({
        shared,
        instanceId: o.instanceId,
        log: o.log,
        runLeaseMs: o.runLeaseMs ?? 10_000,
        endpoint: () => this.dispatcher.coordinatorEndpoint || undefined,
        // Their NodeRuns are claimable here now (leased by the previous holder): dispatch recovers them.
        onTakenOver: () => this.wake(),
        // What was in flight for them here ends with a refused write (FencedError); the new holder redoes it.
        onLost: (runIds) => cache?.forget(runIds),
        outage: this.core.outage,
      });
      const remote = new RemoteEvents(o.store, shared, this.core.hub, o.log);
      this.remote = remote;
      this.core.afterPublish = (events) => remote.published(events);
    }
  }

  /**
   * Records an executor's answer; while the database cannot be reached, keeps it and tries again (with the outage's
   * backoff) rather than dropping it, so a NodeRun that ran during an outage is not run again once its lease runs
   * out. Ends when recorded, refused (the run moved to another coordinator), or the engine stops.
   */
  private async recordAnswer(answer: ExecutorAnswer): Promise<void> {
    for (let delay = 250; ; delay = Math.min(2 * delay, 2_000)) {
      try {
        await this.results.record(answer);
        return;
      } catch (err) {
        if (!storeUnavailable(err) || this.core.stopped) throw err;
        this.core.outage.failed(err, "recording an executor's answer");
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /** The store as the engine reads it: with a shared store, through the cache of the runs this coordinator holds. */
  get store(): RunStore {
    return this.o.store;
  }

  /** The base URL composite executors call back; set once the coordinator listens. */
  get coordinatorEndpoint(): string {
    return this.dispatcher.coordinatorEndpoint;
  }
  set coordinatorEndpoint(url: string) {
    this.dispatcher.coordinatorEndpoint = url;
    // Other coordinators forward to this address: announce it at once rather than at the next renewal.
    if (this.started) void this.ownership?.announce();
  }

  /** Reclaims this instance's leases, then starts dispatch and recovery. */
  async start(): Promise<void> {
    try {
      const released = await this.o.store.releaseLeases(this.o.instanceId);
      if (released > 0) this.o.log.info({ released }, "reclaimed NodeRuns that were in flight before a restart");
    } catch (err) {
      // Started while the database is down: the coordinator listens and answers 503 until it is back; its loops
      // then take over, claim and recover by themselves. Leases of an earlier life of this instance just run out.
      if (!this.core.outage.failed(err, "starting")) throw err;
    }
    this.remote?.start();
    await this.ownership?.start();
    this.started = true;
    this.timer = setInterval(() => void this.recover(), this.tickMs);
    this.timer.unref();
    await this.recover();
    this.wake();
  }

  /** Stops dispatching and flushes pending writes. */
  async stop(): Promise<void> {
    this.core.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.ownership?.stop();
    this.remote?.stop();
    await this.core.writer.drain();
    await this.ownership?.release();
    this.core.endSpans();
  }

  /** A run visible to the caller, or 404 run_not_found. */
  getRunRecord(runId: string, caller: Caller = {}): Promise<RunRecord> {
    return this.core.getRunRecord(runId, caller);
  }

  /** A NodeRun visible to the caller, or 404 node_run_not_found (403 outside an assignment token's NodeRun). */
  getNodeRunRecord(nodeRunId: string, caller: Caller = {}): Promise<NodeRunRecord> {
    return this.core.getNodeRunRecord(nodeRunId, caller);
  }

  /**
   * Where writes to a run are served: here, or at the coordinator holding it (only with a store several coordinators
   * share). Undefined for a run the store does not know.
   */
  async placeOf(runId: string): Promise<RunPlace | undefined> {
    return this.ownership ? this.ownership.placeOf(runId) : { local: true };
  }

  /** POST /v1/runs. */
  startRun(req: RunStartRequest, caller: Caller = {}): Promise<Run> {
    return this.lifecycle.start(req, caller).catch(movedAway);
  }

  /** POST /v1/runs/{id}:cancel. */
  cancelRun(runId: string, caller: Caller = {}): Promise<Run> {
    return this.lifecycle.cancel(runId, caller).catch(movedAway);
  }

  /** POST /v1/approvals/{id}:approve|:reject. */
  resolveApproval(approvalId: string, decision: "approved" | "rejected", caller: Caller = {}, reason?: string): Promise<void> {
    return this.lifecycle.resolveApproval(approvalId, decision, caller, reason).catch(movedAway);
  }

  /** Fails runs past their deadline and wakes the dispatcher for backoffs and expired leases. */
  recover(): Promise<void> {
    return this.lifecycle.recover();
  }

  /** POST /v1/node-runs. */
  createChildren(req: NodeRunsCreateRequest, caller: Caller = {}): Promise<NodeRun[]> {
    return this.children.create(req, caller).catch(movedAway);
  }

  /** POST /v1/node-runs/{id}:complete. */
  completeNodeRun(nodeRunId: string, req: NodeRunCompleteRequest, caller: Caller = {}): Promise<void> {
    return this.results.complete(nodeRunId, req, caller).catch(movedAway);
  }

  /** POST /v1/node-runs/{id}:progress: true when a `node_run_progress` event was written. */
  reportProgress(nodeRunId: string, report: ProgressReport, caller: Caller = {}): Promise<boolean> {
    return this.results.progress(nodeRunId, report, caller).catch(movedAway);
  }

  /** POST /v1/node-runs/{id}:output-delta: true when a `node_run_output_delta` event was written. */
  reportOutputDelta(nodeRunId: string, delta: OutputDeltaReport, caller: Caller = {}): Promise<boolean> {
    return this.outputDeltas.record(nodeRunId, delta, caller).catch(movedAway);
  }

  /** POST /v1/node-runs/{id}:checkpoint. */
  saveCheckpoint(nodeRunId: string, data: Record<string, unknown>, caller: Caller = {}): Promise<void> {
    return this.results.checkpoint(nodeRunId, data, caller).catch(movedAway);
  }

  /** POST /v1/node-runs/{id}:evaluation. */
  reportEvaluation(nodeRunId: string, req: NodeRunEvaluationReportRequest, caller: Caller = {}): Promise<void> {
    return this.results.evaluation(nodeRunId, req, caller).catch(movedAway);
  }

  /** Asks the dispatcher to look for work soon. */
  wake(): void {
    this.dispatcher.wake();
  }

  /**
   * What waits to be dispatched: NodeRuns ready in the store that no coordinator holds, plus those this one holds
   * without capacity to send yet; and how long the oldest of them has waited, in seconds.
   */
  async queue(): Promise<{ depth: number; oldestAgeSeconds: number }> {
    const now = clock.now();
    const stored = (await this.core.store.queueStats?.(now)) ?? { depth: 0, oldestAvailableAt: null };
    const local = this.dispatcher.waiting();
    const oldest = Math.min(stored.oldestAvailableAt ?? now, local.oldestAt ?? now);
    return { depth: stored.depth + local.count, oldestAgeSeconds: Math.max(0, now - oldest) / 1000 };
  }

  /** How many NodeRuns are with executors now. */
  inFlightCount(): number {
    return this.dispatcher.inFlightCount();
  }
}

export type { NodeTypeRef };
