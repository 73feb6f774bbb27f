/**
 * Who may call what: the audience of each service, the scope every endpoint needs, the endpoints an
 * `assignment_token` may use, and the scopes each service's own outbound tokens carry. docs/auth.md shows the same
 * table; a test keeps the two equal, and a service refuses to start with a route this table does not cover.
 */
import type { ServiceName } from "../service-names.js";

/**
 * The scopes of the v1 contract (docs/auth.md, "Scopes"), plus two NodeFabric extensions meant for service identities only:
 * `identity:delegate` and `executors:register` (SERVICE_ONLY_SCOPES), and `metrics:read` for metrics scrapers.
 */
export const SCOPES = [
  "runs:write",
  "runs:read",
  "node-runs:write",
  "node-types:write",
  "node-types:read",
  "executions:write",
  "candidate-sets:write",
  "policy:decide",
  "approvals:write",
  // Lets a service token pass on the identity of the caller it acts for (the gateway, in `x-nodefabric-caller`).
  "identity:delegate",
  // Lets an executor enter itself in the registry's executor directory: the coordinator sends it the inputs of every
  // NodeRun of the node types it names, and its own token.
  "executors:register",
  // Lets a scraper (Prometheus) read a service's metrics at GET /metrics (served by the telemetry plugin).
  "metrics:read",
] as const;
export type Scope = (typeof SCOPES)[number];

/**
 * Scopes for the fabric's own services, not for people: `fabric token mint` refuses them without
 * `--allow-service-scopes`. A client holding one could act for any caller, or receive other tenants' inputs.
 */
export const SERVICE_ONLY_SCOPES: ReadonlySet<Scope> = new Set<Scope>(["identity:delegate", "executors:register"]);

/** The `aud` a token must carry to be accepted by a service. */
export function audienceOf(service: ServiceName): string {
  return `nodefabric-${service}`;
}

/** Endpoints that never need a token. */
export const PUBLIC_ROUTES: ReadonlySet<string> = new Set(["GET /v1/health", "GET /v1/version"]);

export interface RouteAccess {
  method: "GET" | "POST" | "PUT";
  /** The path as the contract writes it (docs/api.md, "How a document is made"): `{param}` for parameters, `:action` suffixes. */
  path: string;
  /** The scope a token needs. A `:write` scope also grants the `:read` scope of the same resource. */
  scope: Scope;
  /** Whether an `assignment_token` may call it (bound to its NodeRun; the coordinator checks which one). */
  assignment?: true;
}

const RUN_READS: RouteAccess[] = [
  { method: "GET", path: "/v1/runs", scope: "runs:read" },
  { method: "GET", path: "/v1/runs/{run_id}", scope: "runs:read" },
  { method: "GET", path: "/v1/runs/{run_id}/node-runs", scope: "runs:read" },
  { method: "GET", path: "/v1/runs/{run_id}/events", scope: "runs:read" },
  // Who may see a run may see what waits on it: the listing is confined to the caller's tenant as GET /v1/runs is.
  { method: "GET", path: "/v1/approvals", scope: "runs:read" },
];

const RUN_WRITES: RouteAccess[] = [
  { method: "POST", path: "/v1/runs", scope: "runs:write" },
  { method: "POST", path: "/v1/runs/{run_id}:cancel", scope: "runs:write" },
  { method: "POST", path: "/v1/approvals/{approval_id}:approve", scope: "approvals:write" },
  { method: "POST", path: "/v1/approvals/{approval_id}:reject", scope: "approvals:write" },
];

/** The one table of required scopes, per service. */
export const ROUTE_ACCESS: Readonly<Record<ServiceName, readonly RouteAccess[]>> = {
  "run-gateway": [...RUN_WRITES, ...RUN_READS, { method: "GET", path: "/v1/node-runs/{node_run_id}", scope: "runs:read" }],
  "run-coordinator": [
    ...RUN_WRITES,
    ...RUN_READS,
    { method: "POST", path: "/v1/node-runs", scope: "node-runs:write", assignment: true },
    { method: "GET", path: "/v1/node-runs/{node_run_id}", scope: "runs:read", assignment: true },
    { method: "GET", path: "/v1/node-runs/{node_run_id}/events", scope: "runs:read", assignment: true },
    { method: "POST", path: "/v1/node-runs/{node_run_id}:evaluation", scope: "node-runs:write", assignment: true },
    { method: "POST", path: "/v1/node-runs/{node_run_id}:complete", scope: "node-runs:write", assignment: true },
    { method: "POST", path: "/v1/node-runs/{node_run_id}:progress", scope: "node-runs:write", assignment: true },
    { method: "POST", path: "/v1/node-runs/{node_run_id}:output-delta", scope: "node-runs:write", assignment: true },
    { method: "POST", path: "/v1/node-runs/{node_run_id}:checkpoint", scope: "node-runs:write", assignment: true },
  ],
  "atomic-executor": [
    { method: "POST", path: "/v1/atomic-node-runs:execute", scope: "executions:write" },
    { method: "POST", path: "/v1/atomic-node-runs/{node_run_id}:cancel", scope: "executions:write" },
  ],
  "composite-executor": [
    { method: "POST", path: "/v1/composite-node-runs:begin", scope: "executions:write" },
    { method: "POST", path: "/v1/composite-node-runs/{node_run_id}:cancel", scope: "executions:write" },
  ],
  "node-registry": [
    { method: "GET", path: "/v1/node-types", scope: "node-types:read" },
    { method: "POST", path: "/v1/node-types", scope: "node-types:write" },
    { method: "POST", path: "/v1/node-types:batch", scope: "node-types:write" },
    { method: "GET", path: "/v1/node-types/{node_type_id}", scope: "node-types:read" },
    { method: "GET", path: "/v1/node-types/{node_type_id}/versions", scope: "node-types:read" },
    // The executor directory: whoever is listed there is sent the inputs of every NodeRun of its node types, so
    // entering it takes a scope of its own, for the executors' service identities.
    { method: "PUT", path: "/v1/executors/{executor_instance_id}", scope: "executors:register" },
    { method: "POST", path: "/v1/executors/{executor_instance_id}:heartbeat", scope: "executors:register" },
    { method: "GET", path: "/v1/executors", scope: "node-types:read" },
  ],
  selection: [
    { method: "POST", path: "/v1/candidate-sets", scope: "candidate-sets:write" },
    { method: "GET", path: "/v1/candidate-sets/{candidate_set_id}", scope: "candidate-sets:write" },
  ],
  pdp: [
    { method: "POST", path: "/v1/policy:decide", scope: "policy:decide" },
    // An extension: several decisions in one request, each what policy:decide answers, so the same scope.
    { method: "POST", path: "/v1/policy:decideBatch", scope: "policy:decide" },
  ],
};

/** Writes a fastify route URL the way the contract does (docs/api.md): `/v1/runs/:run_id(.+)::cancel` → `/v1/runs/{run_id}:cancel`. */
export function contractPath(fastifyUrl: string): string {
  return fastifyUrl.replace(/::/g, "\u0000").replace(/:([A-Za-z_][A-Za-z0-9_]*)(\([^)]*\))?/g, "{$1}").replace(/\u0000/g, ":");
}

/** Whether a token's scopes grant `needed` (`x:write` grants `x:read`). */
export function grants(scopes: ReadonlySet<string>, needed: string): boolean {
  if (scopes.has(needed)) return true;
  return needed.endsWith(":read") && scopes.has(`${needed.slice(0, -":read".length)}:write`);
}

/**
 * The scopes a service's own token for `target` carries: what that service needs of the target, and no more.
 * Only the gateway and coordinators may pass on their caller's identity; only the executors publish node types and register themselves.
 */
export function outboundScopes(from: ServiceName, target: ServiceName): Scope[] {
  const needed = new Set<Scope>();
  for (const r of ROUTE_ACCESS[target]) needed.add(r.scope);
  if (target === "run-coordinator") {
    // Composite executors reach the coordinator with assignment tokens, never with their own.
    needed.delete("node-runs:write");
    // The gateway passes on its caller; a coordinator passes on the caller of a write it forwards to the coordinator
    // holding the run (several coordinators on one database).
    if (from === "run-gateway" || from === "run-coordinator") needed.add("identity:delegate");
  }
  if (target === "node-registry" && from !== "atomic-executor" && from !== "composite-executor") {
    // The coordinator and Selection only read the catalogue.
    needed.delete("node-types:write");
    needed.delete("executors:register");
  }
  return [...needed].sort();
}
