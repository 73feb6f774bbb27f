/**
 * The fabric's Agent Card (A2A 1.0): its interfaces (JSON-RPC and HTTP+JSON, at URLs made from the request's own
 * address), capabilities, security schemes, and a skill per node type the caller may run. gRPC is not served and not
 * declared. In search mode (a catalogue larger than `maxSkills`, search.ts) the card lists a few skills: `fabric.search`,
 * and the planner and agent when the caller may run them; otherwise a catalogue larger than `maxSkills` is listed in
 * part, with a note naming how to run any node type.
 */
import type { AgentCard, AgentSkill, SecurityScheme } from "@a2a-js/sdk";
import type { NodeType } from "@nodefabric/schemas";
import { SEARCH_SKILL, searchSkill } from "./search.js";

/** The skills a card in search mode lists besides the search, when the caller may run them. */
const ALWAYS = ["llm.planner", "llm.agent"];

export interface CardInput {
  /** The scheme and host the request came to (`https://fabric.example.com`). */
  base: string;
  path: string;
  version: string;
  skills: readonly NodeType[];
  maxSkills: number;
  /** Search mode: the card lists the search skill (and the planner and agent when among `skills`) instead. */
  search: boolean;
  auth: { on: boolean; oidcIssuer?: string };
  /** Whether this is the extended card of an authenticated caller. */
  extended: boolean;
  /** Declare the 0.3 JSON-RPC interface too (served through the SDK's compat layer). */
  legacy: boolean;
}

function exampleOf(t: NodeType): string[] {
  const schema = (t.input_schema ?? {}) as { examples?: unknown[]; properties?: Record<string, { type?: string; examples?: unknown[]; enum?: unknown[] }>; required?: string[] };
  const out: string[] = [];
  for (const ex of (Array.isArray(schema.examples) ? schema.examples : []).slice(0, 2)) out.push(`metadata.skillId "${t.node_type_id}" with the data part ${JSON.stringify(ex)}`);
  if (out.length > 0) return out;
  const sample: Record<string, unknown> = {};
  for (const k of schema.required ?? []) {
    const p = schema.properties?.[k] ?? {};
    sample[k] = p.examples?.[0] ?? p.enum?.[0] ?? (p.type === "string" ? "…" : p.type === "number" || p.type === "integer" ? 1 : p.type === "boolean" ? true : p.type === "array" ? [] : p.type === "object" ? {} : null);
  }
  return [`metadata.skillId "${t.node_type_id}" with the data part ${JSON.stringify(sample)}`];
}

export function skillOfNodeType(t: NodeType): AgentSkill {
  const ext = (t.extensions ?? {}) as Record<string, unknown>;
  const title = typeof ext["nodefabric.title"] === "string" ? (ext["nodefabric.title"] as string) : t.node_type_id;
  const gates = (t.constraints as { gates?: { side_effect_class?: string; require_approval?: boolean } } | undefined)?.gates;
  const tags = [t.kind, t.node_type_id.split(".")[0]!, ...(gates?.side_effect_class ? [gates.side_effect_class] : []), ...(gates?.require_approval ? ["requires-approval"] : [])];
  const input = JSON.stringify(t.input_schema ?? { type: "object" });
  const description =
    `${t.description ?? `Runs the node type ${t.node_type_id}@${t.version} as a NodeFabric run.`} ` +
    `Name it in message.metadata.skillId; its input is a data part valid under ${input.length <= 1500 ? `the JSON Schema ${input}` : "its input_schema (GET /v1/node-types on the fabric)"}.`;
  return {
    id: t.node_type_id,
    name: title,
    description,
    tags: [...new Set(tags.filter(Boolean))],
    examples: exampleOf(t),
    inputModes: ["application/json", "text/plain"],
    outputModes: ["application/json", "text/plain"],
    securityRequirements: [],
  };
}

export function agentCard(i: CardInput): AgentCard {
  const url = `${i.base}${i.path}`;
  const schemes: Record<string, SecurityScheme> = {};
  if (i.auth.on) {
    schemes.bearer = { scheme: { $case: "httpAuthSecurityScheme", value: { scheme: "Bearer", bearerFormat: "JWT", description: "A JWT the fabric accepts (fabric token, or one of its identity provider); runs:read to read tasks, runs:write to send messages." } } };
    if (i.auth.oidcIssuer) {
      schemes.oidc = { scheme: { $case: "openIdConnectSecurityScheme", value: { description: "The fabric's OpenID provider.", openIdConnectUrl: `${i.auth.oidcIssuer.replace(/\/+$/, "")}/.well-known/openid-configuration` } } };
    }
  }
  const shown = i.search ? [searchSkill(), ...i.skills.filter((t) => ALWAYS.includes(t.node_type_id)).map(skillOfNodeType)] : i.skills.slice(0, i.maxSkills).map(skillOfNodeType);
  const partial = !i.search && i.skills.length > shown.length;
  return {
    name: "NodeFabric",
    description:
      "A NodeFabric fabric: every node type is a skill and every task a durable run (cancelable, surviving restarts, waiting for approvals as INPUT_REQUIRED). " +
      "Name a skill in message.metadata.skillId and give its input as a data part." +
      (i.search ? ` The catalogue holds ${i.skills.length} skills: find them with the skill ${SEARCH_SKILL} (a text part, or a data part {"query": …}), then name any node type it finds the same way.` : "") +
      (partial ? ` This card lists ${shown.length} of ${i.skills.length} skills; any node type of the fabric's catalogue can be named the same way.` : "") +
      (i.auth.on && !i.extended ? " Authenticated callers get the extended card, with the skills they may run." : ""),
    supportedInterfaces: [
      { url, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
      { url: `${url}/rest`, protocolBinding: "HTTP+JSON", tenant: "", protocolVersion: "1.0" },
      ...(i.legacy ? [{ url, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "0.3" }] : []),
    ],
    provider: { organization: "NodeFabric", url: "https://github.com/nodefabric/nodefabric" },
    version: i.version,
    documentationUrl: "https://github.com/nodefabric/nodefabric/blob/main/docs/a2a.md",
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: i.auth.on },
    securitySchemes: schemes,
    securityRequirements: i.auth.on ? [{ schemes: { bearer: { list: [] } } }] : [],
    defaultInputModes: ["application/json", "text/plain"],
    defaultOutputModes: ["application/json", "text/plain"],
    skills: shown,
    signatures: [],
  };
}
