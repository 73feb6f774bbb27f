/**
 * Publishing what an importer made (`fabric node-types import --from-mcp` and `--from-a2a`): in batches of BATCH_SIZE,
 * leaving out with the registry's reason each node type it refuses and publishing the rest of the batch.
 */
import type { NodeType } from "@nodefabric/schemas";
import type { RegistryClient } from "../clients/registry-client.js";
import { FabricError } from "../http/errors.js";
import type { CommandOutput } from "./node-types-import.js";

/** How many node types one registry request carries. */
export const BATCH_SIZE = 200;

export function describeError(err: unknown): string {
  if (FabricError.is(err)) {
    const errors = (err.details?.errors as Array<{ path: string; message: string }> | undefined) ?? [];
    return [`${err.code}: ${err.message}`, ...errors.slice(0, 20).map((e) => `  ${e.path}: ${e.message}`)].join("\n");
  }
  return (err as Error).message;
}

/** The indexes of a batch the registry refused, each with its reasons (`/node_types/<i>/…` in the error's details). */
export function refusedIndexes(err: unknown): Map<number, string> {
  const refused = new Map<number, string>();
  if (!FabricError.is(err)) return refused;
  for (const e of (err.details?.errors as Array<{ path: string; message: string }> | undefined) ?? []) {
    const m = /^\/node_types\/(\d+)(\/.*)?$/.exec(e.path);
    if (!m) return new Map();
    const i = Number(m[1]);
    refused.set(i, [refused.get(i), `${m[2] ?? ""} ${e.message}`.trim()].filter(Boolean).join("; "));
  }
  return refused;
}

/**
 * Publishes `nodeTypes` in batches; `leftOut` is told of each one the registry refused, with its reason. Answers the
 * node types published, or undefined when a batch failed (said on stderr, with how many were published before).
 */
export async function publishImported(
  client: RegistryClient,
  nodeTypes: NodeType[],
  leftOut: (t: NodeType, reason: string) => void,
  progress: (line: string) => void,
  out: CommandOutput,
): Promise<Set<NodeType> | undefined> {
  const published = new Set<NodeType>();
  for (let start = 0; start < nodeTypes.length; start += BATCH_SIZE) {
    let batch = nodeTypes.slice(start, start + BATCH_SIZE);
    try {
      try {
        await client.publishMany(batch);
      } catch (err) {
        // The registry names each node type it refuses (its schemas would not compile): those are left out, with its
        // reason, and the rest of the batch is published.
        const refused = refusedIndexes(err);
        if (refused.size === 0 || refused.size === batch.length) throw err;
        for (const [i, reason] of refused) leftOut(batch[i]!, `the registry refused it: ${reason}`);
        batch = batch.filter((_, i) => !refused.has(i));
        await client.publishMany(batch);
      }
    } catch (err) {
      out.stderr.write(`fabric: publishing node types ${start + 1} to ${start + batch.length} failed (${start} were published before): ${describeError(err)}\n`);
      return undefined;
    }
    for (const t of batch) published.add(t);
    if (nodeTypes.length > BATCH_SIZE) progress(`published ${Math.min(start + BATCH_SIZE, nodeTypes.length)} of ${nodeTypes.length} node types`);
  }
  return published;
}
