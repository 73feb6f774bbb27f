/**
 * An operation's parameters (path, query, header, cookie) as inputs and as the descriptor's wire form: path-level
 * ones overridden by the operation's own, one input each, with the runtime's own rules and the document's example.
 */
import { parameterRules, type OperationParameter, type ParameterStyle, type SchemaRules } from "@nodefabric/sdk";
import { sampleFor } from "@nodefabric/sdk/samples";
import { isRecord, sameJson } from "./json-values.js";
import type { MapContext } from "./map-context.js";
import { isJsonMediaType } from "./media-types.js";
import type { OperationSite } from "./operations.js";
import type { DefsCollector } from "./schema-defs.js";
import type { SchemaObject } from "./types.js";

/** Header parameters OpenAPI says to ignore: the request's own headers carry them. */
const IGNORED_HEADERS = new Set(["accept", "content-type", "authorization"]);

/** What an HTTP header name may be (RFC 9110 token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** The styles each parameter location allows, the first being OpenAPI's default. */
export const STYLES_BY_LOCATION: Readonly<Record<OperationParameter["in"], ParameterStyle[]>> = {
  path: ["simple", "label", "matrix"],
  query: ["form", "spaceDelimited", "pipeDelimited", "deepObject"],
  header: ["simple"],
  cookie: ["form"],
};

interface ParameterObject {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  deprecated?: boolean;
  schema?: unknown;
  content?: unknown;
  style?: unknown;
  explode?: unknown;
  allowReserved?: unknown;
  example?: unknown;
  examples?: unknown;
}

/** The inputs and wire form of the operation's parameters (path-level ones overridden by the operation's own). */
export function parametersOf(
  site: OperationSite,
  ctx: MapContext,
  notes: string[],
  defs: DefsCollector,
): { properties: Array<[string, unknown]>; required: string[]; parameters: OperationParameter[] } | { reason: string } {
  const byKey = new Map<string, ParameterObject>();
  for (const list of [site.pathItem.parameters, site.operation.parameters]) {
    if (list === undefined) continue;
    if (!Array.isArray(list)) {
      notes.push("a parameters field that is not a list is ignored");
      continue;
    }
    for (const raw of list) {
      const followed = ctx.follow(raw);
      if ("error" in followed) return { reason: `a parameter cannot be read: ${followed.error}` };
      const p = followed.value;
      if (!isRecord(p) || typeof p.name !== "string" || typeof p.in !== "string") {
        notes.push(`a parameter without a name or location is ignored (${JSON.stringify(raw).slice(0, 80)})`);
        continue;
      }
      const location = p.in.toLowerCase();
      byKey.set(`${location}:${location === "header" ? p.name.toLowerCase() : p.name}`, { ...(p as unknown as ParameterObject), in: location });
    }
  }
  const templateNames = [...site.sentPath.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
  for (const name of templateNames) {
    // Documents sometimes forget to declare a path parameter; the request cannot be made without it.
    if (!byKey.has(`path:${name}`)) {
      byKey.set(`path:${name}`, { name, in: "path", required: true, schema: { type: "string" } });
      notes.push(`the path parameter ${name} is not declared; it is a required string input`);
    }
  }

  const kept: ParameterObject[] = [];
  for (const p of byKey.values()) {
    if (p.in === "path" && !templateNames.includes(p.name)) {
      notes.push(`the path parameter ${p.name} does not appear in the path; it is left out`);
      continue;
    }
    if (p.name === "") {
      notes.push(`a ${p.in} parameter with an empty name is ignored`);
      continue;
    }
    if (p.in === "header" && IGNORED_HEADERS.has(p.name.toLowerCase())) {
      notes.push(`the header parameter ${p.name} is ignored, as OpenAPI says (the request sets it)`);
      continue;
    }
    if (!(p.in in STYLES_BY_LOCATION)) {
      if (p.required === true) return { reason: `its required parameter ${p.name} is in "${p.in}", which is not a parameter location` };
      notes.push(`the parameter ${p.name} in "${p.in}" is ignored (not a parameter location)`);
      continue;
    }
    if (p.in === "header" && !HEADER_NAME.test(p.name)) {
      if (p.required === true) return { reason: `its required header parameter ${JSON.stringify(p.name)} is not a valid header name` };
      notes.push(`the header parameter ${JSON.stringify(p.name)} is ignored (not a valid header name)`);
      continue;
    }
    kept.push(p);
  }

  const nameCounts = new Map<string, number>();
  for (const p of kept) nameCounts.set(p.name, (nameCounts.get(p.name) ?? 0) + 1);
  const inputs = new Set<string>(["body"]);
  const properties: Array<[string, unknown]> = [];
  const required: string[] = [];
  const parameters: OperationParameter[] = [];
  for (const p of kept) {
    const location = p.in as OperationParameter["in"];
    let input = nameCounts.get(p.name)! > 1 || p.name === "body" ? `${location}_${p.name}` : p.name;
    const wanted = input;
    for (let n = 2; inputs.has(input); n++) input = `${wanted}_${n}`;
    inputs.add(input);

    let contentType: string | undefined;
    let rawSchema: unknown = p.schema;
    if (rawSchema === undefined && isRecord(p.content)) {
      const keys = Object.keys(p.content);
      contentType = keys.find(isJsonMediaType) ?? keys[0];
      if (contentType !== undefined) {
        const media = ctx.follow(p.content[contentType]);
        rawSchema = "value" in media && isRecord(media.value) ? media.value.schema : undefined;
      }
    }
    if (rawSchema === undefined) notes.push(`the parameter ${p.name} has no schema; any value is accepted`);
    const schema: SchemaObject = { ...defs.take(ctx.convert(rawSchema ?? {}, "request", notes), notes) };
    if (typeof p.description === "string" && schema.description === undefined) schema.description = p.description;
    if (p.deprecated === true) schema.deprecated = true;
    // What the runtime refuses beyond the schema (an empty path value, a line break in a header) is said in the schema.
    const rules = parameterRules(location, typesAllowed(schema, defs));
    if (rules) addRules(schema, rules);
    addParameterExample(p, schema, ctx, defs, notes);

    const styles = STYLES_BY_LOCATION[location];
    let style = styles[0];
    if (typeof p.style === "string") {
      if ((styles as string[]).includes(p.style)) style = p.style as ParameterStyle;
      else notes.push(`the style ${p.style} of the parameter ${p.name} is not one ${location} parameters can have; ${style} is used`);
    }
    const explode = typeof p.explode === "boolean" ? p.explode : style === "form";
    properties.push([input, schema]);
    if (location === "path" || p.required === true) required.push(input);
    parameters.push({
      input,
      name: p.name,
      in: location,
      style,
      explode,
      ...(location === "query" && p.allowReserved === true ? { allow_reserved: true } : {}),
      ...(contentType !== undefined ? { content_type: contentType } : {}),
    });
  }
  return { properties, required, parameters };
}

/** JSON types, as `type` names them. */
const JSON_TYPES = ["string", "number", "integer", "boolean", "array", "object", "null"];

/**
 * The JSON types a value of `schema` may have (through `$ref`s into the collected definitions, `allOf`, `anyOf` and
 * `oneOf`); undefined when any type may do.
 */
function typesAllowed(schema: unknown, defs: DefsCollector, seen: Set<unknown> = new Set()): Set<string> | undefined {
  if (!isRecord(schema) || seen.has(schema)) return undefined;
  seen.add(schema);
  let types: Set<string> | undefined;
  const narrow = (other: Set<string> | undefined) => {
    if (other === undefined) return;
    types = types === undefined ? new Set(other) : new Set([...types].filter((t) => other.has(t) || (t === "integer" && other.has("number"))));
  };
  if (schema.type !== undefined) {
    const listed = (Array.isArray(schema.type) ? schema.type : [schema.type]).filter((t): t is string => typeof t === "string");
    narrow(new Set(listed.includes("number") ? [...listed, "integer"] : listed));
  }
  if (typeof schema.$ref === "string") narrow(typesAllowed(defs.resolve(schema.$ref), defs, seen));
  if (Array.isArray(schema.allOf)) for (const part of schema.allOf) narrow(typesAllowed(part, defs, seen));
  for (const key of ["anyOf", "oneOf"] as const) {
    const branches = schema[key];
    if (!Array.isArray(branches) || branches.length === 0) continue;
    const union = new Set<string>();
    let any = false;
    for (const branch of branches) {
      const t = typesAllowed(branch, defs, new Set(seen));
      if (t === undefined) any = true;
      else for (const name of t) union.add(name);
    }
    if (!any) narrow(union);
  }
  if (Array.isArray(schema.enum)) narrow(new Set(schema.enum.map(jsonTypeOf)));
  if (schema.const !== undefined) narrow(new Set([jsonTypeOf(schema.const)]));
  return types;
}

function jsonTypeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return JSON_TYPES.includes(typeof value) ? typeof value : "null";
}

/** Bounds a rule raises: a schema's own stricter bound is kept. */
const LOWER_BOUNDS = new Set(["minLength", "minItems", "minProperties"]);

/**
 * Adds `rules` to a parameter's schema: as its own keywords where it has none of them (or a lower bound), the others
 * in one more `allOf` part, so both the document's constraint and the rule hold.
 */
function addRules(schema: SchemaObject, rules: SchemaRules): void {
  const rest: SchemaRules = {};
  for (const [key, value] of Object.entries(rules)) {
    const own = schema[key];
    if (LOWER_BOUNDS.has(key) && (own === undefined || (typeof own === "number" && own < (value as number)))) schema[key] = value;
    else if (LOWER_BOUNDS.has(key)) continue;
    // additionalProperties beside `properties` would spare the named ones: it goes in a part of its own.
    else if (own === undefined && key !== "additionalProperties") schema[key] = value;
    else rest[key] = value;
  }
  if (Object.keys(rest).length > 0) schema.allOf = [...(Array.isArray(schema.allOf) ? schema.allOf : []), rest];
}

/**
 * The parameter's `example` (or first of `examples`) as the input's `examples`, only when the samples module accepts
 * it as valid against the input's schema; otherwise it is left out, with a note.
 */
function addParameterExample(p: ParameterObject, schema: SchemaObject, ctx: MapContext, defs: DefsCollector, notes: string[]): void {
  if (schema.examples !== undefined) return;
  let candidate = p.example;
  if (candidate === undefined && isRecord(p.examples)) {
    for (const raw of Object.values(p.examples)) {
      const followed = ctx.follow(raw);
      if ("value" in followed && isRecord(followed.value) && followed.value.value !== undefined) {
        candidate = followed.value.value;
        break;
      }
    }
  }
  if (candidate === undefined) return;
  const sample = sampleFor(defs.standalone(schema), { examples: [candidate] });
  if ("value" in sample && sameJson(sample.value, candidate)) schema.examples = [candidate];
  else notes.push(`the example of the parameter ${p.name} is not valid against its schema; it is left out`);
}
