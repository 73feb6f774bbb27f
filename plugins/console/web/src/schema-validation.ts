/**
 * Checks the start form's input against the node type's `input_schema` in the page (draft 2020-12, as the executor
 * does), and files each message under the JSON Pointer of the field it belongs to. @cfworker/json-schema because it
 * compiles nothing with eval or new Function, which the console's Content-Security-Policy forbids.
 */
import { Validator } from "@cfworker/json-schema";
import type { JsonSchema } from "./schema-model";
import { pointerSegment } from "./schema-model";

/** Messages by JSON Pointer into the input ("" is the input as a whole). */
export type FieldErrors = Map<string, string[]>;

/** Keywords whose failure only says that something below failed; the failure below says what. */
const SUMMARY_KEYWORDS = new Set(["properties", "items", "prefixItems", "additionalItems", "$ref", "$dynamicRef", "allOf", "unevaluatedItems"]);

const REQUIRED_PROPERTY = /required property "(.*)"/;
const EXTRA_PROPERTY = /^Property "(.*)" does not match additional properties schema/;

export interface Checker {
  check(input: unknown): FieldErrors;
}

/** A checker for one schema; a schema the validator cannot take (a remote $ref, say) checks nothing and says why. */
export function schemaChecker(schema: JsonSchema): Checker & { problem?: string } {
  let validator: Validator;
  try {
    validator = new Validator(schema as never, "2020-12", false);
  } catch (err) {
    return { problem: (err as Error).message, check: () => new Map() };
  }
  return {
    check(input: unknown): FieldErrors {
      let result;
      try {
        result = validator.validate(input);
      } catch (err) {
        return new Map([["", [`the schema cannot be checked in the page: ${(err as Error).message}`]]]);
      }
      return fieldErrors(result.valid ? [] : result.errors);
    },
  };
}

interface OutputUnit {
  keyword: string;
  instanceLocation: string;
  error: string;
}

function pointerOf(instanceLocation: string): string {
  const p = instanceLocation.startsWith("#") ? instanceLocation.slice(1) : instanceLocation;
  try {
    return decodeURI(p);
  } catch {
    return p;
  }
}

export function fieldErrors(units: OutputUnit[]): FieldErrors {
  // additionalProperties: false says so on the parent, then again as "False boolean schema." on the property.
  const extras = new Set<string>();
  const located = units.map((u) => {
    let pointer = pointerOf(u.instanceLocation);
    let message = u.error;
    // A missing property is reported on its parent; the user looks for it beside the field.
    const missing = u.keyword === "required" ? REQUIRED_PROPERTY.exec(u.error) : null;
    if (missing) {
      pointer = `${pointer}/${pointerSegment(missing[1]!)}`;
      message = "is required";
    }
    const extra = u.keyword === "additionalProperties" ? EXTRA_PROPERTY.exec(u.error) : null;
    if (extra) {
      extras.add(`${pointer}/${pointerSegment(extra[1]!)}`);
      message = `has a property the schema does not allow: "${extra[1]}"`;
    }
    return { pointer, keyword: u.keyword, message };
  });
  const kept = located.filter((e) => !(e.keyword === "false" && extras.has(e.pointer)));
  const specific = kept.filter((e) => !SUMMARY_KEYWORDS.has(e.keyword));
  const out: FieldErrors = new Map();
  for (const e of kept) {
    if (SUMMARY_KEYWORDS.has(e.keyword) && specific.some((s) => s.pointer === e.pointer || s.pointer.startsWith(`${e.pointer}/`))) continue;
    const list = out.get(e.pointer);
    if (list) {
      if (!list.includes(e.message)) list.push(e.message);
    } else out.set(e.pointer, [e.message]);
  }
  return out;
}

/**
 * The server's `details.errors` of a 400 to `POST /v1/runs`, under the same pointers: paths into the request's
 * `input` lose that prefix; the others stay on the form as a whole.
 */
export function serverFieldErrors(details: unknown): FieldErrors {
  const out: FieldErrors = new Map();
  const errors = (details as { errors?: unknown } | undefined)?.errors;
  if (!Array.isArray(errors)) return out;
  for (const e of errors as Array<{ path?: unknown; message?: unknown }>) {
    const path = typeof e.path === "string" ? e.path : "";
    const message = typeof e.message === "string" ? e.message : JSON.stringify(e);
    const pointer = path === "/input" || path.startsWith("/input/") ? path.slice("/input".length) : "";
    const text = pointer === "" && path !== "/input" && path !== "" ? `${path}: ${message}` : message;
    out.set(pointer, [...(out.get(pointer) ?? []), text]);
  }
  return out;
}
