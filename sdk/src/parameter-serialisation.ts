/**
 * OpenAPI 3 parameter serialisation (`style`, `explode`, `allowReserved`), as the OpenAPI 3.1 style examples table
 * gives it: path `simple`, `label` and `matrix`; query `form`, `spaceDelimited`, `pipeDelimited` and `deepObject`;
 * header `simple`; cookie `form`. Also used for the fields of an application/x-www-form-urlencoded body.
 *
 * Where the table is silent (an exploded `spaceDelimited` array, a primitive `deepObject`, an object nested in an
 * object), the value is sent as `form` exploded would send it, and a nested object or array inside an array or object
 * is sent as JSON text.
 */
import type { ParameterStyle } from "./http-operation-types.js";
import type { JsonValue } from "./types.js";

/** A value as the styles see it: the table's "empty" column, a primitive, an array or an object. */
type Shape =
  | { kind: "empty" }
  | { kind: "primitive"; text: string }
  | { kind: "array"; items: string[] }
  | { kind: "object"; entries: Array<[string, string]>; values: Record<string, JsonValue> };

/**
 * One `name=value` pair of a query string or form body, not yet encoded: `name` is the parameter name followed by the
 * `deepObject` keys (`color`, `R` for `color[R]`), `atoms` are the pieces of the value and `joiner` what goes between
 * them (`blue`, `black` joined by `,` for `color=blue,black`).
 */
export interface FormPair {
  name: string[];
  atoms: string[];
  joiner: "," | " " | "|";
}

/** Text of a primitive: strings as they are, numbers and booleans as JSON writes them, null as "", the rest as JSON. */
export function primitiveText(value: JsonValue): string {
  if (typeof value === "string") return value;
  if (value === null) return "";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

function shapeOf(value: JsonValue): Shape {
  if (Array.isArray(value)) return value.length === 0 ? { kind: "empty" } : { kind: "array", items: value.map(primitiveText) };
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value).map(([k, v]) => [k, primitiveText(v)] as [string, string]);
    return entries.length === 0 ? { kind: "empty" } : { kind: "object", entries, values: value };
  }
  const text = primitiveText(value);
  return text === "" ? { kind: "empty" } : { kind: "primitive", text };
}

/** Percent-encodes everything but RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`), as UTF-8. */
export function encodeUnreserved(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/**
 * RFC 6570 reserved expansion (`allowReserved`): unreserved and reserved characters (`:/?#[]@!$&'()*+,;=`) and
 * existing percent-encoded triples pass through, everything else is percent-encoded.
 */
export function encodeReserved(text: string): string {
  return text.replace(/%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=]/gu, (m) => (m.length === 3 && m.startsWith("%") ? m : encodeUnreserved(m)));
}

/** The text of a path parameter in `style` (simple, label or matrix), each value percent-encoded (`/` as `%2F`). */
export function serialisePathValue(name: string, value: JsonValue, style: ParameterStyle, explode: boolean): string {
  const shape = shapeOf(value);
  const enc = encodeUnreserved;
  const pairs = (shape: Extract<Shape, { kind: "object" }>, sep: string): string =>
    shape.entries.map(([k, v]) => (explode ? `${enc(k)}=${enc(v)}` : `${enc(k)},${enc(v)}`)).join(sep);
  if (style === "label") {
    if (shape.kind === "empty") return ".";
    if (shape.kind === "primitive") return `.${enc(shape.text)}`;
    if (shape.kind === "array") return `.${shape.items.map(enc).join(explode ? "." : ",")}`;
    return `.${pairs(shape, explode ? "." : ",")}`;
  }
  if (style === "matrix") {
    const key = enc(name);
    if (shape.kind === "empty") return `;${key}`;
    if (shape.kind === "primitive") return `;${key}=${enc(shape.text)}`;
    if (shape.kind === "array") return explode ? shape.items.map((i) => `;${key}=${enc(i)}`).join("") : `;${key}=${shape.items.map(enc).join(",")}`;
    return explode ? shape.entries.map(([k, v]) => `;${enc(k)}=${enc(v)}`).join("") : `;${key}=${pairs(shape, ",")}`;
  }
  return simpleText(shape, explode, enc);
}

/** A header value in style `simple`: arrays and objects joined by commas, nothing encoded. */
export function serialiseHeaderValue(value: JsonValue, explode: boolean): string {
  return simpleText(shapeOf(value), explode, (s) => s);
}

function simpleText(shape: Shape, explode: boolean, enc: (s: string) => string): string {
  if (shape.kind === "empty") return "";
  if (shape.kind === "primitive") return enc(shape.text);
  if (shape.kind === "array") return shape.items.map(enc).join(",");
  return shape.entries.map(([k, v]) => (explode ? `${enc(k)}=${enc(v)}` : `${enc(k)},${enc(v)}`)).join(",");
}

/** The `name=value` pairs of a query parameter or form field in `style` (form, spaceDelimited, pipeDelimited, deepObject). */
export function formPairs(name: string, value: JsonValue, style: ParameterStyle, explode: boolean): FormPair[] {
  const shape = shapeOf(value);
  if (shape.kind === "empty") return [{ name: [name], atoms: [""], joiner: "," }];
  if (shape.kind === "primitive") return [{ name: [name], atoms: [shape.text], joiner: "," }];
  if (style === "deepObject" && shape.kind === "object") return deepPairs([name], shape.values);
  const joiner = style === "spaceDelimited" ? " " : style === "pipeDelimited" ? "|" : ",";
  if (shape.kind === "array") {
    return explode || style === "deepObject" ? shape.items.map((item) => ({ name: [name], atoms: [item], joiner })) : [{ name: [name], atoms: shape.items, joiner }];
  }
  if (explode) return shape.entries.map(([k, v]) => ({ name: [k], atoms: [v], joiner }));
  return [{ name: [name], atoms: shape.entries.flat(), joiner }];
}

/** `color[R]=100&color[G]=200`, nested objects as further `[key]`s and arrays as repeated pairs. */
function deepPairs(path: string[], value: Record<string, JsonValue>): FormPair[] {
  return Object.entries(value).flatMap(([key, member]): FormPair[] => {
    const at = [...path, key];
    if (Array.isArray(member)) return member.map((item) => ({ name: at, atoms: [primitiveText(item)], joiner: "," }));
    if (typeof member === "object" && member !== null) return deepPairs(at, member);
    return [{ name: at, atoms: [primitiveText(member)], joiner: "," }];
  });
}

/** A pair as it goes in a query string: names and values percent-encoded (values by `encodeValue`), joiners as the table writes them. */
export function queryText(pair: FormPair, encodeValue: (text: string) => string): string {
  const [first, ...keys] = pair.name;
  const name = encodeUnreserved(first!) + keys.map((k) => `[${encodeUnreserved(k)}]`).join("");
  const joiner = pair.joiner === " " ? "%20" : pair.joiner;
  return `${name}=${pair.atoms.map(encodeValue).join(joiner)}`;
}

/** A pair as raw name and value, for URLSearchParams (an application/x-www-form-urlencoded body). */
export function rawPair(pair: FormPair): [string, string] {
  const [first, ...keys] = pair.name;
  return [first! + keys.map((k) => `[${k}]`).join(""), pair.atoms.join(pair.joiner)];
}

/** The cookie pairs of a parameter in style `form`: `color=blue`, `color=blue,black` or exploded `color=blue; color=black`. */
export function cookiePairs(name: string, value: JsonValue, explode: boolean): string[] {
  return formPairs(name, value, "form", explode).map((pair) => `${encodeUnreserved(pair.name[0]!)}=${pair.atoms.map(encodeUnreserved).join(pair.joiner)}`);
}
