/**
 * `fabric node-types import --from-a2a <card URL>`: every skill of a remote A2A agent published to a running registry
 * as a node type run by `a2a.send@1.0.0` (of `@nodefabric/handler-a2a`), made by `@nodefabric/importer-a2a`, which is
 * loaded only for this command. No package and no deploy: an atomic executor serving `@nodefabric/handler-a2a` runs
 * them at once, through its egress policy, with the credentials the operator holds as executor secrets.
 */
import type { NodeType } from "@nodefabric/schemas";
import { sampleFor, type SchemaObject } from "@nodefabric/sdk/samples";
import { ImporterMissingError, loadA2aImporter, type A2aImportResult } from "../importers/index.js";
import type { CommandOutput } from "./node-types-import.js";
import { leftOutLines, publishImport } from "./import-publish.js";

/** Options of `fabric node-types import --from-a2a`. */
export interface A2aImportCommandOptions {
  fromA2a: string;
  prefix?: string;
  version?: string;
  include?: string[];
  exclude?: string[];
  /** `Name: value`, or `Name: Bearer {secret:NAME}`. */
  headers?: string[];
  timeoutMs?: number;
  dryRun?: boolean;
  token?: string;
  cwd?: string;
}

/** Runs the import against the registry at `registryUrl`; answers the exit code (0 published, 1 failed, 2 bad input). */
export async function nodeTypesImportA2a(registryUrl: string, options: A2aImportCommandOptions, out: CommandOutput = process): Promise<number> {
  const progress = (message: string) => out.stderr.write(`fabric: ${message}\n`);
  let importer;
  try {
    importer = await loadA2aImporter(options.cwd);
  } catch (err) {
    out.stderr.write(`fabric: ${(err as Error).message}\n`);
    return err instanceof ImporterMissingError ? 2 : 1;
  }
  let result: A2aImportResult;
  try {
    const headers = (options.headers ?? []).map((h) => importer.parseHeader(h));
    result = await importer.importA2aAgent(options.fromA2a, {
      prefix: options.prefix,
      version: options.version,
      include: options.include,
      exclude: options.exclude,
      headers,
      timeoutMs: options.timeoutMs,
      onProgress: progress,
    });
  } catch (err) {
    out.stderr.write(`fabric: ${(err as Error).message}\n`);
    return err instanceof importer.A2aImportError ? 2 : 1;
  }
  const published = await publishImport(
    result,
    { registryUrl, token: options.token, dryRun: options.dryRun, item: "skill", extension: "nodefabric.a2a", source: options.fromA2a, dryRunView: () => ({ agent: result.agent, node_types: result.nodeTypes, left_out: result.leftOut, secrets: result.secrets, notes: result.notes }) },
    progress,
    out,
  );
  if (typeof published === "number") return published;
  out.stdout.write(summary(result, published));
  return 0;
}

/** What was published, what was left out, what the executor needs, and a run to try. */
function summary(result: A2aImportResult, nodeTypes: NodeType[]): string {
  const agent = `${result.agent.name}${result.agent.version ? ` ${result.agent.version}` : ""}`;
  const lines = [`published ${nodeTypes.length} node type${nodeTypes.length === 1 ? "" : "s"} of the A2A agent ${agent} (A2A ${result.agent.protocol_version ?? "?"}, ${result.agent.streaming ? "streaming" : "polled"}), run by a2a.send@1.0.0:`];
  for (const t of nodeTypes.slice(0, 15)) lines.push(`  ${t.node_type_id}@${t.version}`);
  if (nodeTypes.length > 15) lines.push(`  … and ${nodeTypes.length - 15} more`);
  if (result.leftOut.length > 0) lines.push(`left out (${result.leftOut.length})${leftOutLines(result.leftOut, "skill", 20)}`);
  const host = new URL(result.agent.card_url).host;
  lines.push("", `The executor that runs them must be allowed to reach ${host} (its egress policy; loopback and private addresses are refused unless the operator allows them).`);
  if (result.secrets.length > 0) {
    lines.push("The executor sends these secrets only to the hosts they are bound to; where it runs, set:");
    for (const s of result.secrets) lines.push(`  FABRIC_SECRET_${s.replace("{tenant}", "<tenant>")}=…  FABRIC_EXECUTOR_SECRET_HOSTS_${s.replace("{tenant}", "<tenant>")}=${host}`);
  }
  const first = nodeTypes[0]!;
  const sample = sampleFor((first.input_schema ?? { type: "object" }) as SchemaObject, { prefer: "minimal" });
  const input = "value" in sample ? JSON.stringify(sample.value).replace(/'/g, "'\\''") : "{…}";
  lines.push("", "Try it:", `  npx fabric run ${first.node_type_id}@${first.version} --input '${input}'`, "");
  return lines.join("\n");
}
