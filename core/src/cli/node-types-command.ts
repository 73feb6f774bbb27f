/**
 * `fabric node-types ls` and `fabric node-types publish`.
 */
import { readFileSync } from "node:fs";
import type { NodeType } from "@nodefabric/schemas";
import { RegistryClient } from "../clients/registry-client.js";
import { FabricError } from "../http/errors.js";
import { clientAuthOptions } from "./run-cli-context.js";
import { servingReport } from "./serving-report.js";

function describeError(err: unknown): string {
  if (FabricError.is(err)) {
    const errors = (err.details?.errors as Array<{ path: string; message: string }> | undefined) ?? [];
    return [`${err.code}: ${err.message}`, ...errors.map((e) => `  ${e.path}: ${e.message}`)].join("\n");
  }
  return (err as Error).message;
}

/**
 * Prints the node types matching `q` as a table (with a SERVED column) or a JSON array, then on stderr one "! " line
 * per problem: node types no executor serves, handler packages an executor could not load, executors that do not
 * answer. Problems do not change the exit code: the listing itself succeeded.
 */
export async function nodeTypesLs(registryUrl: string, opts: { q?: string; kind?: "atomic" | "composite"; json?: boolean; token?: string }): Promise<number> {
  const client = new RegistryClient(registryUrl, clientAuthOptions(opts.token));
  try {
    let items: NodeType[];
    try {
      items = await client.listAll({ q: opts.q, kind: opts.kind });
    } catch (err) {
      process.stderr.write(`fabric: ${describeError(err)}\n`);
      return 1;
    }
    const report = await servingReport(client, items);
    if (opts.json) {
      process.stdout.write(`${JSON.stringify(items, null, 2)}\n`);
    } else if (items.length === 0) {
      process.stdout.write(opts.q ? `no node types match "${opts.q}"\n` : "no node types published\n");
    } else {
      const served = items.map((t) => report.servedState(t));
      const withServed = served.every((s) => s !== undefined);
      const rows = items.map((t, i) => [
        t.node_type_id,
        t.version,
        t.kind,
        (t.description ?? "").replace(/\s+/g, " ").slice(0, 60),
        ...(withServed ? [served[i]!] : []),
      ]);
      const head = ["NODE TYPE", "VERSION", "KIND", "DESCRIPTION", ...(withServed ? ["SERVED"] : [])];
      const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
      const line = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  ").trimEnd();
      process.stdout.write([line(head), ...rows.map(line)].join("\n") + "\n");
    }
    if (report.warnings.length > 0) process.stderr.write(report.warnings.join("\n") + "\n");
    return 0;
  } finally {
    await client.close();
  }
}

/** Publishes the NodeType in `file` (with `token` as bearer token, when given); returns the exit code. */
export async function nodeTypesPublish(registryUrl: string, file: string, token?: string): Promise<number> {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    process.stderr.write(`fabric: cannot read ${file}: ${(err as Error).message}\n`);
    return 2;
  }
  const nodeType = (doc && typeof doc === "object" && "node_type" in doc ? (doc as { node_type: unknown }).node_type : doc) as NodeType;
  const client = new RegistryClient(registryUrl, clientAuthOptions(token));
  try {
    const stored = await client.publish(nodeType);
    process.stdout.write(`published ${stored.node_type_id}@${stored.version}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`fabric: ${describeError(err)}\n`);
    return 1;
  } finally {
    await client.close();
  }
}
