/**
 * The Composite Executor: accepts composite NodeRuns with `POST /v1/composite-node-runs:begin`, drives each in the
 * background (children through the coordinator, ends from its event stream), stops one on `:cancel`, and announces
 * its composite node types to the Node Registry.
 */
import type { FastifyInstance } from "fastify";
import { trackCache } from "../../observe/caches.js";
import type { CompositeBeginRequest, CompositeBeginResponse, NodeType } from "@nodefabric/schemas";
import { createService, type HealthCheck } from "../../http/service.js";
import { ref } from "../../http/validation.js";
import { clock } from "../../clock.js";
import { CoordinatorClient } from "../../clients/coordinator-client.js";
import { RegistryClient } from "../../clients/registry-client.js";
import { SelectionClient } from "../../clients/selection-client.js";
import { isCompositeDefinition } from "@nodefabric/sdk";
import type { LoadedHandlers } from "../atomic-executor/handler-loader.js";
import type { ServiceSecurityOptions } from "../../http/auth-plugin.js";
import { bearerHeaders } from "../../clients/service-tokens.js";
import { registerOnListen, type RegistryRegistration } from "../atomic-executor/registry-registration.js";
import { handlersCheck, logFailedLoads } from "../atomic-executor/handlers-check.js";
import { CompositeDriver } from "./composite-driver.js";
import { HttpPolicyClient } from "../../clients/pdp-client.js";
import type { PolicyClient } from "../../engine/engine-types.js";
import { CompositeTargets } from "./composite-targets.js";
import { exposeObservables } from "../../observe/observables.js";

export interface CompositeExecutorOptions extends ServiceSecurityOptions {
  /** pino options, `false` to silence. */
  logger?: boolean | Record<string, unknown>;
  /** Loaded handler packages; the composite definitions among them are served. */
  handlers: LoadedHandlers;
  /** Node Registry: composite node types are published there, and plans of published node types are read from it. */
  registryUrl: string;
  /** Selection service that `ctx.select` asks. */
  selectionUrl?: string;
  /**
   * The PDP that decides, for each candidate Selection proposes to `ctx.select`, whether this run may create a child
   * of it (`node.run.create`): a denied candidate is dropped before the composite (a model among them) sees it. An
   * in-process PDP (`policy`) or its URL (`pdpUrl`); with neither, candidates are not checked here (the coordinator
   * still decides every child it creates).
   */
  policy?: PolicyClient;
  pdpUrl?: string;
  /** URL the coordinator reaches this executor at (default: derived from the listening address). */
  publicUrl?: string;
  executorInstanceId?: string;
}

/** How long a canceled node_run_id is remembered, so a `:begin` that loses the race to its cancel does nothing. */
const CANCEL_MEMORY_MS = 60_000;
const CANCEL_MEMORY_SIZE = 10_000;

const cancelParams = {
  type: "object",
  required: ["node_run_id"],
  properties: { node_run_id: { type: "string", minLength: 1, maxLength: 256 } },
} as const;

/** Builds the Composite Executor service (not yet listening); registration starts when it listens. */
export async function buildCompositeExecutor(options: CompositeExecutorOptions): Promise<FastifyInstance> {
  const composite = options.handlers.definitions.filter((d) => isCompositeDefinition(d.definition));
  const registry = new RegistryClient(options.registryUrl, { connections: 8, headersTimeoutMs: 10_000, headers: bearerHeaders(options.tokens, "node-registry") });
  const selection = options.selectionUrl ? new SelectionClient(options.selectionUrl, { connections: 32, headers: bearerHeaders(options.tokens, "selection") }) : undefined;
  const pdpClient = !options.policy && options.pdpUrl ? new HttpPolicyClient(options.pdpUrl, { headers: bearerHeaders(options.tokens, "pdp") }) : undefined;
  const policy = options.policy ?? pdpClient;
  const targets = new CompositeTargets(composite, options.handlers, registry);
  const driving = new Map<string, CompositeDriver>();
  const canceled = new Map<string, number>();
  const coordinators = new Map<string, CoordinatorClient>();
  trackCache("composite.driving", driving, (m) => ({ entries: m.size }));
  trackCache("composite.canceled", canceled, (m) => ({ entries: m.size }), { max_entries: CANCEL_MEMORY_SIZE });
  trackCache("composite.coordinator_clients", coordinators, (m) => ({ entries: m.size }));
  let completed = 0;
  let registration: RegistryRegistration | undefined;

  const health = (): HealthCheck[] => [
    handlersCheck(composite, options.handlers, { status: "ok", message: "no composite definitions are loaded; only declarative plans from the registry are served" }),
    { name: "driving", status: "ok", details: { count: driving.size, ended: completed } },
    registration ? registration.check() : { name: "registry_registration", status: "ok", message: "waiting for the executor to listen" },
  ];

  const app = createService({ name: "composite-executor", logger: options.logger, health, auth: options.auth, limits: options.limits });
  exposeObservables(app, () => ({ executor_in_flight: driving.size }));
  logFailedLoads(app.log, options.handlers);

  registration = registerOnListen(app, {
    registryUrl: options.registryUrl,
    tokens: options.tokens,
    kind: "composite",
    nodeTypes: composite.map((d) => d.definition.nodeType as NodeType),
    executorInstanceId: options.executorInstanceId,
    publicUrl: options.publicUrl,
  });

  const coordinator = (endpoint: string): CoordinatorClient => {
    const base = endpoint.replace(/\/+$/, "");
    let c = coordinators.get(base);
    if (!c) {
      c = new CoordinatorClient(base, { connections: 64 });
      coordinators.set(base, c);
    }
    return c;
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

  app.post("/v1/composite-node-runs::begin", { schema: { body: ref("composite_begin_request") } }, async (req): Promise<CompositeBeginResponse> => {
    const begin = req.body as CompositeBeginRequest;
    const id = begin.node_run_id;
    const current = driving.get(id);
    if (current) {
      current.refresh(begin.assignment_token, coordinator(begin.coordinator_endpoint));
      return { accepted: true, message: "already running" };
    }
    // An unknown node type is refused before anything starts (404 unknown_node_type).
    const target = await targets.resolve(begin.node_type_ref);
    // A second :begin may have arrived while the node type was looked up.
    const raced = driving.get(id);
    if (raced) {
      raced.refresh(begin.assignment_token, coordinator(begin.coordinator_endpoint));
      return { accepted: true, message: "already running" };
    }
    if (wasCanceled(id)) return { accepted: true, message: "canceled" };
    const driver = new CompositeDriver({
      begin,
      target,
      client: coordinator(begin.coordinator_endpoint),
      selection,
      policy,
      log: app.log,
      onEnd: (d) => {
        if (driving.get(d.nodeRunId) === d) driving.delete(d.nodeRunId);
        completed++;
      },
    });
    driving.set(id, driver);
    driver.start();
    return { accepted: true };
  });

  // The regex ends the parameter before the literal ":cancel" (and still allows colons inside the id).
  app.post("/v1/composite-node-runs/:node_run_id(.+)::cancel", { schema: { params: cancelParams } }, async (req, reply) => {
    const { node_run_id } = req.params as { node_run_id: string };
    canceled.set(node_run_id, clock.now());
    if (canceled.size > CANCEL_MEMORY_SIZE) {
      for (const k of canceled.keys()) {
        canceled.delete(k);
        if (canceled.size <= CANCEL_MEMORY_SIZE) break;
      }
    }
    driving.get(node_run_id)?.stop("canceled");
    return reply.code(204).send();
  });

  app.addHook("onClose", async () => {
    // Stopped without reporting: the coordinator sends `:begin` again (here or elsewhere) and the composite replays.
    for (const d of [...driving.values()]) d.stop("shutdown");
    await registration?.stop();
    await Promise.all([registry.close(), selection?.close(), pdpClient?.close(), ...[...coordinators.values()].map((c) => c.close())]);
  });

  return app;
}
