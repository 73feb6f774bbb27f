/**
 * What a node type pins of an A2A agent's skill: a hash of the parts of the skill, as the agent's card lists it, that
 * decide what a call does (id, name, description, tags, examples, input and output modes, security requirements, and
 * the input or output schema an agent may add to a skill beyond the spec). The importer stores it; `a2a.send` reads
 * the card before every call and compares, so a skill that changed fails with `skill_definition_changed` instead of
 * running something nobody reviewed.
 */
import { createHash } from "node:crypto";

/** A skill as an Agent Card's JSON lists it (A2A 1.0; 0.3 has the same fields). */
export interface A2aSkill {
  id: string;
  name?: string;
  description?: string;
  tags?: string[];
  examples?: string[];
  inputModes?: string[];
  outputModes?: string[];
  securityRequirements?: unknown[];
  /** Not in the A2A spec: a JSON Schema of the data part a skill takes, where an agent gives one. */
  inputSchema?: Record<string, unknown>;
  /** Not in the A2A spec: a JSON Schema of the data its artifacts hold, where an agent gives one. */
  outputSchema?: Record<string, unknown>;
  [key: string]: unknown;
}

/** JSON with object keys sorted, so equal definitions hash equally whatever order the agent wrote them in. */
function canonical(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
}

const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const text = (v: unknown): string => (typeof v === "string" ? v : "");
const schemaOf = (v: unknown): Record<string, unknown> | undefined => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);

/** The input or output schema a skill carries beyond the spec (`inputSchema` or `input_schema`), if any. */
export function skillSchema(skill: A2aSkill, which: "input" | "output"): Record<string, unknown> | undefined {
  return schemaOf(skill[`${which}Schema`]) ?? schemaOf(skill[`${which}_schema`]);
}

/** `sha256:<hex>` of the parts of `skill` that decide what a call does; an absent list and an empty one are equal. */
export function skillDefinitionHash(skill: A2aSkill): string {
  const pinned = {
    id: text(skill.id),
    name: text(skill.name),
    description: text(skill.description),
    tags: list(skill.tags),
    examples: list(skill.examples),
    inputModes: list(skill.inputModes),
    outputModes: list(skill.outputModes),
    securityRequirements: list(skill.securityRequirements),
    inputSchema: skillSchema(skill, "input"),
    outputSchema: skillSchema(skill, "output"),
  };
  return `sha256:${createHash("sha256").update(canonical(pinned)).digest("hex")}`;
}
