/**
 * The A2A importer: an Agent Card in (its URL), NodeTypes as data out, plus what was left out and why: the importers'
 * one shape (ImportResult of @nodefabric/sdk). `fabric node-types import --from-a2a` publishes its node types to a
 * registry, and `npm create fabric-handler -- --from-a2a` writes them into a package.
 *
 * Each skill on the card becomes one atomic node type run by `a2a.send@1.0.0`:
 * - `node_type_id` `<prefix>.<skill id>`, the version given (default 1.0.0), the skill's description;
 * - `input_schema` the skill's own schema where the card carries one (`inputSchema`, beyond the A2A spec), else an
 *   open object with an optional `text` (sent as one data part), or, for a skill that takes text only, an object
 *   whose `text` is required (sent as one text part);
 * - `output_schema` the skill's `outputSchema` where given, else what a2a.send makes of artifacts (`text`, `data`,
 *   `files`, and the fields of data parts);
 * - side-effect class `irreversible` (a card says nothing of what a skill changes), trust tier external;
 * - `nodefabric.a2a` naming the card, the skill and the hash of its definition (handlers/a2a/src/skill-definition.ts).
 */
import { A2A_EXTENSION, DEFAULT_DATA_INPUT_SCHEMA, DEFAULT_OUTPUT_SCHEMA, skillDefinitionHash, skillSchema, TEXT_INPUT_SCHEMA, type A2aSkill } from "@nodefabric/handler-a2a";
import { DefaultAgentCardResolver } from "@a2a-js/sdk/client";
import type { ImportResult } from "@nodefabric/sdk";
import type { NodeType } from "@nodefabric/schemas";
export type { A2aSkill } from "@nodefabric/handler-a2a";

/** The template definition that runs imported skills. */
export const A2A_SEND_TEMPLATE = { node_type_id: "a2a.send", version: "1.0.0" } as const;

/** Most skills one import reads: past it the rest are left out, named. */
export const MAX_SKILLS = 10_000;

/** Where an agent publishes its card (A2A 1.0). */
export const WELL_KNOWN_CARD_PATH = "/.well-known/agent-card.json";

/** A bad source or option: the user can fix it (exit code 2 in the CLI). */
export class A2aImportError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "A2aImportError";
  }
}

/** A header to send: a literal value, or `prefix` followed by the executor secret `secret`. */
export interface ImportHeader {
  name: string;
  value?: string;
  secret?: string;
  prefix?: string;
}

/** Options of `importA2aAgent`. */
export interface A2aImportOptions {
  /** node_type_id prefix (default: from the agent's name). */
  prefix?: string;
  /** Version of every node type (default 1.0.0). */
  version?: string;
  /** Only skills with these ids. */
  include?: string[];
  /** Leave out skills with these ids. */
  exclude?: string[];
  headers?: ImportHeader[];
  /** How a secret's value is read at import time (default: FABRIC_SECRET_<NAME>, then <NAME>, from the environment). */
  secretValue?: (name: string) => string | undefined;
  /** How long the agent may take to answer (default 30 s). */
  timeoutMs?: number;
  /** The fetch to read the card with (default: the global one). */
  fetch?: typeof globalThis.fetch;
  onProgress?: (message: string) => void;
}

/** A skill that did not become a node type, and why. */
export interface LeftOutSkill {
  skill: string;
  reason: string;
}

/** What an import gives: NodeTypes as data, what was left out (the importers' one shape), and the agent's own. */
export interface A2aImport extends ImportResult<LeftOutSkill> {
  agent: { name: string; version: string; card_url: string; protocol_version?: string; streaming: boolean };
  nodeTypes: NodeType[];
  leftOut: LeftOutSkill[];
  notes: string[];
  /** The card as the agent served it (for a package's recorded exchanges). */
  card: Record<string, unknown>;
  /** Names of executor secrets the node types send. */
  secrets: string[];
}

/**
 * The card URL `text` names: an http(s) URL; one with no path (`https://agent.example.com`) means the agent's
 * well-known card.
 */
export function parseCardUrl(text: string): string {
  const trimmed = text.trim();
  if (trimmed === "") throw new A2aImportError("--from-a2a needs the URL of an agent's card (or of the agent, whose /.well-known/agent-card.json is read)");
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    throw new A2aImportError(`--from-a2a ${JSON.stringify(text)} is not a valid URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new A2aImportError(`--from-a2a must be an http(s) URL, not a ${url.protocol} URL`);
  if (url.username || url.password) throw new A2aImportError("--from-a2a URL must not carry credentials; pass them with --header");
  url.hash = "";
  if (url.pathname === "/" || url.pathname === "") url.pathname = WELL_KNOWN_CARD_PATH;
  return url.href;
}

/**
 * A `--header` argument: `Name: value`, or `Name: <prefix>{secret:NAME}` for a credential held as an executor
 * secret (its value is read from the environment at import time, and node types name only the secret).
 */
export function parseHeader(text: string): ImportHeader {
  const i = text.indexOf(":");
  if (i <= 0) throw new A2aImportError(`--header ${JSON.stringify(text)} must be "Name: value"`);
  const name = text.slice(0, i).trim();
  const value = text.slice(i + 1).trim();
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new A2aImportError(`--header ${JSON.stringify(name)} is not a valid header name`);
  const m = /^(.*?)\{secret:([A-Za-z_][A-Za-z0-9_]*(?:\{tenant\}[A-Za-z0-9_]*)?)\}$/.exec(value);
  if (m) return { name, prefix: m[1], secret: m[2] };
  if (/\{secret:/.test(value)) throw new A2aImportError(`--header ${name}: {secret:NAME} must end the value, as in "Authorization: Bearer {secret:AGENT_TOKEN}"`);
  if (name.toLowerCase() === "authorization") {
    throw new A2aImportError('--header Authorization would publish a credential into the registry: write it as "Authorization: Bearer {secret:NAME}" and give the executor FABRIC_SECRET_NAME');
  }
  return { name, value };
}

/** A node type id prefix from an agent's name (`Travel Planner` → `travel-planner`). */
export function prefixFromName(name: string): string {
  const slug = name
    .toLowerCase()
    .replace(/[^a-z0-9.]+/g, "-")
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, "")
    .slice(0, 40)
    .replace(/[^a-z0-9]+$/, "");
  return slug === "" ? "agent" : slug;
}

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

function secretValueFromEnv(name: string): string | undefined {
  return process.env[`FABRIC_SECRET_${name}`] ?? process.env[name];
}

function describe(err: unknown): string {
  const e = err as { message?: string; cause?: { message?: string; code?: string } };
  const cause = e.cause?.code ?? e.cause?.message;
  return `${e.message ?? String(err)}${cause && !String(e.message).includes(String(cause)) ? ` (${cause})` : ""}`;
}

const isJsonMode = (m: string) => /json|^\*\/\*$|^application\/\*$/i.test(m);
const isTextMode = (m: string) => /^text\//i.test(m);

/** The node type of one skill, or the reason it cannot be one. */
export function nodeTypeOfSkill(
  skill: A2aSkill,
  card: { cardUrl: string; defaultInputModes: string[] },
  options: { prefix: string; version: string; headers?: ImportHeader[] },
): { nodeType: Record<string, unknown> } | { reason: string } {
  if (typeof skill?.id !== "string" || skill.id === "") return { reason: "has no id" };
  const id = `${options.prefix}.${skill.id}`;
  if (!ID_PATTERN.test(id)) return { reason: `${JSON.stringify(id)} is not a valid node_type_id (letters, digits, and . _ : - only, at most 128)` };
  const modes = (Array.isArray(skill.inputModes) && skill.inputModes.length > 0 ? skill.inputModes : card.defaultInputModes).filter((m): m is string => typeof m === "string");
  let input: "data" | "text" = "data";
  if (modes.length > 0 && !modes.some(isJsonMode)) {
    if (!modes.some(isTextMode)) return { reason: `it takes only ${modes.join(", ")}, which a node type's JSON input cannot carry` };
    input = "text";
  }
  const givenInput = skillSchema(skill, "input");
  const givenOutput = skillSchema(skill, "output");
  const inputSchema = input === "text" ? TEXT_INPUT_SCHEMA : (givenInput ?? DEFAULT_DATA_INPUT_SCHEMA);
  const a2a: Record<string, unknown> = { card_url: card.cardUrl, skill: skill.id, skill_hash: skillDefinitionHash(skill), ...(input === "text" ? { input } : {}) };
  const plain = (options.headers ?? []).filter((h) => !h.secret);
  const secret = (options.headers ?? []).filter((h) => h.secret);
  if (plain.length > 0) a2a.headers = Object.fromEntries(plain.map((h) => [h.name.toLowerCase(), h.value ?? ""]));
  if (secret.length > 0) a2a.secret_headers = Object.fromEntries(secret.map((h) => [h.name.toLowerCase(), { secret: h.secret, ...(h.prefix ? { prefix: h.prefix } : {}) }]));
  const described = [skill.description, skill.name].find((d) => typeof d === "string" && d.trim() !== "");
  return {
    nodeType: {
      node_type_id: id,
      version: options.version,
      kind: "atomic",
      description: described ?? `The A2A skill ${skill.id}`,
      input_schema: inputSchema,
      output_schema: givenOutput ?? DEFAULT_OUTPUT_SCHEMA,
      constraints: { gates: { side_effect_class: "irreversible" } },
      extensions: {
        "nodefabric.implementation": { ...A2A_SEND_TEMPLATE },
        [A2A_EXTENSION]: a2a,
        "nodefabric.trust_tier": "external",
        "nodefabric.a2a_skill": {
          id: skill.id,
          ...(typeof skill.name === "string" && skill.name ? { name: skill.name } : {}),
          ...(Array.isArray(skill.tags) && skill.tags.length ? { tags: skill.tags } : {}),
          ...(Array.isArray(skill.examples) && skill.examples.length ? { examples: skill.examples } : {}),
          ...(modes.length ? { input_modes: modes } : {}),
        },
      },
    },
  };
}

/** Reads the agent's card and makes a node type of each skill. */
export async function importA2aAgent(cardUrlText: string, options: A2aImportOptions = {}): Promise<A2aImport> {
  const progress = options.onProgress ?? (() => undefined);
  const cardUrl = parseCardUrl(cardUrlText);
  const headers: Record<string, string> = { accept: "application/json" };
  for (const h of options.headers ?? []) {
    if (h.secret) {
      // A per-tenant secret cannot be read at import time: the card is then read without it.
      if (h.secret.includes("{tenant}")) continue;
      const value = (options.secretValue ?? secretValueFromEnv)(h.secret);
      if (value === undefined) throw new A2aImportError(`--header ${h.name} names the secret ${h.secret}: set FABRIC_SECRET_${h.secret} (or ${h.secret}) to import`);
      headers[h.name] = (h.prefix ?? "") + value;
    } else if (h.value !== undefined) headers[h.name] = h.value;
  }
  progress(`reading the Agent Card at ${cardUrl}`);
  let raw: unknown;
  try {
    const res = await (options.fetch ?? globalThis.fetch)(cardUrl, { headers, signal: AbortSignal.timeout(options.timeoutMs ?? 30_000) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    raw = await res.json();
  } catch (err) {
    throw new Error(`could not read the Agent Card at ${cardUrl}: ${describe(err)}`, { cause: err });
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new Error(`${cardUrl} is not an A2A Agent Card (not a JSON object)`);
  const json = raw as Record<string, unknown>;
  // The SDK reads it as a client will (1.0, or 0.3 through its compatibility layer): a card it cannot use is no card.
  let card;
  try {
    card = new DefaultAgentCardResolver({ legacyCompat: { enabled: true } }).normalizeAgentCard(json);
  } catch (err) {
    throw new Error(`${cardUrl} is not an A2A Agent Card: ${describe(err)}`, { cause: err });
  }
  const notes: string[] = [];
  const leftOut: LeftOutSkill[] = [];
  const skills = (Array.isArray(json.skills) ? json.skills : []) as A2aSkill[];
  if (skills.length > MAX_SKILLS) {
    for (const s of skills.slice(MAX_SKILLS)) leftOut.push({ skill: String(s?.id ?? "?"), reason: `past the first ${MAX_SKILLS} skills` });
    notes.push(`the card lists more than ${MAX_SKILLS} skills; only the first ${MAX_SKILLS} were read`);
  }
  const name = typeof json.name === "string" && json.name ? json.name : "agent";
  const protocolVersion = card.supportedInterfaces?.find((i) => i.protocolVersion)?.protocolVersion ?? (typeof json.protocolVersion === "string" ? json.protocolVersion : undefined);
  const agent = { name, version: typeof json.version === "string" ? json.version : "", card_url: cardUrl, ...(protocolVersion ? { protocol_version: protocolVersion } : {}), streaming: card.capabilities?.streaming === true };
  progress(`${agent.name} ${agent.version} lists ${skills.length} skill${skills.length === 1 ? "" : "s"}${protocolVersion ? ` (A2A ${protocolVersion})` : ""}`);
  const prefix = options.prefix ?? prefixFromName(name);
  if (!ID_PATTERN.test(`${prefix}.x`)) throw new A2aImportError(`--prefix ${JSON.stringify(prefix)} cannot start a node_type_id (letters, digits, and . _ : - only)`);
  const version = options.version ?? "1.0.0";
  const include = options.include?.length ? new Set(options.include) : undefined;
  const exclude = new Set(options.exclude ?? []);
  const defaultInputModes = Array.isArray(json.defaultInputModes) ? (json.defaultInputModes as string[]) : [];
  const nodeTypes: NodeType[] = [];
  const ids = new Set<string>();
  for (const skill of skills.slice(0, MAX_SKILLS)) {
    const sid = typeof skill?.id === "string" ? skill.id : "?";
    if (include && !include.has(sid)) continue;
    if (exclude.has(sid)) continue;
    const made = nodeTypeOfSkill(skill, { cardUrl, defaultInputModes }, { prefix, version, headers: options.headers });
    if ("reason" in made) {
      leftOut.push({ skill: sid, reason: made.reason });
      continue;
    }
    const id = made.nodeType.node_type_id as string;
    if (ids.has(id)) {
      leftOut.push({ skill: sid, reason: `the card lists a skill with the id ${sid} twice; the first is kept` });
      continue;
    }
    ids.add(id);
    nodeTypes.push(made.nodeType as unknown as NodeType);
  }
  for (const sid of include ?? []) if (!skills.some((s) => s?.id === sid)) notes.push(`--include ${sid}: the card has no such skill`);
  const schemes = Object.keys((json.securitySchemes as Record<string, unknown> | undefined) ?? {});
  if (schemes.length > 0 && !(options.headers ?? []).some((h) => h.secret)) {
    notes.push(`the card names security schemes (${schemes.join(", ")}); if the agent needs credentials, import again with --header "Authorization: Bearer {secret:NAME}"`);
  }
  const secrets = [...new Set((options.headers ?? []).flatMap((h) => (h.secret ? [h.secret] : [])))];
  return { agent, nodeTypes, leftOut, notes, card: json, secrets };
}
