/**
 * What `fabric node-types ls` tells besides the list: whether a reachable executor serves each node type, and the
 * problems that would otherwise go unnoticed: node types no executor serves (the registry's `unserved_node_types`
 * health check), handler packages and single node types an executor could not load (its `handlers` health check),
 * executors the directory lists that do not answer.
 */
import { implementationOf } from "../node-type-implementation.js";
import type { NodeType } from "@nodefabric/schemas";
import { HttpClient } from "../clients/http-client.js";
import type { ExecutorEntry, RegistryClient } from "../clients/registry-client.js";
import { FabricError } from "../http/errors.js";

/** How long an executor may take to answer its health before it is reported as unreachable. */
export const EXECUTOR_HEALTH_TIMEOUT_MS = 1_000;

/** Failed loads of one executor spelled out, one line each; the rest are counted. */
const FAILED_LOADS_SHOWN = 20;

/** Whether a node type is served: by a reachable executor, by none, or only by executors that did not answer. */
export type ServedState = "yes" | "no" | "unreachable";

export interface ServingReport {
  /** The node type's state; undefined when the executor directory could not be read. */
  servedState(nodeType: NodeType): ServedState | undefined;
  /** Lines for stderr, each starting with "! ". */
  warnings: string[];
}

interface HealthCheckBody {
  name?: unknown;
  details?: Record<string, unknown>;
}

/** What an executor's health says, or why it could not be read. */
type ExecutorProbe = { reachable: true; checks: HealthCheckBody[] } | { reachable: false; why: string };

function messageOf(err: unknown): string {
  return FabricError.is(err) ? `${err.code}: ${err.message}` : err instanceof Error ? err.message : String(err);
}

/** The checks of a health answer; a "down" service answers 503 with its health inside the ErrorEnvelope. */
function checksOf(body: unknown): HealthCheckBody[] {
  const b = body as { checks?: unknown; error?: { details?: { health?: { checks?: unknown } } } } | null;
  const checks = b?.checks ?? b?.error?.details?.health?.checks;
  return Array.isArray(checks) ? (checks as HealthCheckBody[]) : [];
}

/** Asks one executor for its health, without the user's token (health needs none, and the endpoint is whatever registered). */
async function probeExecutor(endpoint: string): Promise<ExecutorProbe> {
  let client: HttpClient;
  try {
    client = new HttpClient(endpoint, { connections: 1, headersTimeoutMs: EXECUTOR_HEALTH_TIMEOUT_MS, bodyTimeoutMs: EXECUTOR_HEALTH_TIMEOUT_MS });
  } catch (err) {
    return { reachable: false, why: `its endpoint is not a URL (${messageOf(err)})` };
  }
  // The signal also bounds connecting, which the client's own timeouts do not.
  const signal = AbortSignal.timeout(EXECUTOR_HEALTH_TIMEOUT_MS);
  try {
    const res = await client.request("GET", "/v1/health", undefined, { signal });
    return { reachable: true, checks: checksOf(res.body) };
  } catch (err) {
    return { reachable: false, why: signal.aborted ? `no answer within ${EXECUTOR_HEALTH_TIMEOUT_MS} ms` : messageOf(err) };
  } finally {
    await client.close().catch(() => undefined);
  }
}

const refKey = (id: string, version: string) => `${id}\u0000${version}`;

function hasPlan(nodeType: NodeType): boolean {
  return nodeType.extensions?.["nodefabric.plan"] !== undefined;
}

/** Reads the registry's health and executor directory, asks every listed executor for its health, and reports. */
export async function servingReport(registry: RegistryClient, listed: NodeType[]): Promise<ServingReport> {
  const warnings: string[] = [];
  const [health, directory] = await Promise.all([
    registry.http.request("GET", "/v1/health").then(
      (res) => ({ checks: checksOf(res.body) }),
      (err: unknown) => ({ error: messageOf(err) }),
    ),
    registry.listExecutors().then(
      (entries) => ({ entries }),
      (err: unknown) => ({ error: messageOf(err) }),
    ),
  ]);

  if ("error" in health) {
    warnings.push(`! cannot read the registry's health: ${health.error}`);
  } else {
    const check = health.checks.find((c) => c.name === "unserved_node_types");
    const refs = Array.isArray(check?.details?.node_types) ? (check.details.node_types as Array<{ node_type_id: string; version: string }>) : [];
    const isListed = new Set(listed.map((t) => refKey(t.node_type_id, t.version)));
    for (const r of refs) if (isListed.has(refKey(r.node_type_id, r.version))) warnings.push(`! no executor serves: ${r.node_type_id}@${r.version}`);
    const count = typeof check?.details?.count === "number" ? check.details.count : refs.length;
    if (count > refs.length) warnings.push(`! the registry names only ${refs.length} of the ${count} node types no executor serves; see GET ${registry.http.baseUrl}/v1/health`);
  }

  if ("error" in directory) {
    warnings.push(`! cannot read the executor directory: ${directory.error}`);
    return { servedState: () => undefined, warnings };
  }

  const byEndpoint = new Map<string, ExecutorEntry[]>();
  for (const e of directory.entries) {
    const list = byEndpoint.get(e.endpoint);
    if (list) list.push(e);
    else byEndpoint.set(e.endpoint, [e]);
  }
  const endpoints = [...byEndpoint.keys()];
  const probes = await Promise.all(endpoints.map((endpoint) => probeExecutor(endpoint)));
  const reachable = new Set<string>();
  endpoints.forEach((endpoint, i) => {
    const probe = probes[i]!;
    if (!probe.reachable) {
      const ids = byEndpoint.get(endpoint)!.map((e) => e.executor_instance_id).join(", ");
      warnings.push(`! ${endpoint} cannot be reached (executor ${ids}): ${probe.why}`);
      return;
    }
    reachable.add(endpoint);
    const failed = probe.checks.find((c) => c.name === "handlers")?.details?.failed;
    const list = Array.isArray(failed) ? (failed as Array<{ package?: unknown; reason?: unknown; node_type_id?: unknown }>) : [];
    for (const f of list.slice(0, FAILED_LOADS_SHOWN)) {
      // A single node type that could not load leaves the rest of its package served.
      const rest = f.node_type_id !== undefined ? " (its other node types are served)" : "";
      warnings.push(`! ${endpoint} could not load ${String(f.package)}: ${String(f.reason)}${rest}`);
    }
    if (list.length > FAILED_LOADS_SHOWN) warnings.push(`! ${endpoint} could not load ${list.length - FAILED_LOADS_SHOWN} more; see GET ${endpoint}/v1/health`);
  });

  const servingEntries = new Map<string, ExecutorEntry[]>();
  for (const e of directory.entries) {
    for (const r of e.node_types) {
      const key = refKey(r.node_type_id, r.version);
      const list = servingEntries.get(key);
      if (list) list.push(e);
      else servingEntries.set(key, [e]);
    }
  }
  const compositeEntries = directory.entries.filter((e) => e.kind === "composite");
  const stateOf = (entries: ExecutorEntry[]): ServedState =>
    entries.length === 0 ? "no" : entries.some((e) => reachable.has(e.endpoint)) ? "yes" : "unreachable";
  const servedState = (nodeType: NodeType): ServedState => {
    const implementation = implementationOf(nodeType);
    const listing = [
      ...(servingEntries.get(refKey(nodeType.node_type_id, nodeType.version)) ?? []),
      // Served wherever the definition implementing it is (an HTTP-backed node type, say).
      ...(implementation ? (servingEntries.get(refKey(implementation.node_type_id, implementation.version)) ?? []) : []),
    ];
    // Any composite executor runs a declarative plan read from the registry, whether or not it lists the node type.
    if (listing.length === 0 && nodeType.kind === "composite" && hasPlan(nodeType)) return stateOf(compositeEntries);
    return stateOf(listing);
  };
  return { servedState, warnings };
}
