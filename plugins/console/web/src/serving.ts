/**
 * Whether an executor serves a node type now, from the registry's executor directory (GET /v1/executors, which lists
 * only executors heard from lately), read the way `fabric node-types ls` reads it (core/src/cli/serving-report.ts).
 * The page cannot ask each executor for its health as the CLI does, so "listed" is as far as it can tell.
 */
import type { Executor, NodeType } from "./api";

/** undefined: the directory could not be read. */
export type Served = { executors: Executor[] } | undefined;

const key = (id: string, version: string) => `${id}\u0000${version}`;

function implementationOf(nt: NodeType): { node_type_id: string; version: string } | undefined {
  const v = nt.extensions?.["nodefabric.implementation"] as { node_type_id?: unknown; version?: unknown } | undefined;
  if (typeof v !== "object" || v === null || typeof v.node_type_id !== "string" || typeof v.version !== "string") return undefined;
  return { node_type_id: v.node_type_id, version: v.version };
}

export function servedBy(executors: Executor[] | undefined): (nt: NodeType) => Served {
  if (!executors) return () => undefined;
  const byRef = new Map<string, Executor[]>();
  for (const e of executors) {
    for (const r of e.node_types) {
      const k = key(r.node_type_id, r.version);
      byRef.set(k, [...(byRef.get(k) ?? []), e]);
    }
  }
  const composites = executors.filter((e) => e.kind === "composite");
  return (nt) => {
    const impl = implementationOf(nt);
    const listed = [...(byRef.get(key(nt.node_type_id, nt.version)) ?? []), ...(impl ? (byRef.get(key(impl.node_type_id, impl.version)) ?? []) : [])];
    // Any composite executor runs a declarative plan it reads from the registry, listed or not.
    if (listed.length === 0 && nt.kind === "composite" && nt.extensions?.["nodefabric.plan"] !== undefined) return { executors: composites };
    return { executors: listed };
  };
}
