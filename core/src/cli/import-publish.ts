/**
 * Publishing what an importer made (`fabric node-types import --from-mcp` and `--from-a2a`): in batches of BATCH_SIZE,
 * leaving out with the registry's reason each node type it refuses and publishing the rest of the batch.
 */
import type { NodeType } from "@nodefabric/schemas";
import { RegistryClient } from "../clients/registry-client.js";
import { FabricError } from "../http/errors.js";
import { clientAuthOptions } from "./run-cli-context.js";
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

/** What an importer of tools (MCP) or skills (A2A) answers, as far as publishing it goes. */
export interface ImportedSet {
  nodeTypes: NodeType[];
  leftOut: Array<{ reason: string } & Record<string, unknown>>;
  notes: string[];
}

export interface PublishImportOptions {
  registryUrl: string;
  token?: string;
  dryRun?: boolean;
  /** What one source item is called in messages and left-out entries: `tool` (MCP) or `skill` (A2A). */
  item: "tool" | "skill";
  /** The node types' extension that names their source item (`nodefabric.mcp`, `nodefabric.a2a`). */
  extension: string;
  /** The source as the user named it (`--from-mcp`, `--from-a2a`). */
  source: string;
  /** What `--dry-run` prints (as JSON). */
  dryRunView: () => unknown;
}

/** The left-out entries as lines (at most `max`), after a colon; empty when nothing was left out. */
export function leftOutLines(leftOut: ImportedSet["leftOut"], item: string, max: number): string {
  if (leftOut.length === 0) return "";
  const lines = leftOut.slice(0, max).map((l) => `\n  ${String(l[item])}: ${l.reason}`);
  if (leftOut.length > max) lines.push(`\n  … and ${leftOut.length - max} more`);
  return `:${lines.join("")}`;
}

/**
 * The end of an import command, the same for every importer: its notes, nothing to publish (exit 1, with what was left
 * out and why), `--dry-run` (the view, exit 0), or the node types published in batches. Answers the node types
 * published, or the exit code when the command ends here.
 */
export async function publishImport(result: ImportedSet, options: PublishImportOptions, progress: (line: string) => void, out: CommandOutput): Promise<NodeType[] | number> {
  for (const note of result.notes) progress(note);
  if (result.nodeTypes.length === 0) {
    out.stderr.write(`fabric: no ${options.item} of ${options.source} can be made into a node type${leftOutLines(result.leftOut, options.item, 20)}\n`);
    return 1;
  }
  if (options.dryRun) {
    out.stdout.write(`${JSON.stringify(options.dryRunView(), null, 2)}\n`);
    return 0;
  }
  const client = new RegistryClient(options.registryUrl, clientAuthOptions(options.token));
  let published: Set<NodeType> | undefined;
  try {
    published = await publishImported(
      client,
      result.nodeTypes,
      (t, reason) => {
        const named = (t.extensions as Record<string, Record<string, unknown> | undefined> | undefined)?.[options.extension]?.[options.item];
        result.leftOut.push({ [options.item]: String(named), reason });
      },
      progress,
      out,
    );
  } finally {
    await client.close();
  }
  if (!published) return 1;
  return result.nodeTypes.filter((t) => published!.has(t));
}
