/**
 * A handler package made from a remote A2A agent (`--from-a2a <card URL>`): one atomic node type per skill, kept as data.
 *
 * - `node-types/<skill>.json` holds each NodeType as `fabric node-types import --from-a2a` makes it (schemas, the
 *   skill's hash), run by this package's own handler rather than `a2a.send`; `node-types/index.json` lists them.
 * - `src/index.ts` is one `defineAtomicSet` whose handler is `a2aSkillHandler` of `@nodefabric/handler-a2a`.
 * - `test/exchanges.json` holds the agent's recorded card and, per skill, sample inputs and an answer that fits its
 *   output schema; `test/handler.test.ts` serves them from a stand-in agent (the official A2A SDK on loopback) and
 *   runs every node type against it, so `npm test` passes offline as generated. The real agent is never sent sample
 *   inputs: a skill may have side effects.
 */
import type { NodeType } from "@nodefabric/schemas";
import { A2aImportError, importA2aAgent, parseHeader, type A2aImport } from "@nodefabric/importer-a2a";
import { sampleFor, type SchemaObject } from "@nodefabric/sdk/samples";
import { ScaffoldError } from "./errors.js";
import { DEFAULT_SDK_SPEC, packageManifest } from "./package-manifest.js";
import { baseUrlSettingOf, nodeTypePrefixOf } from "./package-name.js";
import { renderTemplateFolder, type GeneratedFile } from "./template-files.js";

/** One recorded exchange: the inputs sent and the outputs the stand-in's answer gives. */
export type A2aExchange = { node_type_id: string; skill: string; inputs: Record<string, unknown>; outputs: Record<string, unknown> } | { node_type_id: string; skill: string; untested: string };

/** What the generated package holds. */
export interface A2aPackage {
  files: GeneratedFile[];
  nodeTypeIds: string[];
  tryIt: { nodeTypeId: string; inputs: Record<string, unknown> };
  skipped: string[];
  description: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  /** Executor secrets its node types send. */
  secrets: string[];
}

/** The versions a generated package installs (this release's). */
export const A2A_PACKAGE_VERSIONS = { handlerA2a: "^0.1.0", a2aSdk: "^1.3.0", express: "^5.1.0", typesExpress: "^5.0.0" } as const;

function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

function seedOf(text: string): number {
  let h = 7;
  for (const c of text) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return (h % 100_000) + 1;
}

/** The exchange of one node type: sample inputs, and outputs fitting its output schema. */
function exchangeFor(nodeType: NodeType): A2aExchange {
  const id = nodeType.node_type_id;
  const skill = (nodeType.extensions as Record<string, { skill: string }>)["nodefabric.a2a"]!.skill;
  const inputs = sampleFor((nodeType.input_schema ?? { type: "object" }) as SchemaObject, { seed: seedOf(id), prefer: "minimal" });
  if ("error" in inputs) return { node_type_id: id, skill, untested: `no valid sample inputs: ${inputs.error}` };
  const schema = nodeType.output_schema as Record<string, unknown> | undefined;
  const own = schema && (schema.properties as Record<string, unknown> | undefined)?.files === undefined;
  if (own) {
    const sample = sampleFor(schema as SchemaObject, { seed: seedOf(`${id}:out`), prefer: "minimal" });
    if ("error" in sample) return { node_type_id: id, skill, untested: `no valid sample answer: ${sample.error}` };
    return { node_type_id: id, skill, inputs: inputs.value as Record<string, unknown>, outputs: sample.value as Record<string, unknown> };
  }
  return { node_type_id: id, skill, inputs: inputs.value as Record<string, unknown>, outputs: { text: `a recorded answer of ${skill}` } };
}

/** Reads the agent's card and makes the package's files (package.json and the shared files are the caller's). */
export async function a2aPackage(options: { packageName: string; nodeTypePrefix: string; source: string; include?: string[]; exclude?: string[]; headers?: string[]; onProgress?: (message: string) => void }): Promise<A2aPackage> {
  let imported: A2aImport;
  try {
    const headers = (options.headers ?? []).map((h) => parseHeader(h));
    imported = await importA2aAgent(options.source, { prefix: options.nodeTypePrefix, include: options.include, exclude: options.exclude, headers, onProgress: options.onProgress });
  } catch (err) {
    if (err instanceof A2aImportError) throw new ScaffoldError(err.message, { cause: err });
    throw new ScaffoldError((err as Error).message, { cause: err });
  }
  if (imported.nodeTypes.length === 0) {
    const why = imported.leftOut.length > 0 ? `: ${imported.leftOut.slice(0, 10).map((l) => `${l.skill} (${l.reason})`).join("; ")}` : "";
    throw new ScaffoldError(`the A2A agent has no skill a node type can be made from${why}`);
  }
  // The package runs them with its own handler: no template to name.
  const nodeTypes = imported.nodeTypes.map((t) => {
    const { ["nodefabric.implementation"]: _template, ...extensions } = t.extensions as Record<string, unknown>;
    return { ...t, extensions } as unknown as NodeType;
  });
  const fileOf = (t: NodeType) => `${t.node_type_id.slice(options.nodeTypePrefix.length + 1).replace(/[^A-Za-z0-9._-]/g, "_")}.json`;
  const exchanges = nodeTypes.map(exchangeFor);
  const tested = exchanges.find((e): e is Extract<A2aExchange, { inputs: unknown }> => "inputs" in e);
  const tryIt = { nodeTypeId: `${tested?.node_type_id ?? nodeTypes[0]!.node_type_id}@1.0.0`, inputs: tested?.inputs ?? {} };
  const agentLabel = `${imported.agent.name}${imported.agent.version ? ` ${imported.agent.version}` : ""}`;
  const files: GeneratedFile[] = [
    ...renderTemplateFolder("a2a", {
      packageName: options.packageName,
      agentLabel,
      cardUrl: imported.agent.card_url,
      skillCount: String(nodeTypes.length),
      skillsTable: nodeTypes.map((t) => `| \`${t.node_type_id}\` | ${(t.description ?? "").replace(/\s+/g, " ").replace(/\|/g, "\\|").slice(0, 120)} |`).join("\n"),
      leftOut: imported.leftOut.length === 0 ? "None: every skill became a node type." : imported.leftOut.map((l) => `- \`${l.skill}\`: ${l.reason}`).join("\n"),
      secrets:
        imported.secrets.length === 0
          ? "None."
          : imported.secrets.map((s) => `- \`FABRIC_SECRET_${s}\`, bound to the agent's host with \`FABRIC_EXECUTOR_SECRET_HOSTS_${s}\``).join("\n"),
      tryIt: `npx fabric run ${tryIt.nodeTypeId} --input '${JSON.stringify(tryIt.inputs).replace(/'/g, "'\\''")}'`,
    }),
    { path: "node-types/index.json", content: json({ node_types: nodeTypes.map((t) => ({ node_type_id: t.node_type_id, version: t.version, file: fileOf(t) })) }) },
    ...nodeTypes.map((t) => ({ path: `node-types/${fileOf(t)}`, content: json(t) })),
    { path: "src/index.ts", content: indexSource(options.packageName, agentLabel) },
    { path: "test/exchanges.json", content: json({ agent: imported.agent, card: imported.card, exchanges }) },
  ];
  return {
    files,
    nodeTypeIds: nodeTypes.map((t) => t.node_type_id),
    tryIt,
    skipped: imported.leftOut.map((l) => `${l.skill}: ${l.reason}`),
    description: `NodeFabric node types for the skills of the A2A agent ${agentLabel}, one per skill`,
    dependencies: { "@nodefabric/handler-a2a": A2A_PACKAGE_VERSIONS.handlerA2a },
    devDependencies: { "@a2a-js/sdk": A2A_PACKAGE_VERSIONS.a2aSdk, "@types/express": A2A_PACKAGE_VERSIONS.typesExpress, express: A2A_PACKAGE_VERSIONS.express },
    secrets: imported.secrets,
  };
}

function indexSource(packageName: string, agentLabel: string): string {
  return `/**
 * ${packageName}: the skills of the A2A agent ${agentLabel.replace(/\*\//g, "* /")} as NodeFabric node types, one per skill, kept as data in
 * node-types/. Generated by create-fabric-handler --from-a2a; every node type is called by a2aSkillHandler of
 * @nodefabric/handler-a2a, which checks the skill against the hash its node type pins before each call, and resumes
 * the agent's task after a crash instead of sending the message again.
 */
import { defineAtomicSet } from "@nodefabric/sdk";
import { a2aSkillHandler } from "@nodefabric/handler-a2a";

/** The node types, read from node-types/ when an executor first needs each one. */
export const skills = defineAtomicSet({ directory: new URL("../node-types/", import.meta.url), handler: a2aSkillHandler });

export default skills;
`;
}

/** Every file of a package made from an A2A agent, package.json and the shared files included. */
export async function renderA2aPackage(spec: {
  packageName: string;
  source: string;
  headers?: string[];
  include?: string[];
  exclude?: string[];
  sdkSpec?: string;
  schemasSpec?: string;
  onProgress?: (message: string) => void;
}): Promise<A2aPackage & { baseUrlSetting: string }> {
  const nodeTypePrefix = nodeTypePrefixOf(spec.packageName);
  const baseUrlSetting = baseUrlSettingOf(nodeTypePrefix);
  const made = await a2aPackage({ packageName: spec.packageName, nodeTypePrefix, source: spec.source, headers: spec.headers, include: spec.include, exclude: spec.exclude, onProgress: spec.onProgress });
  const manifest = packageManifest({ packageName: spec.packageName, description: made.description, sdkSpec: spec.sdkSpec ?? DEFAULT_SDK_SPEC, schemasSpec: spec.schemasSpec, shipsNodeTypes: true });
  const withDeps = {
    ...manifest,
    dependencies: made.dependencies,
    devDependencies: Object.fromEntries(Object.entries({ ...(manifest.devDependencies as Record<string, string>), ...made.devDependencies }).sort(([a], [b]) => a.localeCompare(b))),
  };
  const ordered: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(withDeps)) {
    if (k === "dependencies") continue;
    if (k === "peerDependencies") ordered.dependencies = withDeps.dependencies;
    ordered[k] = v;
  }
  const files = [{ path: "package.json", content: json(ordered) }, ...renderTemplateFolder("shared", { packageName: spec.packageName, nodeTypePrefix, baseUrlSetting }), ...made.files];
  return { ...made, files, baseUrlSetting };
}
