/**
 * When services share one process they call each other directly, with the same payloads and without the socket.
 * A service exposes its API on its fastify instance here; the launcher hands it to the services that call it.
 */
import type { FastifyInstance } from "fastify";
import type { CoordinatorApi } from "./services/run-coordinator/coordinator-api.js";
import type { AtomicExecuteRequest, AtomicExecuteResult, PolicyDecision, PolicyDecisionRequest } from "@nodefabric/schemas";

/** What the atomic executor offers in-process. */
export interface AtomicExecutorApi {
  /** Same as POST /v1/atomic-node-runs:execute; throws the FabricError the route would answer. */
  execute(request: AtomicExecuteRequest, idempotencyKey?: string): Promise<AtomicExecuteResult>;
  /** Same as POST /v1/atomic-node-runs/{id}:cancel. */
  cancel(nodeRunId: string): void;
}

/** What the PDP offers in-process. */
export interface PdpApi {
  decide(request: PolicyDecisionRequest): Promise<PolicyDecision>;
}

interface InProcessApis {
  "atomic-executor": AtomicExecutorApi;
  pdp: PdpApi;
  "run-coordinator": CoordinatorApi;
}

const apis = new WeakMap<FastifyInstance, Partial<InProcessApis>>();

/** Makes a service's API callable by other services of this process. */
export function exposeInProcess<K extends keyof InProcessApis>(app: FastifyInstance, kind: K, api: InProcessApis[K]): void {
  apis.set(app, { ...apis.get(app), [kind]: api });
}

/** The in-process API a service exposed, if any. */
export function inProcessApi<K extends keyof InProcessApis>(app: FastifyInstance, kind: K): InProcessApis[K] | undefined {
  return apis.get(app)?.[kind] as InProcessApis[K] | undefined;
}
