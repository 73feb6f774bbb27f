/**
 * Structured output: the strict form of a schema for `response_format: json_schema` (every property required,
 * the optional ones nullable, no additional properties), reading an answer back (fences stripped, the nulls of
 * optional properties dropped), and validation against the schema as the caller gave it.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import type { ErrorObject, ValidateFunction } from "ajv";
import { fail } from "./failure-codes.js";

type Schema = Record<string, unknown>;

/** Keywords a strict structured-output schema refuses or ignores; they are dropped from the strict form only. */
const DROPPED = new Set(["$schema", "$id", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment"]);

function isObject(v: unknown): v is Schema {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function nullable(schema: Schema): Schema {
  const t = schema.type;
  if (typeof t === "string") return { ...schema, type: t === "null" ? "null" : [t, "null"], ...(Array.isArray(schema.enum) ? { enum: [...schema.enum, null] } : {}) };
  if (Array.isArray(t)) return t.includes("null") ? schema : { ...schema, type: [...t, "null"] };
  return { anyOf: [schema, { type: "null" }] };
}

/**
 * The strict form of `schema`, and whether it can be strict at all: an object with no listed properties (a free-form
 * map) has no strict form, so the request then goes with `strict: false` and the answer is still validated.
 */
export function strictSchema(schema: unknown): { schema: Schema; strict: boolean } {
  let strict = true;
  const walk = (s: unknown, depth: number): unknown => {
    if (!isObject(s) || depth > 64) return s;
    const out: Schema = {};
    for (const [k, v] of Object.entries(s)) {
      if (DROPPED.has(k)) continue;
      if (k === "properties" && isObject(v)) out[k] = Object.fromEntries(Object.entries(v).map(([name, p]) => [name, walk(p, depth + 1)]));
      else if ((k === "items" || k === "additionalProperties" || k === "not" || k === "contains") && isObject(v)) out[k] = walk(v, depth + 1);
      else if ((k === "anyOf" || k === "oneOf" || k === "allOf" || k === "prefixItems") && Array.isArray(v)) out[k] = v.map((x) => walk(x, depth + 1));
      else if ((k === "$defs" || k === "definitions") && isObject(v)) out[k] = Object.fromEntries(Object.entries(v).map(([name, d]) => [name, walk(d, depth + 1)]));
      else out[k] = v;
    }
    const isObj = out.type === "object" || (Array.isArray(out.type) && out.type.includes("object")) || (out.type === undefined && isObject(out.properties));
    if (isObj) {
      const props = isObject(out.properties) ? (out.properties as Record<string, Schema>) : undefined;
      if (!props || Object.keys(props).length === 0 || (out.additionalProperties !== undefined && out.additionalProperties !== false)) {
        strict = false;
        return out;
      }
      const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
      out.properties = Object.fromEntries(Object.entries(props).map(([name, p]) => [name, required.has(name) ? p : nullable(p)]));
      out.required = Object.keys(props);
      out.additionalProperties = false;
      if (out.type === undefined) out.type = "object";
    }
    return out;
  };
  const out = walk(schema, 0) as Schema;
  if (out.type !== "object") strict = false;
  return { schema: out, strict };
}

/** Drops the `null` values the strict form put in place of optional properties the answer left out. */
export function dropStrictNulls(value: unknown, schema: unknown, depth = 0): unknown {
  if (depth > 64 || !isObject(schema)) return value;
  if (Array.isArray(value) && isObject(schema.items)) return value.map((v) => dropStrictNulls(v, schema.items, depth + 1));
  if (!isObject(value) || !isObject(schema.properties)) return value;
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const p = (schema.properties as Schema)[k];
    if (v === null && p !== undefined && !required.has(k) && !allowsNull(p)) continue;
    out[k] = p === undefined ? v : dropStrictNulls(v, p, depth + 1);
  }
  return out;
}

function allowsNull(schema: unknown): boolean {
  if (!isObject(schema)) return true;
  const t = schema.type;
  if (t === "null" || (Array.isArray(t) && t.includes("null"))) return true;
  if (Array.isArray(schema.anyOf)) return schema.anyOf.some(allowsNull);
  return t === undefined && schema.enum === undefined && schema.const === undefined;
}

/** Reads a JSON answer: the text, or the JSON inside one markdown fence (as models often answer in json_object mode). */
export function parseJsonAnswer(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  const trimmed = text.trim();
  const fenced = /^```(?:json)?\s*\n([\s\S]*?)\n?```$/i.exec(trimmed);
  const body = fenced ? fenced[1] : trimmed;
  try {
    return { ok: true, value: JSON.parse(body) };
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  }
}

const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });
const compiled = new Map<string, ValidateFunction>();

/** The validator of a caller's schema; an invalid schema is the caller's mistake (`invalid_inputs`). */
export function validatorOf(schema: unknown): ValidateFunction {
  const key = JSON.stringify(schema);
  let v = compiled.get(key);
  if (!v) {
    try {
      v = ajv.compile(schema as Schema);
    } catch (err) {
      throw fail("invalid_inputs", `response_schema is not a valid JSON Schema: ${(err as Error).message}`, { retryable: false, details: { field: "response_schema" } });
    }
    if (compiled.size > 500) compiled.clear();
    compiled.set(key, v);
  }
  return v;
}

/** Validation errors as short lines a model can act on ("/steps/0/goal: must be string"). */
export function describeErrors(errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).slice(0, 20).map((e) => `${e.instancePath || "/"}: ${e.message ?? "is invalid"}${e.keyword === "additionalProperties" ? ` (${String((e.params as { additionalProperty?: string }).additionalProperty)})` : ""}`);
}
