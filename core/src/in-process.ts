/**
 * When services share one process they call each other directly, with the same payloads and without the socket.
 * A service exposes its API on its fastify instance here; the launcher hands it to the services that call it.
 * Each API is named by a typed kind (InProcessKind): the atomic executor's and the PDP's are here with their
 * interfaces, the coordinator's (COORDINATOR_API) beside its class and the gateway's (RUN_GATEWAY_API) beside its
 * functions, so this file, on the lowest floor of core, imports no service (docs/architecture.md, "Floors").
 */
import type { FastifyInstance } from "fastify";
import type { AtomicExecuteRequest, AtomicExecuteResult, PolicyDecision, PolicyDecisionRequest } from "@nodefabric/schemas";

/** What the atomic executor offers in-process. */
export interface AtomicExecutorApi {
  /**
   * Same as POST /v1/atomic-node-runs:execute; throws the FabricError the route would answer. `assignmentToken` mints
   * the NodeRun's assignment token when the request carries none, at the handler's first progress report or checkpoint.
   */
  execute(request: AtomicExecuteRequest, idempotencyKey?: string, options?: { assignmentToken?: () => Promise<string> }): Promise<AtomicExecuteResult>;
  /** Same as POST /v1/atomic-node-runs/{id}:cancel. */
  cancel(nodeRunId: string): void;
  /** The coordinator of this process recorded the answer of `idempotencyKey`: its remembered result is dropped. */
  forget(idempotencyKey: string): void;
}

/** What the PDP offers in-process. */
export interface PdpApi {
  decide(request: PolicyDecisionRequest): Promise<PolicyDecision>;
}

/** Names an API a service may expose in process; `Api` is its type. */
export interface InProcessKind<Api> {
  readonly name: string;
  /** Never set: it carries the API's type. */
  readonly api?: Api;
}

/** A kind of in-process API, by the service's name. */
export function inProcessKind<Api>(name: string): InProcessKind<Api> {
  return { name };
}

export const ATOMIC_EXECUTOR_API = inProcessKind<AtomicExecutorApi>("atomic-executor");
export const PDP_API = inProcessKind<PdpApi>("pdp");

const apis = new WeakMap<FastifyInstance, Map<string, unknown>>();

/** Makes a service's API callable by other services of this process. */
export function exposeInProcess<Api>(app: FastifyInstance, kind: InProcessKind<Api>, api: NoInfer<Api>): void {
  const exposed = apis.get(app) ?? new Map<string, unknown>();
  exposed.set(kind.name, api);
  apis.set(app, exposed);
}

/** The in-process API a service exposed, if any. */
export function inProcessApi<Api>(app: FastifyInstance, kind: InProcessKind<Api>): Api | undefined {
  return apis.get(app)?.get(kind.name) as Api | undefined;
}
