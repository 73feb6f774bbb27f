/**
 * The Run Coordinator: the run authority. Owns Runs and NodeRuns, dispatches work to executors through a durable
 * queue with leases, enforces policy checkpoints and budgets, and serves durable, live NDJSON event streams.
 */
import type { CandidateSet } from "@nodefabric/schemas";
import { SelectionClient } from "../../clients/selection-client.js";
import { invalidRequest } from "../../http/errors.js";
import { MAX_CHECKPOINT_BYTES, checkpointBody, eventsQuery, nodeRunParams, outputDeltaBody, progressBody, runParams } from "../run-api-schemas.js";
import { approvalDecisionRoute, decisionReason } from "../approval-decision.js";
import os from "node:os";
import { randomBytes } from "node:crypto";
import { RunRouting } from "./run-routing.js";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { NodeRunCompleteRequest, NodeRunEvaluationReportRequest, NodeRunsCreateRequest, Run, RunStartRequest } from "@nodefabric/schemas";
import { createService } from "../../http/service.js";
import { exposeObservables } from "../../observe/observables.js";
import { ref } from "../../http/validation.js";
import { RegistryClient } from "../../clients/registry-client.js";
import { HttpExecutorCaller } from "../../clients/executor-client.js";
import { HttpPolicyClient } from "../../clients/pdp-client.js";
import { RegistryResolver, type NodeTypeResolver } from "../../engine/node-type-resolver.js";
import { RunEngine, type ExecutorCaller, type PolicyClient } from "../../engine/run-engine.js";
import type { OutputDeltaReport } from "../../engine/output-deltas.js";
import type { RunStore, SharedRunStore } from "../../store/run-store.js";
import type { HealthCheck } from "../../http/service.js";
import { openSqliteRunStore, SqliteRunStore } from "../../store/sqlite-run-store.js";
import { storeUnavailable } from "../../store/store-unavailable.js";
import { streamEvents } from "./event-stream.js";
import { parsePreferWait } from "./prefer-wait.js";
import { COORDINATOR_API, CoordinatorApi, callerOf, type ApprovalListQuery, type RunListQuery } from "./coordinator-api.js";
import type { ServiceSecurityOptions } from "../../http/auth-plugin.js";
import { bearerHeaders } from "../../clients/service-tokens.js";
import { AssignmentTokens } from "../../engine/assignment-tokens.js";
import { exposeInProcess } from "../../in-process.js";
import { trackCache } from "../../observe/caches.js";

export interface RunCoordinatorOptions extends ServiceSecurityOptions {
  logger?: boolean | Record<string, unknown>;
  /** SQLite file of the run store (used when `store` is not given). */
  dbPath?: string;
  store?: RunStore;
  /** Close `store` when the coordinator closes, after its engine stopped (default: only a store it opened itself). */
  closeStore?: boolean;
  /** Node Registry base URL: node types and the executor directory. */
  registryUrl: string;
  /** PDP base URL; without it no policy checks are made (and a warning is logged). */
  pdpUrl?: string;
  /** Atomic executor to use when the registry's directory names none for a node type. */
  atomicExecutorUrl?: string;
  /** Composite executor to use when the directory names none (declarative plans published at run time). */
  compositeExecutorUrl?: string;
  /** Selection base URL: children's candidate bindings are checked against its stored sets. */
  selectionUrl?: string;
  /** Base URL composite executors use to call this coordinator back (default: its listening address). */
  publicUrl?: string;
  /** A composite making no progress for this long gets its `:begin` again (ms, default the lesser of leaseMs and 10 s). */
  compositeLeaseMs?: number;
  /** How long a NodeRun waits for an executor it cannot reach before it fails executor_unavailable (ms, default 5 min). */
  executorWaitMs?: number;
  /**
   * Stable id of this coordinator (default: "coordinator-<hostname>"; with a store several coordinators share,
   * "coordinator-<hostname>-<pid>-<random>", so every process is a coordinator of its own).
   */
  instanceId?: string;
  /** With a shared store: how long this coordinator's hold on its runs lasts without renewal (ms, default 10 s). */
  runLeaseMs?: number;
  leaseMs?: number;
  tickMs?: number;
  maxInFlight?: number;
  /** Overrides for in-process wiring and tests. */
  resolver?: NodeTypeResolver;
  executors?: ExecutorCaller;
  policy?: PolicyClient;
  /** Mints and checks assignment tokens (default: a random secret of this process, or the shared store's). */
  assignmentTokens?: AssignmentTokens;
  /** Lifetime of the default assignment tokens (seconds). */
  assignmentTtlSeconds?: number;
  /** Model prices per million tokens, with which model calls' reservations are priced (RunEngineOptions.modelPrices). */
  modelPrices?: Record<string, { input_per_million: number; output_per_million: number }>;
}

/** Builds the Run Coordinator. */
export async function buildRunCoordinator(options: RunCoordinatorOptions): Promise<FastifyInstance> {
  const store = options.store ?? openSqliteRunStore({ path: options.dbPath ?? ".fabric/run-coordinator.db" });
  const registry = new RegistryClient(options.registryUrl, { headers: bearerHeaders(options.tokens, "node-registry") });
  const executors = options.executors ?? new HttpExecutorCaller(options.tokens);
  // Told when the PDP turns out to have no batch endpoint; the service's logger exists only further down.
  let noBatchLog: (status: number) => void = () => undefined;
  const policy =
    options.policy ??
    (options.pdpUrl ? new HttpPolicyClient(options.pdpUrl, { headers: bearerHeaders(options.tokens, "pdp"), onBatchUnsupported: (status) => noBatchLog(status) }) : undefined);
  const shared = (store as RunStore).shared;
  // Coordinators of one database check each other's assignment tokens (a composite executor may reach any of them),
  // so they sign with a secret kept in the database rather than one of this process.
  const assignmentTokens = options.assignmentTokens ?? new AssignmentTokens(shared ? await sharedSecretOf(shared) : undefined, options.assignmentTtlSeconds);
  const instanceId = options.instanceId ?? (shared ? `coordinator-${os.hostname()}-${process.pid}-${randomBytes(3).toString("hex")}` : `coordinator-${os.hostname()}`);
  const resolver = options.resolver ?? new RegistryResolver(registry, { atomic: options.atomicExecutorUrl, composite: options.compositeExecutorUrl });
  const selection = options.selectionUrl ? new SelectionClient(options.selectionUrl, { headers: bearerHeaders(options.tokens, "selection") }) : undefined;
  const candidateSets = new Map<string, Promise<CandidateSet>>();
  trackCache("coordinator.candidate_sets", candidateSets, (m) => ({ entries: m.size }), { max_entries: 10_000 });
  // A stored candidate set never changes, so each is fetched once.
  const selectionLookup = selection && {
    getCandidateSet(id: string): Promise<CandidateSet> {
      let p = candidateSets.get(id);
      if (!p) {
        p = selection.getCandidateSet(id);
        candidateSets.set(id, p);
        p.catch(() => candidateSets.delete(id));
        if (candidateSets.size > 10_000) candidateSets.delete(candidateSets.keys().next().value as string);
      }
      return p;
    },
  };

  const app = createService({
    name: "run-coordinator",
    logger: options.logger,
    auth: options.auth && { ...options.auth, assignments: assignmentTokens, delegation: true },
    limits: options.limits,
    health: async () => [
      // Which SQLite library the embedded store runs on (node:sqlite, or better-sqlite3 on older Node).
      store instanceof SqliteRunStore
        ? { name: "store", status: "ok", details: { sqlite_driver: store.driver === "node" ? "node:sqlite" : store.driver, sqlite_writer: store.writer } }
        : shared
          ? await sharedStoreHealth(shared, store.ping?.bind(store))
          : { name: "store", status: "ok" },
      {
        name: "policy",
        status: policy ? "ok" : "degraded",
        message: policy ? undefined : "no PDP configured: runs are not checked against any policy",
      },
      { name: "dispatch", status: "ok", details: { in_flight: engine.inFlightCount(), followers: engine.hub.followers() } },
    ],
  });
  const engine = new RunEngine({
    store,
    resolver,
    executors,
    policy,
    log: app.log,
    instanceId,
    runLeaseMs: options.runLeaseMs,
    leaseMs: options.leaseMs,
    tickMs: options.tickMs,
    maxInFlight: options.maxInFlight,
    selection: selectionLookup || undefined,
    compositeLeaseMs: options.compositeLeaseMs,
    executorWaitMs: options.executorWaitMs,
    modelPrices: options.modelPrices,
    assignmentTokens,
    // A coordinator sharing the store may check the token of an execution this one dispatched (reports are forwarded).
    assignmentTokensChecked: shared !== undefined || (options.auth !== undefined && options.auth.mode !== "disabled"),
  });
  if (options.publicUrl) engine.coordinatorEndpoint = options.publicUrl.replace(/\/+$/, "");
  app.addHook("onListen", async () => {
    if (engine.coordinatorEndpoint) return;
    const addr = app.server.address();
    if (addr && typeof addr === "object") {
      const host = addr.address === "0.0.0.0" || addr.address === "::" ? "127.0.0.1" : addr.address;
      engine.coordinatorEndpoint = `http://${host.includes(":") ? `[${host}]` : host}:${addr.port}`;
    }
  });
  if (!policy) app.log.warn("no PDP configured: the coordinator makes no policy checks");
  noBatchLog = (status) =>
    app.log.info({ pdp_url: options.pdpUrl, status }, "the PDP has no POST /v1/policy:decideBatch; asking it one question per request for a while");
  // Only coordinators sharing a store forward: with one coordinator every run is here, and no request pays a lookup.
  const routing = shared ? new RunRouting(engine, instanceId, options.tokens) : undefined;
  const api = new CoordinatorApi(engine, store, routing);
  exposeObservables(app, async () => {
    const queue = await engine.queue();
    return { queue_depth: queue.depth, queue_oldest_age_seconds: queue.oldestAgeSeconds, dispatch_in_flight: engine.inFlightCount(), event_followers: engine.hub.followers() };
  });
  /** Forwards the request to the coordinator holding the run `runOf` names, if that is another; true once answered. */
  const forwarded = async (req: FastifyRequest, reply: FastifyReply, runOf: () => Promise<string | undefined> | string | undefined) =>
    routing !== undefined && (await routing.forwardRequest(req, reply, await runOf()));
  /** The run a NodeRun belongs to (undefined when unknown: the engine answers the 404). */
  const runOfNodeRun = async (id: string) => (await store.getNodeRun(id))?.run_id;
  exposeInProcess(app, COORDINATOR_API, api);

  app.addHook("onReady", async () => engine.start());
  app.addHook("onClose", async () => {
    await engine.stop();
    await Promise.all([
      registry.close(),
      selection?.close(),
      (executors as Partial<HttpExecutorCaller>).close?.(),
      (policy as Partial<HttpPolicyClient> | undefined)?.close?.(),
      routing?.close(),
    ]);
    if (!options.store || options.closeStore) await store.close();
  });

  app.post("/v1/runs", { schema: { body: ref("run_start_request") } }, async (req, reply) => {
    const wait = parsePreferWait(req.headers.prefer);
    if (wait !== undefined) reply.header("preference-applied", `wait=${wait}`);
    return api.startRun(req.body as RunStartRequest, callerOf(req), wait);
  });

  app.get("/v1/runs", { schema: { querystring: ref("run_list_query") } }, async (req, reply) => {
    const { runs, nextPageToken } = await api.listRuns(req.query as RunListQuery, callerOf(req));
    if (nextPageToken) reply.header("x-next-page-token", nextPageToken);
    return runs;
  });

  // Read from the store, which a store shared by several coordinators answers for all of them: nothing to forward.
  app.get("/v1/approvals", { schema: { querystring: ref("approval_list_query") } }, async (req, reply) => {
    const { approvals, nextPageToken } = await api.listApprovals(req.query as ApprovalListQuery, callerOf(req));
    if (nextPageToken) reply.header("x-next-page-token", nextPageToken);
    return approvals;
  });

  app.get("/v1/runs/:run_id", { schema: { params: runParams } }, async (req) => {
    return api.getRun((req.params as { run_id: string }).run_id, callerOf(req));
  });

  app.post("/v1/runs/:run_id(.+)::cancel", { schema: { params: runParams } }, async (req, reply) => {
    const { run_id } = req.params as { run_id: string };
    if (await forwarded(req, reply, () => run_id)) return reply;
    return engine.cancelRun(run_id, callerOf(req));
  });

  app.get("/v1/runs/:run_id/node-runs", { schema: { params: runParams } }, async (req) => {
    return api.listNodeRuns((req.params as { run_id: string }).run_id, callerOf(req));
  });

  app.get("/v1/runs/:run_id/events", { schema: { params: runParams, querystring: eventsQuery } }, async (req, reply) => {
    const { run_id } = req.params as { run_id: string };
    const q = req.query as { after_seq?: number; follow: boolean; types?: string };
    const run = await engine.getRunRecord(run_id, callerOf(req));
    await streamEvents(req, reply, store, engine.hub, { runId: run_id, afterSeq: q.after_seq ?? -1, follow: q.follow, runEnded: isEnded(run.run), types: typesOf(q.types) });
  });

  app.post("/v1/node-runs", { schema: { body: ref("node_runs_create_request") } }, async (req, reply) => {
    const body = req.body as NodeRunsCreateRequest;
    if (await forwarded(req, reply, () => body.run_id ?? runOfNodeRun(body.parent_node_run_id))) return reply;
    return { node_runs: await engine.createChildren(body, callerOf(req)) };
  });

  app.get("/v1/node-runs/:node_run_id", { schema: { params: nodeRunParams } }, async (req) => {
    return api.getNodeRun((req.params as { node_run_id: string }).node_run_id, callerOf(req));
  });

  app.get("/v1/node-runs/:node_run_id/events", { schema: { params: nodeRunParams, querystring: eventsQuery } }, async (req, reply) => {
    const { node_run_id } = req.params as { node_run_id: string };
    const q = req.query as { after_seq?: number; follow: boolean; types?: string };
    const caller = callerOf(req);
    const nr = await engine.getNodeRunRecord(node_run_id, caller);
    const run = await engine.getRunRecord(nr.run_id, caller);
    await streamEvents(req, reply, store, engine.hub, {
      runId: nr.run_id,
      nodeRunId: node_run_id,
      afterSeq: q.after_seq ?? -1,
      follow: q.follow,
      runEnded: isEnded(run.run),
      types: typesOf(q.types),
    });
  });

  app.post("/v1/node-runs/:node_run_id(.+)::evaluation", { schema: { params: nodeRunParams, body: ref("node_run_evaluation_report_request") } }, async (req, reply) => {
    const { node_run_id } = req.params as { node_run_id: string };
    if (await forwarded(req, reply, () => runOfNodeRun(node_run_id))) return reply;
    await engine.reportEvaluation(node_run_id, req.body as NodeRunEvaluationReportRequest, callerOf(req));
    return reply.code(204).send();
  });

  // An extension: an executor reports how far an execution is; recorded as a node_run_progress event (or dropped
  // when the NodeRun is not running or reports too often), 204 either way.
  app.post("/v1/node-runs/:node_run_id(.+)::progress", { schema: { params: nodeRunParams, body: progressBody } }, async (req, reply) => {
    const { node_run_id } = req.params as { node_run_id: string };
    if (await forwarded(req, reply, () => runOfNodeRun(node_run_id))) return reply;
    await engine.reportProgress(node_run_id, req.body as { progress: number; total?: number; message?: string }, callerOf(req));
    return reply.code(204).send();
  });

  // An extension: text an atomic execution wrote as it came (an LLM's answer), recorded in order as a
  // node_run_output_delta event (or dropped when the NodeRun is not running, the delta was sent before, or a bound
  // was reached), 204 either way.
  app.post("/v1/node-runs/:node_run_id(.+)::output-delta", { schema: { params: nodeRunParams, body: outputDeltaBody } }, async (req, reply) => {
    const { node_run_id } = req.params as { node_run_id: string };
    if (await forwarded(req, reply, () => runOfNodeRun(node_run_id))) return reply;
    await engine.reportOutputDelta(node_run_id, req.body as OutputDeltaReport, callerOf(req));
    return reply.code(204).send();
  });

  // An extension: what an atomic execution asks its next execution to resume from (an upstream task's id).
  app.post("/v1/node-runs/:node_run_id(.+)::checkpoint", { schema: { params: nodeRunParams, body: checkpointBody } }, async (req, reply) => {
    const { node_run_id } = req.params as { node_run_id: string };
    const { checkpoint } = req.body as { checkpoint: Record<string, unknown> };
    if (Buffer.byteLength(JSON.stringify(checkpoint)) > MAX_CHECKPOINT_BYTES) {
      throw invalidRequest("the checkpoint is too large", [{ path: "/checkpoint", message: `must be at most ${MAX_CHECKPOINT_BYTES} bytes as JSON` }]);
    }
    if (await forwarded(req, reply, () => runOfNodeRun(node_run_id))) return reply;
    await engine.saveCheckpoint(node_run_id, checkpoint, callerOf(req));
    return reply.code(204).send();
  });

  app.post("/v1/node-runs/:node_run_id(.+)::complete", { schema: { params: nodeRunParams, body: ref("node_run_complete_request") } }, async (req, reply) => {
    const { node_run_id } = req.params as { node_run_id: string };
    if (await forwarded(req, reply, () => runOfNodeRun(node_run_id))) return reply;
    await engine.completeNodeRun(node_run_id, req.body as NodeRunCompleteRequest, callerOf(req));
    return reply.code(204).send();
  });

  for (const [action, decision] of [["approve", "approved"], ["reject", "rejected"]] as const) {
    app.post(`/v1/approvals/:approval_id(.+)::${action}`, approvalDecisionRoute, async (req, reply) => {
      const { approval_id } = req.params as { approval_id: string };
      if (await forwarded(req, reply, async () => (await store.getApproval(approval_id))?.run_id)) return reply;
      await engine.resolveApproval(approval_id, decision, callerOf(req), decisionReason(req));
      return reply.code(204).send();
    });
  }

  return app;
}

/** The shared store answers (one query) and says how many coordinators are live on it. */
/**
 * The secret of coordinators sharing a store, read now; when the database cannot be reached (the coordinator starts
 * during an outage), read at the first token minted or checked instead.
 */
async function sharedSecretOf(shared: SharedRunStore): Promise<Uint8Array | (() => Promise<Uint8Array>)> {
  try {
    return await shared.sharedSecret("assignment-tokens");
  } catch (err) {
    if (!storeUnavailable(err)) throw err;
    return () => shared.sharedSecret("assignment-tokens");
  }
}

async function sharedStoreHealth(shared: SharedRunStore, ping?: () => Promise<void>): Promise<HealthCheck> {
  try {
    // A cheap probe with a short timeout first (the store caches its answer briefly), so a database that is down is
    // reported at once rather than when a listing times out.
    await ping?.();
    const live = await shared.coordinators(Date.now());
    return { name: "store", status: "ok", details: { shared: true, coordinators: live.length } };
  } catch (err) {
    return { name: "store", status: "down", message: `the shared store cannot be reached: ${(err as Error).message}`, details: { shared: true } };
  }
}

function typesOf(types: string | undefined): ReadonlySet<string> | undefined {
  return types ? new Set(types.split(",")) : undefined;
}

function isEnded(run: Run): boolean {
  return run.state === "completed" || run.state === "failed" || run.state === "canceled";
}
