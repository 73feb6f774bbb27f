/**
 * What the start form makes of a node type's `input_schema`: which input a (sub)schema gets, and the value a new form
 * starts from. Anything it cannot map to an input with confidence is edited as JSON instead, so no schema is refused.
 */

export type JsonSchema = Record<string, unknown>;

export type FieldKind = "object" | "array" | "string" | "number" | "integer" | "boolean" | "enum" | "json";

/** Keywords that combine or condition schemas: a form of single inputs cannot honour them, so such a field is JSON. */
const COMBINATORS = ["oneOf", "anyOf", "allOf", "not", "if", "then", "else", "prefixItems", "dependentSchemas", "patternProperties"];

const MAX_REF_HOPS = 16;

/** Follows local references (`#/$defs/x`, `#/definitions/x`); a remote or broken one leaves the schema as it is. */
export function resolve(schema: unknown, root: JsonSchema): JsonSchema {
  let s = asSchema(schema);
  for (let hop = 0; hop < MAX_REF_HOPS && typeof s.$ref === "string" && s.$ref.startsWith("#"); hop++) {
    const target = pointerGet(root, s.$ref.slice(1));
    if (target === undefined || typeof target !== "object" || target === null) break;
    // Siblings of $ref (a description, a default) apply too, and win over the target's.
    const { $ref: _ref, ...siblings } = s;
    s = { ...(target as JsonSchema), ...siblings };
  }
  return s;
}

function asSchema(schema: unknown): JsonSchema {
  if (schema === true || schema === undefined) return {};
  if (typeof schema === "object" && schema !== null && !Array.isArray(schema)) return schema as JsonSchema;
  return { not: {} };
}

/** The one type a schema names, leaving out "null" (a nullable field is edited as its other type). */
function singleType(s: JsonSchema): string | undefined {
  if (typeof s.type === "string") return s.type;
  if (Array.isArray(s.type)) {
    const types = s.type.filter((t) => t !== "null");
    if (types.length === 1 && typeof types[0] === "string") return types[0];
  }
  return undefined;
}

export function kindOf(s: JsonSchema): FieldKind {
  if (COMBINATORS.some((k) => s[k] !== undefined) || typeof s.$ref === "string") return "json";
  if (Array.isArray(s.enum) && s.enum.length > 0) return "enum";
  const type = singleType(s) ?? (s.properties !== undefined ? "object" : s.items !== undefined ? "array" : undefined);
  switch (type) {
    case "object":
      // Only named properties become fields; a free-form map is easier to type as JSON.
      return s.properties !== undefined && typeof s.properties === "object" ? "object" : "json";
    case "array":
      return s.items !== undefined && typeof s.items === "object" ? "array" : "json";
    case "string":
    case "number":
    case "integer":
    case "boolean":
      return type;
    default:
      return "json";
  }
}

/** The HTML input type of a string field, from its `format`. */
export function stringInputType(s: JsonSchema): string {
  switch (s.format) {
    case "date-time":
      return "datetime-local";
    case "date":
      return "date";
    case "email":
      return "email";
    case "uri":
    case "url":
      return "url";
    default:
      return "text";
  }
}

/** The value a new form starts from: `default`s where the schema gives them, required objects built out. */
export function initialValue(schema: unknown, root: JsonSchema, depth = 0): unknown {
  const s = resolve(schema, root);
  if (s.default !== undefined) return structuredClone(s.default);
  if (depth > 8) return undefined;
  const kind = kindOf(s);
  if (kind === "object") {
    const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
    const out: Record<string, unknown> = {};
    for (const [name, sub] of Object.entries(s.properties as Record<string, unknown>)) {
      const subSchema = resolve(sub, root);
      const value = initialValue(subSchema, root, depth + 1);
      if (value !== undefined) out[name] = value;
      else if (required.has(name)) {
        const k = kindOf(subSchema);
        if (k === "array") out[name] = [];
        else if (k === "object") out[name] = {};
        else if (k === "boolean") out[name] = false;
      }
    }
    return Object.keys(out).length > 0 || depth === 0 ? out : undefined;
  }
  return undefined;
}

/** RFC 6901: one segment of a JSON Pointer. */
export function pointerSegment(key: string | number): string {
  return String(key).replace(/~/g, "~0").replace(/\//g, "~1");
}

function unescapeSegment(raw: string): string {
  let decoded = raw;
  try {
    // A $ref is a URI fragment, so it may be percent-encoded.
    decoded = decodeURIComponent(raw);
  } catch {
    // Not percent-encoded after all: read it as written.
  }
  return decoded.replace(/~1/g, "/").replace(/~0/g, "~");
}

export function pointerGet(doc: unknown, pointer: string): unknown {
  if (pointer === "") return doc;
  let cur: unknown = doc;
  for (const raw of pointer.split("/").slice(1)) {
    const key = unescapeSegment(raw);
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}

/** `value` with `key` set (undefined removes it from an object), copied, not changed in place. */
export function withChild(value: unknown, key: string | number, child: unknown): unknown {
  if (typeof key === "number") {
    const arr = Array.isArray(value) ? [...value] : [];
    arr[key] = child === undefined ? null : child;
    return arr;
  }
  const obj = value !== null && typeof value === "object" && !Array.isArray(value) ? { ...(value as Record<string, unknown>) } : {};
  if (child === undefined) delete obj[key];
  else obj[key] = child;
  return obj;
}
