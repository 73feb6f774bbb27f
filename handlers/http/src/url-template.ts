/**
 * `{name}` templates of `nodefabric.http` (path, query values, header values): parsed once per node type, filled from
 * the inputs at each execution. A placeholder names an input, or a nested one with dots (`{location.city}`).
 */
import type { HandlerError } from "@nodefabric/sdk";
import { fail } from "./failure-codes.js";

/** A parsed template: literal text and placeholders, in order. */
export interface Template {
  readonly source: string;
  readonly parts: ReadonlyArray<{ literal: string } | { input: string }>;
}

/** What a template filled as a single value: one string, several (an array input), or nothing (the input is absent). */
export type Filled = { kind: "value"; value: string } | { kind: "values"; values: string[] } | { kind: "absent" };

const PLACEHOLDER = /\{([A-Za-z_$][\w$-]*(?:\.[A-Za-z_$][\w$-]*)*)\}/g;

/** Parses `text` into literal parts and `{input}` placeholders. */
export function parseTemplate(text: string): Template {
  const parts: Array<{ literal: string } | { input: string }> = [];
  let last = 0;
  for (const m of text.matchAll(PLACEHOLDER)) {
    if (m.index > last) parts.push({ literal: text.slice(last, m.index) });
    parts.push({ input: m[1]! });
    last = m.index + m[0].length;
  }
  if (last < text.length) parts.push({ literal: text.slice(last) });
  return { source: text, parts };
}

function lookUp(inputs: Record<string, unknown>, dotted: string): unknown {
  let value: unknown = inputs;
  for (const key of dotted.split(".")) {
    if (typeof value !== "object" || value === null || Array.isArray(value) || !Object.hasOwn(value, key)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

function scalarText(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return undefined;
}

function invalidInput(field: string, input: string, why: string): HandlerError {
  return fail("invalid_inputs", `nodefabric.http.${field} needs input ${input}, which ${why}`, {
    retryable: false,
    details: { field: `nodefabric.http.${field}`, input },
  });
}

/**
 * Fills a template whose placeholders must all be present, encoding each value with `encode`.
 * `field` names the template in errors (e.g. "path").
 */
export function fillTemplate(template: Template, inputs: Record<string, unknown>, field: string, encode: (value: string) => string = (v) => v): string {
  let out = "";
  for (const part of template.parts) {
    if ("literal" in part) {
      out += part.literal;
      continue;
    }
    const value = lookUp(inputs, part.input);
    if (value === undefined || value === null) throw invalidInput(field, part.input, "is missing");
    const text = scalarText(value);
    if (text === undefined) throw invalidInput(field, part.input, "is not a string, number or boolean");
    out += encode(text);
  }
  return out;
}

/**
 * Fills a query or header value: a template that is one placeholder alone is left out when its input is absent, and
 * gives one value per item when the input is an array of scalars; any other template is filled with `fillTemplate`.
 */
export function fillValue(template: Template, inputs: Record<string, unknown>, field: string): Filled {
  const only = template.parts.length === 1 ? template.parts[0]! : undefined;
  if (only && "input" in only) {
    const value = lookUp(inputs, only.input);
    if (value === undefined || value === null) return { kind: "absent" };
    if (Array.isArray(value)) {
      const values = value.map(scalarText);
      if (values.some((v) => v === undefined)) throw invalidInput(field, only.input, "is an array holding something other than strings, numbers and booleans");
      return { kind: "values", values: values as string[] };
    }
  }
  return { kind: "value", value: fillTemplate(template, inputs, field) };
}
