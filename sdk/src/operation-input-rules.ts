/**
 * What the runtime (`buildOperationRequest`) refuses in the inputs of an HTTP operation beyond their JSON Schema,
 * written once. The OpenAPI mapper writes these rules into each input of a node type's `input_schema` (so callers,
 * the executor's validation and the sample generator of generated tests all see them), and the runtime makes the same
 * checks, with these same patterns, on the values it serialises.
 *
 * The runtime's checks of inputs, and the schema keywords that say each one:
 * 1. a path parameter is given, and not null: the input is `required`, and `not: { enum: [null, ".", ".."] }` (null
 *    where the schema allows null, the dots where it allows strings);
 * 2. a path parameter's text is not empty: `minLength: 1` (string), `minItems: 1` and items of `minLength: 1`
 *    (array), `minProperties: 1` (object);
 * 3. no segment of the path is "." or "..": `not: { enum: [".", ".."] }` on the value and on array items (a
 *    value holding "%2E" is sent as "%252E", so only the plain dots can form one);
 * 4. a header parameter's value holds no line break, no other control character but tab, and nothing outside
 *    Latin-1: `pattern: HEADER_VALUE_PATTERN` on the value, its array items, object keys and object values;
 * 5. a required body is given: `body` is `required`;
 * 6. a text body is a string, a form or multipart body an object: the body's `type`;
 * 7. a binary body, and each binary field of a multipart body, is base64: `pattern: BASE64_PATTERN`.
 * Cookies and query parameters are percent-encoded, so any value can be sent.
 */

/** What a header value may hold (RFC 9110 field-value as fetch takes it): tab, printable ASCII and the rest of Latin-1. */
export const HEADER_VALUE_PATTERN = "^[\\t\\x20-\\x7e\\x80-\\xff]*$";

/** Base64 or base64url text, whitespace allowed anywhere (it is dropped), at most two `=` of padding. */
export const BASE64_PATTERN = "^[A-Za-z0-9+/_\\s-]*(?:=\\s*){0,2}$";

/** The values a path parameter can never have: null (no value), and the dot segments URL parsing would climb with. */
export const FORBIDDEN_PATH_VALUES: readonly unknown[] = [null, ".", ".."];

/** The patterns these rules add: a sample generator checks values against them but need not make values from them. */
export const INPUT_RULE_PATTERNS: readonly string[] = [HEADER_VALUE_PATTERN, BASE64_PATTERN];

const headerValue = new RegExp(HEADER_VALUE_PATTERN, "u");
const base64Text = new RegExp(BASE64_PATTERN, "u");

/** Whether a header can carry `text` as its value. */
export function isHeaderValue(text: string): boolean {
  return headerValue.test(text);
}

/** Whether `text` is base64 (or base64url), as a binary body or file field must be. */
export function isBase64Text(text: string): boolean {
  return base64Text.test(text);
}

/** Whether a segment of a filled path is "." or "..", written plainly or percent-encoded. */
export function isDotSegment(segment: string): boolean {
  return /^(?:\.|%2e){1,2}$/i.test(segment);
}

/** JSON Schema keywords, as an object. */
export type SchemaRules = Record<string, unknown>;

const ANY_TYPE: ReadonlySet<string> = new Set(["string", "number", "integer", "boolean", "array", "object", "null"]);

/**
 * The keywords that say what the runtime refuses in the value of a parameter in `location`, for a schema whose value
 * may be of `types` (undefined: any type); undefined when it refuses nothing more than the schema does.
 */
export function parameterRules(location: "path" | "query" | "header" | "cookie", types: ReadonlySet<string> = ANY_TYPE): SchemaRules | undefined {
  const rules: SchemaRules = {};
  if (location === "path") {
    // Only the values the schema could allow: null where it allows null, the dots where it allows strings.
    const forbidden = FORBIDDEN_PATH_VALUES.filter((v) => (v === null ? types.has("null") : types.has("string")));
    if (forbidden.length > 0) rules.not = { enum: forbidden };
    if (types.has("string")) rules.minLength = 1;
    if (types.has("array")) {
      rules.minItems = 1;
      rules.items = { minLength: 1, not: { enum: FORBIDDEN_PATH_VALUES.filter((v) => v !== null) } };
    }
    if (types.has("object")) rules.minProperties = 1;
    return Object.keys(rules).length > 0 ? rules : undefined;
  }
  if (location === "header") {
    const pattern = { pattern: HEADER_VALUE_PATTERN };
    if (types.has("string")) rules.pattern = HEADER_VALUE_PATTERN;
    if (types.has("array")) rules.items = pattern;
    if (types.has("object")) {
      rules.propertyNames = pattern;
      rules.additionalProperties = pattern;
    }
    return Object.keys(rules).length > 0 ? rules : undefined;
  }
  return undefined;
}

/** The keywords of a value given as base64 and sent as bytes (a binary body, a multipart file field). */
export function base64Rules(): SchemaRules {
  return { pattern: BASE64_PATTERN };
}
