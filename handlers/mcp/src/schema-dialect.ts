/**
 * Node types' schemas are JSON Schema draft 2020-12 (the registry and executors compile that dialect only). MCP
 * tools' schemas are 2020-12 by default, but many servers (zod-based ones among them) write draft-07, and MCP allows
 * it. A draft-07 schema is rewritten into the same constraints in 2020-12: `$schema` goes, tuple `items` becomes
 * `prefixItems` (and `additionalItems` becomes `items`), `dependencies` becomes `dependentRequired` or
 * `dependentSchemas`. `definitions` stay where they are, so every `$ref` into them still resolves. Nothing else is
 * touched.
 */

type JsonObject = Record<string, unknown>;

function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** True when `schema` says it is draft-04 to draft-07. */
export function isDraft07(schema: unknown): boolean {
  return isObject(schema) && typeof schema.$schema === "string" && /json-schema\.org\/draft-0[4-7]\/schema/.test(schema.$schema);
}

const ONE = ["additionalProperties", "contains", "propertyNames", "not", "if", "then", "else"];
const MAPS = ["properties", "patternProperties", "definitions", "$defs"];
const LISTS = ["allOf", "anyOf", "oneOf"];

function rewrite(node: unknown): unknown {
  if (!isObject(node)) return node;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === "$schema") continue;
    if (key === "items") {
      if (Array.isArray(value)) {
        out.prefixItems = value.map(rewrite);
        if (node.additionalItems !== undefined) out.items = rewrite(node.additionalItems);
      } else out.items = rewrite(value);
    } else if (key === "additionalItems") {
      // handled with items (ignored without a tuple items, as draft-07 does)
    } else if (key === "dependencies" && isObject(value)) {
      for (const [prop, dep] of Object.entries(value)) {
        if (Array.isArray(dep)) out.dependentRequired = { ...(out.dependentRequired as JsonObject | undefined), [prop]: dep };
        else out.dependentSchemas = { ...(out.dependentSchemas as JsonObject | undefined), [prop]: rewrite(dep) };
      }
    } else if (ONE.includes(key)) out[key] = rewrite(value);
    else if (MAPS.includes(key) && isObject(value)) out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, rewrite(v)]));
    else if (LISTS.includes(key) && Array.isArray(value)) out[key] = value.map(rewrite);
    else out[key] = value;
  }
  return out;
}

/** `schema` in draft 2020-12: as given when it is not draft-07, else rewritten (see above). */
export function toDraft2020(schema: JsonObject): JsonObject {
  return isDraft07(schema) ? (rewrite(schema) as JsonObject) : schema;
}
