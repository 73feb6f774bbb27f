/**
 * A deterministic example value for a JSON Schema: what generated tests send as inputs and what their mocked upstream
 * answers. The document's own `examples`, `default`, `const` and `enum` come first; the rest is made up to fit.
 */
import type { SchemaObject } from "./openapi-schema.js";

/** Below this depth every optional property is filled in; deeper, only required ones (keeps recursive shapes small). */
const FULL_OBJECT_DEPTH = 3;

const STRING_FORMATS: Readonly<Record<string, string>> = {
  "date-time": "2025-01-15T09:30:00Z",
  date: "2025-01-15",
  time: "09:30:00Z",
  duration: "P1D",
  email: "ada@example.com",
  "idn-email": "ada@example.com",
  hostname: "api.example.com",
  "idn-hostname": "api.example.com",
  ipv4: "192.0.2.10",
  ipv6: "2001:db8::10",
  uri: "https://example.com/resource",
  url: "https://example.com/resource",
  "uri-reference": "/resource",
  iri: "https://example.com/resource",
  "iri-reference": "/resource",
  "uri-template": "https://example.com/{id}",
  uuid: "3f2b9c1e-8d4a-4c6b-9e2f-1a7d5b0c4e68",
  byte: "ZXhhbXBsZQ==",
  "json-pointer": "/example",
  "relative-json-pointer": "0",
  regex: "^example$",
  password: "s3cret-example",
};

/** A value valid under `schema` (as far as a simple generator can tell: `pattern` and `not` are not solved). */
export function exampleOf(schema: unknown, depth = 0): unknown {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return "example";
  const s = schema as SchemaObject;
  if (s.const !== undefined) return structuredClone(s.const);
  const type = preferredType(s);
  // A whole object or array is built from its parts, which then follow the schema even where an example would not.
  if (type !== "object" && type !== "array") {
    if (Array.isArray(s.examples) && s.examples.length > 0) return structuredClone(s.examples[0]);
    if (s.default !== undefined) return structuredClone(s.default);
  }
  if (Array.isArray(s.enum) && s.enum.length > 0) return structuredClone(s.enum.find((v) => v !== null) ?? s.enum[0]);
  if (Array.isArray(s.allOf) && s.allOf.length > 0) return exampleOfAll(s, depth);
  for (const key of ["oneOf", "anyOf"] as const) {
    const list = s[key];
    if (Array.isArray(list) && list.length > 0) {
      const branch = list.find((sub) => !isNullSchema(sub)) ?? list[0];
      return exampleOf(mergeSiblings(s, key, branch), depth);
    }
  }
  switch (type) {
    case "object":
      return objectExample(s, depth);
    case "array":
      return arrayExample(s, depth);
    case "string":
      return stringExample(s);
    case "integer":
      return numberExample(s, true);
    case "number":
      return numberExample(s, false);
    case "boolean":
      return true;
    case "null":
      return null;
    default:
      return "example";
  }
}

function isNullSchema(value: unknown): boolean {
  return typeof value === "object" && value !== null && (value as SchemaObject).type === "null";
}

/** The type an example takes: the declared one (the first that is not null), else what the keywords suggest. */
function preferredType(s: SchemaObject): string | undefined {
  if (typeof s.type === "string") return s.type;
  if (Array.isArray(s.type)) return (s.type.find((t) => t !== "null") ?? s.type[0]) as string | undefined;
  if (s.properties !== undefined || s.additionalProperties !== undefined || s.required !== undefined) return "object";
  if (s.items !== undefined || s.prefixItems !== undefined) return "array";
  return undefined;
}

/** The branch of a oneOf/anyOf with the keywords written beside it (e.g. `type`, `properties`) kept. */
function mergeSiblings(s: SchemaObject, key: string, branch: unknown): SchemaObject {
  const { [key]: _omitted, ...siblings } = s;
  return { ...siblings, ...(typeof branch === "object" && branch !== null ? (branch as SchemaObject) : {}) };
}

function exampleOfAll(s: SchemaObject, depth: number): unknown {
  const { allOf, ...siblings } = s;
  const parts = [siblings, ...(allOf as unknown[])].filter((p) => typeof p === "object" && p !== null) as SchemaObject[];
  if (parts.some((p) => preferredType(p) === "object")) {
    // allOf of object schemas: one object with the properties and requirements of every part.
    const merged: SchemaObject = { type: "object", properties: {}, required: [] };
    for (const part of parts) {
      Object.assign(merged.properties as SchemaObject, part.properties ?? {});
      (merged.required as unknown[]).push(...((part.required as unknown[] | undefined) ?? []));
    }
    return objectExample(merged, depth);
  }
  return exampleOf(Object.assign({}, ...parts), depth);
}

function objectExample(s: SchemaObject, depth: number): Record<string, unknown> {
  const properties = (s.properties ?? {}) as Record<string, unknown>;
  const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
  const out: Record<string, unknown> = {};
  for (const [name, sub] of Object.entries(properties)) {
    if (depth < FULL_OBJECT_DEPTH || required.has(name)) out[name] = exampleOf(sub, depth + 1);
  }
  for (const name of required) if (!(name in out)) out[name] = "example";
  // A map with no named properties (`additionalProperties: {…}`): one entry shows its shape.
  if (Object.keys(properties).length === 0 && typeof s.additionalProperties === "object" && s.additionalProperties !== null) {
    out.example = exampleOf(s.additionalProperties, depth + 1);
  }
  return out;
}

function arrayExample(s: SchemaObject, depth: number): unknown[] {
  const prefix = Array.isArray(s.prefixItems) ? s.prefixItems.map((sub) => exampleOf(sub, depth + 1)) : [];
  const count = Math.max(typeof s.minItems === "number" ? s.minItems : 1, prefix.length, 1);
  const items = s.items === false ? [] : Array.from({ length: count - prefix.length }, (_, i) => distinct(exampleOf(s.items, depth + 1), i));
  const all = [...prefix, ...items];
  return typeof s.maxItems === "number" ? all.slice(0, Math.max(s.maxItems, 0)) : all;
}

/** The i-th of several items made from one schema, varied so that `uniqueItems` holds where it can. */
function distinct(value: unknown, i: number): unknown {
  if (i === 0) return value;
  if (typeof value === "number") return value + i;
  if (typeof value === "string") return `${value}${i + 1}`;
  return value;
}

function stringExample(s: SchemaObject): string {
  let value = (typeof s.format === "string" ? STRING_FORMATS[s.format] : undefined) ?? "example";
  const min = typeof s.minLength === "number" ? s.minLength : 0;
  const max = typeof s.maxLength === "number" ? s.maxLength : Infinity;
  if (value.length < min) value = value.padEnd(min, "x");
  if (value.length > max) value = value.slice(0, max);
  return value;
}

function numberExample(s: SchemaObject, integer: boolean): number {
  const low = typeof s.minimum === "number" ? s.minimum : typeof s.exclusiveMinimum === "number" ? s.exclusiveMinimum + (integer ? 1 : 0.5) : undefined;
  const high = typeof s.maximum === "number" ? s.maximum : typeof s.exclusiveMaximum === "number" ? s.exclusiveMaximum - (integer ? 1 : 0.5) : undefined;
  let value = low ?? (high !== undefined ? Math.min(1, high) : 1);
  if (integer) value = Math.ceil(value);
  if (typeof s.multipleOf === "number" && s.multipleOf > 0) value = Math.ceil(value / s.multipleOf) * s.multipleOf;
  if (high !== undefined && value > high) value = integer ? Math.floor(high) : high;
  return value;
}
