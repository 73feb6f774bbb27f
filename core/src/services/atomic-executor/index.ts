/**
 * The Atomic Executor: runs the handlers of loaded packages for `POST /v1/atomic-node-runs:execute`,
 * cancels them on `:cancel`, and announces its node types to the Node Registry.
 */
import { Agent, type Dispatcher } from "undici";
import { ATOMIC_EXECUTOR_API, exposeInProcess } from "../../in-process.js";
import { createHash } from "node:crypto";
import type { FastifyInstance } from "fastify";
import type { AtomicExecuteRequest, AtomicExecuteResult } from "@nodefabric/schemas";
import { createService, type HealthCheck } from "../../http/service.js";
import { FabricError, invalidRequest } from "../../http/errors.js";
import { ref } from "../../http/validation.js";
import { clock } from "../../clock.js";
import { canonicalJson } from "../../canonical-json.js";
import type { HandlerSecrets } from "@nodefabric/sdk";
import { executeAtomic, Execution, SecretBindings, type OutputDeltaSender } from "@nodefabric/sdk/runtime";
import type { LoadedDefinition, LoadedHandlers } from "./handler-loader.js";
import { createEgressDispatcher, EgressPolicy, type EgressOptions } from "./egress-policy.js";
import { handlersCheck, logFailedLoads } from "./handlers-check.js";
import { CoordinatorClient } from "../../clients/coordinator-client.js";
import { RESULT_CACHE_MAX_BYTES, RESULT_CACHE_MAX_ENTRIES, RESULT_CACHE_TTL_MS, ResultCache } from "./result-cache.js";
import { trackCache } from "../../observe/caches.js";
import type { ServiceSecurityOptions } from "../../http/auth-plugin.js";
import { registerOnListen, type RegistryRegistration } from "./registry-registration.js";
import { ImplementedNodeTypes } from "./implemented-node-types.js";
import { ATTR, inSpan, recordFailure, traceUpstream, tracingOn } from "../../observe/tracing.js";
import { exposeObservables } from "../../observe/observables.js";

export interface AtomicExecutorOptions extends ServiceSecurityOptions {
  /** pino options, `false` to silence. */
  logger?: boolean | Record<string, unknown>;
  handlers: LoadedHandlers;
  /** When set, node types are published there and the executor registers itself once it listens. */
  registryUrl?: string;
  /** URL the coordinator reaches this executor at (default: derived from the listening address). */
  publicUrl?: string;
  executorInstanceId?: string;
  /** Executions running at once; past it, 503 with Retry-After (default 1024). */
  concurrency?: number;
  /** Timeout of a node type that sets no `nodefabric.timeout_ms` (default 30 s). */
  defaultTimeoutMs?: number;
  /** No execution runs longer, whatever the node type or deadline say (default 5 min). */
  maxTimeoutMs?: number;
  /** Finished results remembered per Idempotency-Key (default 10,000). */
  resultCacheSize?: number;
  /** How long a finished result is remembered (default 10 min). */
  resultCacheTtlMs?: number;
  /** Bytes of finished results remembered, the length of their JSON text (default 64 MiB); the oldest go first. */
  resultCacheBytes?: number;
  /** Secrets handlers read with `ctx.secrets.get(name)`. */
  secrets?: Record<string, string>;
  /** Timeout of each `ctx.fetch` request (default 30 s). */
  fetchTimeoutMs?: number;
  /** Where `ctx.request` sends upstream requests (default: a keep-alive undici Agent of this executor). */
  upstreamDispatcher?: Dispatcher;
  /**
   * What `ctx.egress.fetch` (and so `http.request`) may connect to besides public addresses: nothing by default
   * (`executor.egress` in the configuration). `lookup` replaces the system resolver (tests, custom DNS).
   */
  egress?: EgressOptions;
  /** The hosts each secret may be sent to through `ctx.egress.secretFor` (`executor.secret_hosts`); unbound: none. */
  secretHosts?: Readonly<Record<string, readonly string[]>>;
}


const MAX_IDEMPOTENCY_KEY_LENGTH = 512;
/** How long a canceled node_run_id is remembered, so an execute that loses the race to its cancel does not run. */
const CANCEL_MEMORY_MS = 60_000;

function positiveInteger(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= 1;
}

/** The attempt number: the request's extension, else the Idempotency-Key `<node_run_id>:<attempt>`, else 1. */
function attemptOf(request: AtomicExecuteRequest, key: string | undefined): number {
  const ext = request.extensions?.["nodefabric.attempt"];
  if (ext !== undefined) {
    if (!positiveInteger(ext)) {
      throw invalidRequest("the request body is invalid", [{ path: "/extensions/nodefabric.attempt", message: "must be an integer >= 1" }]);
    }
    return ext;
  }
  if (key) {
    const m = /:(\d{1,9})$/.exec(key);
    if (m && Number(m[1]) >= 1) return Number(m[1]);
  }
  return 1;
}

/** Milliseconds left until the request's `nodefabric.deadline`, or undefined when it sets none. */
function msUntilDeadline(request: AtomicExecuteRequest): number | undefined {
  const deadline = request.extensions?.["nodefabric.deadline"];
  if (deadline === undefined) return undefined;
  const at = typeof deadline === "string" && /^\d{4}-\d{2}-\d{2}T/.test(deadline) ? Date.parse(deadline) : Number.NaN;
  if (Number.isNaN(at)) {
    throw invalidRequest("the request body is invalid", [{ path: "/extensions/nodefabric.deadline", message: "must be an RFC 3339 date-time" }]);
  }
  return at - clock.now();
}

/** Cancels remembered for NodeRuns whose execution has not arrived (oldest forgotten first). */
const MAX_CANCELED = 10_000;

function fingerprintOf(request: AtomicExecuteRequest): string {
  return createHash("sha256")
    .update(request.node_run_id)
    .update("\u0000")
    .update(request.node_type_ref.node_type_id)
    .update("\u0000")
    .update(request.node_type_ref.version)
    .update("\u0000")
    .update(canonicalJson(request.inputs))
    .digest("base64url");
}

/** The result of an execution of a node type whose schema does not compile: failed, not retryable, the handler not called. */
function unusable(request: AtomicExecuteRequest, attempt: number, loaded: LoadedDefinition, problem: string): AtomicExecuteResult {
  const { node_type_id, version } = loaded.definition.nodeType;
  const now = clock.isoNow();
  return {
    node_run_id: request.node_run_id,
    state: "failed",
    error: {
      code: "handler_error",
      message: `${node_type_id}@${version} cannot run on this executor: ${problem}`,
      details: { node_type_id, version, reason: "schema_does_not_compile" },
      retryable: false,
    },
    started_at: now,
    ended_at: now,
    extensions: { "nodefabric.attempt": attempt, "nodefabric.duration_ms": 0 },
  };
}

/** Builds the Atomic Executor service (not yet listening); registration starts when it listens. */
export async function buildAtomicExecutor(options: AtomicExecutorOptions): Promise<FastifyInstance> {
  const handlers = options.handlers;
  const concurrency = options.concurrency ?? 1024;
  const defaultTimeoutMs = options.defaultTimeoutMs ?? 30_000;
  const maxTimeoutMs = options.maxTimeoutMs ?? 300_000;
  const fetchTimeoutMs = options.fetchTimeoutMs ?? 30_000;
  const ownDispatcher = options.upstreamDispatcher ? undefined : new Agent({ keepAliveTimeout: 10_000, connections: 512 });
  const upstreamDispatcher: Dispatcher = options.upstreamDispatcher ?? ownDispatcher!;
  const secretValues = { ...(options.secrets ?? {}) };
  const secrets: HandlerSecrets = { get: (name) => (Object.hasOwn(secretValues, name) ? secretValues[name] : undefined) };
  // Egress-checked connections for ctx.egress (http.request): checked at connect time against the operator's policy.
  const egressDispatcher = createEgressDispatcher(new EgressPolicy(options.egress));
  // The same policy for URLs of the operator's own configuration (`operatorConfigured`: an LLM profile's base_url),
  // with private addresses allowed; opened when first used.
  let configuredDispatcher: Dispatcher | undefined;
  const configuredEgressDispatcher = (): Dispatcher => (configuredDispatcher ??= createEgressDispatcher(new EgressPolicy({ ...options.egress, allowPrivate: true })));
  const secretBindings = new SecretBindings(options.secretHosts);
  const cache = new ResultCache(options.resultCacheSize ?? RESULT_CACHE_MAX_ENTRIES, options.resultCacheTtlMs ?? RESULT_CACHE_TTL_MS, options.resultCacheBytes ?? RESULT_CACHE_MAX_BYTES);
  const running = new Map<string, Set<Execution>>();
  const canceled = new Map<string, number>();
  trackCache("executor.running", running, (m) => ({ entries: m.size }));
  trackCache("executor.canceled", canceled, (m) => ({ entries: m.size }), { max_entries: MAX_CANCELED });
  let inFlight = 0;
  let abandoned = 0;

  // Set members included, without reading their NodeType files.
  const servedAtomic = () => handlers.served.filter((s) => s.kind === "atomic");
  let registration: RegistryRegistration | undefined;
  // Node types published in the registry that a loaded template definition implements (extensions["nodefabric.implementation"]).
  const implemented = options.registryUrl ? new ImplementedNodeTypes(handlers, options.registryUrl, options.tokens) : undefined;

  const health = (): HealthCheck[] => [
    handlersCheck(servedAtomic(), handlers, { status: "degraded", message: "no atomic handlers are loaded; pass --handlers or --discover" }),
    registration
      ? registration.check()
      : { name: "registry_registration", status: "ok", message: "no registry configured", details: { configured: false } },
    {
      name: "load",
      status: inFlight >= concurrency ? "degraded" : "ok",
      details: { in_flight: inFlight, concurrency, abandoned, remembered_results: cache.size },
    },
  ];

  const app = createService({ name: "atomic-executor", logger: options.logger, health, auth: options.auth, limits: options.limits });
  logFailedLoads(app.log, handlers);

  if (options.registryUrl) {
    registration = registerOnListen(app, {
      registryUrl: options.registryUrl,
      tokens: options.tokens,
      kind: "atomic",
      // Read batch by batch while publishing: a set's NodeType files are never all held at once.
      nodeTypes: handlers.nodeTypes("atomic"),
      executorInstanceId: options.executorInstanceId,
      publicUrl: options.publicUrl,
    });
  }

  // Progress reports go to the coordinator that sent the execution (its `nodefabric.coordinator_endpoint`), with the
  // NodeRun's assignment token it sent along (`nodefabric.assignment_token`), or, from a coordinator of this process,
  // the token it mints when the first report needs it (`mintToken`); one client per coordinator.
  const coordinators = new Map<string, CoordinatorClient>();
  trackCache("executor.coordinator_clients", coordinators, (m) => ({ entries: m.size }));
  const coordinatorOf = (request: AtomicExecuteRequest, mintToken?: () => Promise<string>): { client: CoordinatorClient; token: () => Promise<string | undefined> } | undefined => {
    const endpoint = request.extensions?.["nodefabric.coordinator_endpoint"];
    const token = request.extensions?.["nodefabric.assignment_token"];
    if (typeof endpoint !== "string" || !/^https?:\/\//.test(endpoint) || (token !== undefined && typeof token !== "string")) return undefined;
    const base = endpoint.replace(/\/+$/, "");
    let client = coordinators.get(base);
    if (!client) {
      if (coordinators.size >= 64) return undefined;
      coordinators.set(base, (client = new CoordinatorClient(base, { connections: 8 })));
    }
    return { client, token: token !== undefined || !mintToken ? async () => token as string | undefined : mintToken };
  };
  const checkpointSaver = (request: AtomicExecuteRequest, mintToken?: () => Promise<string>): ((data: Record<string, unknown>) => Promise<void>) | undefined => {
    const to = coordinatorOf(request, mintToken);
    return to ? async (data) => to.client.saveCheckpoint(request.node_run_id, data, await to.token()) : undefined;
  };
  const progressSender = (request: AtomicExecuteRequest, mintToken?: () => Promise<string>): ((report: { progress: number; total?: number; message?: string }) => void) | undefined => {
    const to = coordinatorOf(request, mintToken);
    if (!to) return undefined;
    return (report) => {
      to.token().then((token) => to.client.reportProgress(request.node_run_id, report, token)).catch((err: unknown) => {
        app.log.debug({ err, run_id: request.run_id, node_run_id: request.node_run_id }, "a progress report did not reach the coordinator");
      });
    };
  };

  // Output deltas go the same way, one at a time; the executor's output-deltas stream retries one that fails.
  const outputDeltaSender = (request: AtomicExecuteRequest, mintToken?: () => Promise<string>): OutputDeltaSender | undefined => {
    const to = coordinatorOf(request, mintToken);
    if (!to) return undefined;
    return async (delta) => {
      try {
        await to.client.reportOutputDelta(request.node_run_id, delta, await to.token());
      } catch (err) {
        app.log.debug({ err, run_id: request.run_id, node_run_id: request.node_run_id, index: delta.index }, "an output delta did not reach the coordinator");
        throw err;
      }
    };
  };

  const wasCanceled = (nodeRunId: string): boolean => {
    const at = canceled.get(nodeRunId);
    if (at === undefined) return false;
    if (clock.now() - at > CANCEL_MEMORY_MS) {
      canceled.delete(nodeRunId);
      return false;
    }
    return true;
  };

  exposeObservables(app, () => ({ executor_in_flight: inFlight }));

  const run = async (
    request: AtomicExecuteRequest,
    attempt: number,
    timeoutMs: number,
    loaded: NonNullable<ReturnType<LoadedHandlers["find"]>>,
    mintToken: (() => Promise<string>) | undefined,
  ): Promise<AtomicExecuteResult> => {
    const execution = new Execution(request.node_run_id, timeoutMs);
    if (wasCanceled(request.node_run_id)) execution.stop("canceled");
    let set = running.get(request.node_run_id);
    if (!set) running.set(request.node_run_id, (set = new Set()));
    set.add(execution);
    inFlight++;
    const { node_type_id, version } = request.node_type_ref;
    const attributes = { [ATTR.runId]: request.run_id, [ATTR.nodeRunId]: request.node_run_id, [ATTR.nodeTypeId]: node_type_id, [ATTR.nodeTypeVersion]: version, [ATTR.attempt]: attempt };
    try {
      return await inSpan(`handler ${node_type_id}`, { attributes }, async (span) => {
        const result = await executeAtomic({
          loaded,
          request,
          execution,
          attempt,
          log: app.log,
          clock,
          secrets,
          fetchTimeoutMs,
          upstreamDispatcher,
          egressDispatcher,
          get configuredEgressDispatcher() {
            return configuredEgressDispatcher();
          },
          secretBindings,
          traceUpstream: tracingOn() ? traceUpstream : undefined,
          onAbandoned: (delta) => {
            abandoned += delta;
          },
          onProgress: progressSender(request, mintToken),
          saveCheckpoint: checkpointSaver(request, mintToken),
          onOutputDelta: outputDeltaSender(request, mintToken),
        });
        if (span.isRecording()) {
          span.setAttribute(ATTR.state, result.state);
          if (result.error) recordFailure(span, result.error);
        }
        return result;
      });
    } finally {
      inFlight--;
      set.delete(execution);
      if (set.size === 0 && running.get(request.node_run_id) === set) running.delete(request.node_run_id);
    }
  };

  /** Executes one request; the route and in-process callers share it (these may give the assignment token as `mintToken`). */
  const execute = async (request: AtomicExecuteRequest, key: string | undefined, mintToken?: () => Promise<string>): Promise<AtomicExecuteResult> => {
    if (key && key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
      throw invalidRequest("the Idempotency-Key header is too long", [{ path: "/headers/idempotency-key", message: `must be at most ${MAX_IDEMPOTENCY_KEY_LENGTH} characters` }]);
    }
    const attempt = attemptOf(request, key);
    const remaining = msUntilDeadline(request);

    const { node_type_id, version } = request.node_type_ref;
    const loaded = handlers.find(node_type_id, version) ?? (await implemented?.find(request.node_type_ref));
    if (!loaded || loaded.definition.kind !== "atomic") {
      const versions = handlers.versionsOf(node_type_id, "atomic");
      const broken = handlers.notServed(node_type_id, version);
      if (broken) {
        throw new FabricError("unknown_node_type", `this executor does not serve ${node_type_id}@${version}: ${broken}`, {
          details: { node_type_id, version, ...(versions.length > 0 ? { available_versions: versions } : {}) },
        });
      }
      if (versions.length > 0) {
        throw new FabricError("unknown_node_type", `this executor does not serve version ${version} of ${node_type_id}`, {
          details: { node_type_id, version, available_versions: versions },
        });
      }
      throw new FabricError("unknown_node_type", `this executor does not serve node type ${node_type_id}`, { details: { node_type_id, version } });
    }

    let fingerprint: string | undefined;
    if (key) {
      fingerprint = fingerprintOf(request);
      const hit = cache.get(key);
      if (hit) {
        if (hit.fingerprint !== fingerprint) {
          throw new FabricError("idempotency_conflict", `Idempotency-Key ${key} was already used for a different request (node_run_id, node_type_ref or inputs differ)`, {
            details: { idempotency_key: key },
          });
        }
        return hit.result;
      }
    }

    if (inFlight >= concurrency) {
      throw new FabricError("unavailable", `the executor is running ${inFlight} executions, its limit; retry later`, {
        headers: { "retry-after": "1" },
        retryable: true,
        details: { in_flight: inFlight, concurrency },
      });
    }

    // Schemas are compiled on a node type's first execution; one that does not compile fails it, and every later one.
    const schemaProblem = loaded.schemaProblem?.();
    if (schemaProblem) return unusable(request, attempt, loaded, schemaProblem);

    const ext = loaded.definition.nodeType.extensions?.["nodefabric.timeout_ms"];
    let timeoutMs = positiveInteger(ext) ? ext : defaultTimeoutMs;
    if (remaining !== undefined) timeoutMs = Math.min(timeoutMs, remaining);
    timeoutMs = Math.min(timeoutMs, maxTimeoutMs);

    const result = run(request, attempt, timeoutMs, loaded, mintToken);
    if (key && fingerprint) cache.put(key, fingerprint, result);
    return result;
  };

  /** Aborts the executions of a NodeRun, and remembers the cancel for one that has not arrived yet. */
  const cancel = (node_run_id: string): void => {
    canceled.set(node_run_id, clock.now());
    if (canceled.size > MAX_CANCELED) {
      // Oldest first: Map keeps insertion order.
      for (const k of canceled.keys()) {
        canceled.delete(k);
        if (canceled.size <= MAX_CANCELED) break;
      }
    }
    for (const execution of running.get(node_run_id) ?? []) execution.stop("canceled");
  };

  app.post("/v1/atomic-node-runs::execute", { schema: { body: ref("atomic_execute_request") } }, async (req) => {
    const rawKey = req.headers["idempotency-key"];
    const key = (Array.isArray(rawKey) ? rawKey[0] : rawKey)?.trim() || undefined;
    return execute(req.body as AtomicExecuteRequest, key);
  });

  // `:node_run_id::cancel` would make find-my-way read one parameter named "node_run_id::cancel"; the regex ends the
  // parameter before the literal ":cancel" (and still allows colons inside the id).
  app.post("/v1/atomic-node-runs/:node_run_id(.+)::cancel", async (req, reply) => {
    cancel((req.params as { node_run_id: string }).node_run_id);
    return reply.code(204).send();
  });
  exposeInProcess(app, ATOMIC_EXECUTOR_API, { execute: (request, key, o) => execute(request, key, o?.assignmentToken), cancel, forget: (key) => cache.forget(key) });

  app.addHook("onClose", async () => {
    for (const set of running.values()) for (const execution of set) execution.stop("shutdown");
    await registration?.stop();
    await implemented?.close();
    await ownDispatcher?.close();
    await egressDispatcher.close();
    await configuredDispatcher?.close();
    await Promise.all([...coordinators.values()].map((c) => c.close().catch(() => undefined)));
  });

  return app;
}

export {
  loadHandlers,
  handlersFromDefinitions,
  withDefinitions,
  HandlerLoadError,
  type LoadedHandlers,
  type LoadedDefinition,
  type HandlerSource,
  type LoadHandlersOptions,
  type FailedHandlerLoad,
  type ServedNodeType,
  type NodeTypeStream,
} from "./handler-loader.js";
