/**
 * `fabric node-types import --from-openapi <file|url>`: every operation of an OpenAPI document (3.0, 3.1, or Swagger
 * 2.0) published to a running registry as a node type implemented by `http.request@1.0.0`. No package and no deploy:
 * an atomic executor that serves `@nodefabric/handler-http` runs them at once, through its egress policy, with the
 * same parameter serialisation, body encodings and security schemes as a package made by
 * `npm create fabric-handler -- --from-openapi`. The importer is @nodefabric/importer-openapi, loaded only here.
 */
import type { NodeType } from "@nodefabric/schemas";
import { RegistryClient } from "../clients/registry-client.js";
import { FabricError } from "../http/errors.js";
import { IMPLEMENTATION_EXTENSION } from "../node-type-implementation.js";
import { ImporterMissingError, loadOpenApiImporter, type OpenApiImporter, type OpenApiMapping } from "../importers/index.js";
import { clientAuthOptions } from "./run-cli-context.js";

/** The template definition that runs imported operations. */
export const HTTP_REQUEST_TEMPLATE = { node_type_id: "http.request", version: "1.0.0" } as const;

/** How many node types one registry request carries. */
const BATCH_SIZE = 200;

/** Options of `fabric node-types import`. */
export interface NodeTypesImportOptions {
  fromOpenApi: string;
  /** The node_type_id prefix (default: made from the API's title). */
  prefix?: string;
  /** The version of every node type (default 1.0.0). */
  version?: string;
  include?: string[];
  exclude?: string[];
  /** Replaces the document's server URL (`nodefabric.http.base_url`). */
  baseUrl?: string;
  /** Print what would be published, as JSON, and publish nothing. */
  dryRun?: boolean;
  token?: string;
  cwd?: string;
}

/** Where the command writes. */
export interface CommandOutput {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

/** A node type id prefix made from free text such as an API title (`"Swagger Petstore - OpenAPI 3.0"` → `swagger-petstore-openapi-3.0`). */
export function prefixFromTitle(title: string): string {
  const slug = title
    .toLowerCase()
    .replace(/[^a-z0-9.]+/g, "-")
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, "")
    .slice(0, 40)
    .replace(/[^a-z0-9]+$/, "");
  return slug === "" ? "api" : slug;
}

/** `PETSTORE` from `petstore`: the prefix of setting and secret names. */
export function settingsPrefixOf(prefix: string): string {
  const stem = prefix.toUpperCase().replace(/[^A-Z0-9]+/g, "_").replace(/^_+|_+$/g, "");
  return `${/^[0-9]/.test(stem) ? "_" : ""}${stem === "" ? "API" : stem}`;
}

/** The NodeTypes to publish: each mapped operation, implemented by http.request, with the base URL override if any. */
export function importedNodeTypes(mapping: OpenApiMapping, baseUrl?: string): NodeType[] {
  return mapping.operations.map((operation) => {
    const extensions: Record<string, unknown> = { ...(operation.nodeType.extensions ?? {}), [IMPLEMENTATION_EXTENSION]: { ...HTTP_REQUEST_TEMPLATE } };
    if (baseUrl) extensions["nodefabric.http"] = { base_url: baseUrl };
    return { ...operation.nodeType, extensions } as NodeType;
  });
}

function describeError(err: unknown): string {
  if (FabricError.is(err)) {
    const errors = (err.details?.errors as Array<{ path: string; message: string }> | undefined) ?? [];
    return [`${err.code}: ${err.message}`, ...errors.slice(0, 20).map((e) => `  ${e.path}: ${e.message}`)].join("\n");
  }
  return (err as Error).message;
}

/** Runs the import against the registry at `registryUrl`; answers the exit code (0 published, 1 failed, 2 bad input). */
export async function nodeTypesImport(registryUrl: string, options: NodeTypesImportOptions, out: CommandOutput = process): Promise<number> {
  const progress = (message: string) => out.stderr.write(`fabric: ${message}\n`);
  if (options.baseUrl !== undefined && !/^https?:\/\/[^/]/i.test(options.baseUrl)) {
    out.stderr.write(`fabric: --base-url must be an absolute http(s) URL, not ${JSON.stringify(options.baseUrl)}\n`);
    return 2;
  }
  let importer: OpenApiImporter;
  try {
    importer = await loadOpenApiImporter(options.cwd);
  } catch (err) {
    out.stderr.write(`fabric: ${(err as Error).message}\n`);
    return err instanceof ImporterMissingError ? 2 : 1;
  }
  const { loadOpenApi, mapOpenApi, OpenApiImportError } = importer;
  let mapping: OpenApiMapping;
  try {
    const loaded = await loadOpenApi(options.fromOpenApi, { cwd: options.cwd, onProgress: progress });
    const prefix = options.prefix ?? prefixFromTitle(loaded.document.info?.title ?? "api");
    mapping = mapOpenApi(loaded.document, {
      prefix,
      settingsPrefix: settingsPrefixOf(prefix),
      include: options.include,
      exclude: options.exclude,
      location: loaded.location,
      nodeTypeVersion: options.version,
      onProgress: progress,
    });
    mapping.notes.unshift(...loaded.notes.filter((n) => !mapping.notes.includes(n)));
  } catch (err) {
    out.stderr.write(`fabric: ${(err as Error).message}\n`);
    return err instanceof OpenApiImportError ? 2 : 1;
  }
  if (mapping.operations.length === 0) {
    out.stderr.write(`fabric: no operation of ${options.fromOpenApi} can be made into a node type${leftOutLines(mapping, 20)}\n`);
    return 1;
  }
  const nodeTypes = importedNodeTypes(mapping, options.baseUrl);
  if (options.dryRun) {
    out.stdout.write(`${JSON.stringify({ node_types: nodeTypes, left_out: mapping.leftOut, secrets: mapping.secrets, settings: mapping.settings, notes: mapping.notes }, null, 2)}\n`);
    return 0;
  }

  const client = new RegistryClient(registryUrl, clientAuthOptions(options.token));
  try {
    for (let start = 0; start < nodeTypes.length; start += BATCH_SIZE) {
      const batch = nodeTypes.slice(start, start + BATCH_SIZE);
      try {
        await client.publishMany(batch);
      } catch (err) {
        out.stderr.write(`fabric: publishing node types ${start + 1} to ${start + batch.length} failed (${start} were published before): ${describeError(err)}\n`);
        return 1;
      }
      if (nodeTypes.length > BATCH_SIZE) progress(`published ${Math.min(start + BATCH_SIZE, nodeTypes.length)} of ${nodeTypes.length} node types`);
    }
  } finally {
    await client.close();
  }
  out.stdout.write(summary(mapping, nodeTypes, options.baseUrl));
  return 0;
}

function leftOutLines(mapping: OpenApiMapping, max: number): string {
  if (mapping.leftOut.length === 0) return "";
  const lines = mapping.leftOut.slice(0, max).map((l) => `\n  ${l.method} ${l.path}${l.operationId ? ` (${l.operationId})` : ""}: ${l.reason}`);
  if (mapping.leftOut.length > max) lines.push(`\n  … and ${mapping.leftOut.length - max} more`);
  return `:${lines.join("")}`;
}

/** What was published, what was left out, the secrets to give the executor, and a run to try. */
function summary(mapping: OpenApiMapping, nodeTypes: NodeType[], baseUrl?: string): string {
  const lines = [`published ${nodeTypes.length} node type${nodeTypes.length === 1 ? "" : "s"} of ${mapping.title} ${mapping.apiVersion}, run by ${HTTP_REQUEST_TEMPLATE.node_type_id}@${HTTP_REQUEST_TEMPLATE.version}:`];
  for (const t of nodeTypes.slice(0, 15)) lines.push(`  ${t.node_type_id}@${t.version}`);
  if (nodeTypes.length > 15) lines.push(`  … and ${nodeTypes.length - 15} more (fabric node-types ls ${nodeTypes[0].node_type_id.split(".")[0]}.)`);
  if (mapping.leftOut.length > 0) lines.push(`left out (${mapping.leftOut.length})${leftOutLines(mapping, 20)}`);
  const base = baseUrl ?? mapping.defaultBaseUrl;
  const host = base ? new URL(base).host : "<the API's host>";
  if (mapping.secrets.length > 0) {
    lines.push("", "The executor sends these secrets only to the hosts they are bound to; where it runs, set:");
    for (const s of mapping.secrets) lines.push(`  FABRIC_SECRET_${s.name}=…  FABRIC_EXECUTOR_SECRET_HOSTS_${s.name}=${host}    # ${s.description}`);
  }
  if (!base) lines.push("", `The document names no absolute server URL: publish again with --base-url <url>.`);
  const first = nodeTypes.find((t) => (t.constraints as { gates?: { side_effect_class?: string } } | undefined)?.gates?.side_effect_class === "read") ?? nodeTypes[0];
  lines.push("", "Try it:", `  npx fabric run ${first.node_type_id}@${first.version} --input '{…}'`, "");
  return lines.join("\n");
}
