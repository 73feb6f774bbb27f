/**
 * `extensions["nodefabric.a2a"]` of a node type run by `a2a.send`: which agent (the URL of its Agent Card), which
 * skill, the hash of the skill it was made from, how the input is sent, and the credentials to send. Checked once per
 * NodeType, so a bad configuration fails every execution with the same clear, non-retryable error naming the field.
 */
import { HandlerError, type NodeTypeRef } from "@nodefabric/sdk";
import { fail } from "./failure-codes.js";

/** The extension that configures `a2a.send` and the node types it implements. */
export const A2A_EXTENSION = "nodefabric.a2a";

/** What stands for the run's tenant in a secret's name: `AGENT_TOKEN_{tenant}` is AGENT_TOKEN_acme for tenant acme. */
export const TENANT_PLACEHOLDER = "{tenant}";

/** A secret sent as a header: the executor's secret `secret`, after `prefix`. */
export interface SecretHeader {
  readonly header: string;
  readonly secret: string;
  readonly prefix: string;
}

/** `nodefabric.a2a`, checked. */
export interface A2aConfig {
  /** The Agent Card's URL, such as https://agent.example.com/.well-known/agent-card.json. */
  readonly cardUrl: string;
  /** The skill's id on the card; sent as the message's `metadata.skillId`. */
  readonly skill: string;
  /** `sha256:<hex>` of the skill the node type was made from (skill-definition.ts); absent: not pinned. */
  readonly skillHash?: string;
  /** `data`: the input is one data part; `text`: the input's `text` is one text part (for skills that take text only). */
  readonly input: "data" | "text";
  /** `auto`: stream when the card says it can; `off`: always poll GetTask. */
  readonly streaming: "auto" | "off";
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly secretHeaders: readonly SecretHeader[];
}

const KNOWN_KEYS = new Set(["card_url", "skill", "skill_hash", "input", "streaming", "headers", "secret_headers"]);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Headers the transport owns, or that would carry someone else's credentials. */
const RESERVED_HEADERS = new Set(["host", "content-length", "transfer-encoding", "connection", "content-type", "a2a-version", "a2a-extensions", "proxy-authorization"]);

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The non-retryable error of a bad `nodefabric.a2a`, naming the field. */
export function invalidConfiguration(nodeType: NodeTypeRef, field: string, message: string, details: Record<string, unknown> = {}): HandlerError {
  const path = field ? `${A2A_EXTENSION}.${field}` : A2A_EXTENSION;
  return fail("invalid_configuration", `${nodeType.node_type_id}@${nodeType.version}: ${path} ${message}`, { retryable: false, details: { field: path, ...details } });
}

function secretRef(nodeType: NodeTypeRef, field: string, v: unknown): string {
  if (typeof v !== "string" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(v.replaceAll(TENANT_PLACEHOLDER, "T"))) {
    throw invalidConfiguration(nodeType, field, `must name an executor secret (letters, digits and _; ${TENANT_PLACEHOLDER} stands for the run's tenant)`);
  }
  return v;
}

/** Checks `nodefabric.a2a` of `nodeType`. */
export function compileA2aConfig(nodeType: NodeTypeRef, raw: unknown): A2aConfig {
  if (raw === undefined) throw invalidConfiguration(nodeType, "", "is missing: a node type run by a2a.send names its agent (card_url) and skill");
  if (!isPlainObject(raw)) throw invalidConfiguration(nodeType, "", "must be an object");
  const unknown = Object.keys(raw).filter((k) => !KNOWN_KEYS.has(k));
  if (unknown.length > 0) throw invalidConfiguration(nodeType, unknown[0]!, `is not an option of ${A2A_EXTENSION} (known: ${[...KNOWN_KEYS].join(", ")})`, { unknown });

  let parsed: URL | undefined;
  try {
    parsed = typeof raw.card_url === "string" ? new URL(raw.card_url) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) {
    throw invalidConfiguration(nodeType, "card_url", "must be the absolute http or https URL of the agent's card, such as https://agent.example.com/.well-known/agent-card.json");
  }
  if (parsed.username || parsed.password) throw invalidConfiguration(nodeType, "card_url", "must not carry credentials; use secret_headers");
  parsed.hash = "";

  if (typeof raw.skill !== "string" || raw.skill === "") throw invalidConfiguration(nodeType, "skill", "must be the id of the agent's skill to call");
  let skillHash: string | undefined;
  if (raw.skill_hash !== undefined) {
    if (typeof raw.skill_hash !== "string" || !/^sha256:[0-9a-f]{64}$/.test(raw.skill_hash)) throw invalidConfiguration(nodeType, "skill_hash", 'must be "sha256:<64 hex digits>"');
    skillHash = raw.skill_hash;
  }
  const input = raw.input ?? "data";
  if (input !== "data" && input !== "text") throw invalidConfiguration(nodeType, "input", 'must be "data" (the input as one data part) or "text" (its text property as one text part)');
  const streaming = raw.streaming ?? "auto";
  if (streaming !== "auto" && streaming !== "off") throw invalidConfiguration(nodeType, "streaming", 'must be "auto" (stream when the card says so) or "off" (poll GetTask)');

  const headers: Array<readonly [string, string]> = [];
  if (raw.headers !== undefined) {
    if (!isPlainObject(raw.headers)) throw invalidConfiguration(nodeType, "headers", "must be an object of header → string");
    for (const [name, value] of Object.entries(raw.headers)) {
      if (!HEADER_NAME.test(name) || RESERVED_HEADERS.has(name.toLowerCase())) throw invalidConfiguration(nodeType, `headers.${name}`, "is not a header a node type may set");
      if (name.toLowerCase() === "authorization") throw invalidConfiguration(nodeType, `headers.${name}`, "would put a credential in the registry; name an executor secret with secret_headers");
      if (typeof value !== "string" || /[\r\n\0]/.test(value)) throw invalidConfiguration(nodeType, `headers.${name}`, "must be a string without line breaks");
      headers.push([name.toLowerCase(), value]);
    }
  }
  const secretHeaders: SecretHeader[] = [];
  if (raw.secret_headers !== undefined) {
    if (!isPlainObject(raw.secret_headers)) throw invalidConfiguration(nodeType, "secret_headers", 'must be an object of header → { "secret": NAME, "prefix"?: TEXT }');
    for (const [name, ref] of Object.entries(raw.secret_headers)) {
      const field = `secret_headers.${name}`;
      if (!HEADER_NAME.test(name) || RESERVED_HEADERS.has(name.toLowerCase())) throw invalidConfiguration(nodeType, field, "is not a header a node type may set");
      if (!isPlainObject(ref)) throw invalidConfiguration(nodeType, field, 'must be { "secret": NAME, "prefix"?: TEXT }');
      const prefix = ref.prefix ?? "";
      if (typeof prefix !== "string" || /[\r\n\0]/.test(prefix)) throw invalidConfiguration(nodeType, `${field}.prefix`, "must be a string without line breaks");
      secretHeaders.push({ header: name.toLowerCase(), secret: secretRef(nodeType, `${field}.secret`, ref.secret), prefix });
    }
  }
  return { cardUrl: parsed.href, skill: raw.skill, skillHash, input, streaming, headers, secretHeaders };
}
