/**
 * OpenAPI Schema Objects turned into the JSON Schema (2020-12) node types carry, for one direction of an operation.
 */

/** A JSON Schema or OpenAPI Schema Object, as plain data. */
export type SchemaObject = Record<string, unknown>;

/** Which side of the operation a schema describes: `readOnly` properties exist only in answers, `writeOnly` ones only in requests. */
export type SchemaDirection = "request" | "response";

/** OpenAPI-only keywords with no meaning for validation; dropped so node types stay plain JSON Schema. */
const DROPPED_KEYWORDS = new Set(["discriminator", "xml", "externalDocs", "nullable", "example", "$schema", "$id"]);

/** Keywords whose value is one subschema. */
const SUBSCHEMA_KEYWORDS = ["additionalProperties", "items", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems"];

/** Keywords whose value is an array of subschemas. */
const SUBSCHEMA_LIST_KEYWORDS = ["allOf", "anyOf", "oneOf", "prefixItems"];

/** Keywords whose value maps names to subschemas. */
const SUBSCHEMA_MAP_KEYWORDS = ["properties", "patternProperties", "dependentSchemas", "$defs", "definitions"];

/**
 * The JSON Schema 2020-12 equivalent of an OpenAPI 3.0 or 3.1 schema, as seen in one direction:
 * - 3.0 `nullable: true` adds `"null"` to `type` (and `null` to `enum`);
 * - 3.0 boolean `exclusiveMinimum`/`exclusiveMaximum` become the numeric 2020-12 keywords;
 * - `example` becomes `examples: [example]`; `discriminator`, `xml`, `externalDocs` are dropped;
 * - properties marked `readOnly` are left out of requests, `writeOnly` ones out of responses;
 * - a schema that contains itself (a recursive `$ref`, already dereferenced) accepts anything where it recurs,
 *   since a node type's schema must be plain, finite JSON.
 */
export function toJsonSchema(schema: unknown, direction: SchemaDirection, openapiVersion: string): SchemaObject {
  return convert(schema, direction, openapiVersion.startsWith("3.0"), new Set());
}

function isSchemaObject(value: unknown): value is SchemaObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function convert(schema: unknown, direction: SchemaDirection, isOpenApi30: boolean, ancestors: Set<object>): SchemaObject {
  if (schema === true || !isSchemaObject(schema)) return {};
  if (ancestors.has(schema)) return {};
  ancestors.add(schema);
  try {
    const out: SchemaObject = {};
    for (const [key, value] of Object.entries(schema)) {
      if (DROPPED_KEYWORDS.has(key)) continue;
      if (SUBSCHEMA_MAP_KEYWORDS.includes(key) && isSchemaObject(value)) {
        out[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, convertSub(sub, direction, isOpenApi30, ancestors)]));
      } else if (SUBSCHEMA_LIST_KEYWORDS.includes(key) && Array.isArray(value)) {
        out[key] = value.map((sub) => convertSub(sub, direction, isOpenApi30, ancestors));
      } else if (SUBSCHEMA_KEYWORDS.includes(key) && (isSchemaObject(value) || typeof value === "boolean")) {
        out[key] = convertSub(value, direction, isOpenApi30, ancestors);
      } else if (key === "items" && Array.isArray(value)) {
        // Draft-4-style tuple `items` is `prefixItems` in 2020-12.
        out.prefixItems = value.map((sub) => convertSub(sub, direction, isOpenApi30, ancestors));
      } else {
        out[key] = structuredClone(value);
      }
    }
    if (schema.example !== undefined && out.examples === undefined) out.examples = [structuredClone(schema.example)];
    dropPropertiesForDirection(out, schema, direction);
    return isOpenApi30 ? applyOpenApi30Keywords(schema, out) : out;
  } finally {
    ancestors.delete(schema);
  }
}

function convertSub(value: unknown, direction: SchemaDirection, isOpenApi30: boolean, ancestors: Set<object>): unknown {
  return typeof value === "boolean" ? value : convert(value, direction, isOpenApi30, ancestors);
}

function applyOpenApi30Keywords(source: SchemaObject, out: SchemaObject): SchemaObject {
  for (const [flag, bound] of [
    ["exclusiveMinimum", "minimum"],
    ["exclusiveMaximum", "maximum"],
  ] as const) {
    if (typeof source[flag] !== "boolean") continue;
    if (source[flag] === true && typeof source[bound] === "number") {
      out[flag] = source[bound];
      delete out[bound];
    } else {
      delete out[flag];
    }
  }
  if (source.nullable !== true) return out;
  if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
  if (typeof out.type === "string") out.type = [out.type, "null"];
  else if (Array.isArray(out.type)) out.type = out.type.includes("null") ? out.type : [...out.type, "null"];
  // `nullable` beside `allOf: [{ $ref }]` and no type: null, or whatever the rest allows.
  else if (Object.keys(out).some((key) => key !== "description" && key !== "title")) return { anyOf: [out, { type: "null" }] };
  return out;
}

function dropPropertiesForDirection(out: SchemaObject, source: SchemaObject, direction: SchemaDirection): void {
  const sourceProperties = source.properties;
  if (!isSchemaObject(sourceProperties) || !isSchemaObject(out.properties)) return;
  const hidden = direction === "request" ? "readOnly" : "writeOnly";
  const dropped = Object.entries(sourceProperties)
    .filter(([, sub]) => isSchemaObject(sub) && sub[hidden] === true)
    .map(([name]) => name);
  if (dropped.length === 0) return;
  const properties = { ...out.properties };
  for (const name of dropped) delete properties[name];
  out.properties = properties;
  if (Array.isArray(out.required)) {
    const required = out.required.filter((name) => !dropped.includes(name as string));
    if (required.length > 0) out.required = required;
    else delete out.required;
  }
}

/** True when every value valid under `schema` is a JSON object, so it can be a node's outputs as is. */
export function describesOnlyObjects(schema: SchemaObject): boolean {
  if (schema.type === "object") return true;
  if (Array.isArray(schema.type)) return schema.type.length === 1 && schema.type[0] === "object";
  if (schema.type !== undefined) return false;
  if (Array.isArray(schema.allOf) && schema.allOf.some((sub) => isSchemaObject(sub) && describesOnlyObjects(sub))) return true;
  for (const key of ["oneOf", "anyOf"] as const) {
    const list = schema[key];
    if (Array.isArray(list) && list.length > 0) return list.every((sub) => isSchemaObject(sub) && describesOnlyObjects(sub));
  }
  // No type but object keywords: an object is what the document means, and the handler checks it at run time.
  return schema.properties !== undefined || schema.additionalProperties !== undefined || schema.required !== undefined;
}
