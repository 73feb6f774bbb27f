/**
 * The deterministic generator of sampleFor: one value for a root schema, read the way a validator reads it (`$ref`s and
 * `allOf` merged, a `oneOf` branch that matches alone, `const`/`enum`, `pattern`, `format`, bounds, `multipleOf`,
 * `uniqueItems`, `not`), small, and the same for the same schema. sampleFor checks what it makes.
 */
import type { ValidateFunction } from "ajv";
import { INPUT_RULE_PATTERNS } from "../operation-input-rules.js";
import { stringMatching } from "./regex-matches.js";
import { INTEGER_FORMATS, STRING_FORMATS, varied } from "./sample-formats.js";
import { subValidator } from "./sample-validators.js";
import { isRecord, type SchemaObject } from "./schema-object.js";

/** Objects this deep (0 at the top) and deeper get only their required properties in `full` mode. */
const FULL_DEPTH = 2;
/** Below this many nested values, generation gives up on a branch (recursive required properties). */
const MAX_DEPTH = 24;

/** No value could be made. */
export const FAIL: unique symbol = Symbol("no value");
type Made = unknown | typeof FAIL;

/** Everything `allOf` and `$ref` say about one value, merged. */
interface Merged {
  /** Allowed types (intersected); undefined: any. */
  types?: Set<string>;
  consts: unknown[];
  enums: unknown[][];
  examples: unknown[];
  /** Subschemas per property name. */
  properties: Map<string, unknown[]>;
  required: Set<string>;
  /** Parts that limit property names: what they name, and what other properties must satisfy. */
  limits: Array<{ names: Set<string>; patterns: RegExp[]; additional: unknown }>;
  patternProperties: Array<{ regex: RegExp; source: string; schema: unknown }>;
  propertyNames: unknown[];
  dependentRequired: Map<string, string[]>;
  minProperties: number;
  maxProperties: number;
  items: unknown[];
  prefixItems: unknown[][];
  contains: unknown[];
  minItems: number;
  maxItems: number;
  uniqueItems: boolean;
  minLength: number;
  maxLength: number;
  patterns: string[];
  format?: string;
  contentEncoding?: string;
  minimum: number;
  maximum: number;
  exclusiveMinimum: number;
  exclusiveMaximum: number;
  multipleOf: number[];
  /** oneOf/anyOf lists still to choose from, each with the schema that holds it. */
  choices: Array<{ kind: "oneOf" | "anyOf"; branches: unknown[]; holder: SchemaObject }>;
  conditionals: SchemaObject[];
  nots: SchemaObject[];
  /** The schema objects merged (for checks). */
  parts: SchemaObject[];
  impossible: boolean;
}

function emptyMerged(): Merged {
  return {
    consts: [],
    enums: [],
    examples: [],
    properties: new Map(),
    required: new Set(),
    limits: [],
    patternProperties: [],
    propertyNames: [],
    dependentRequired: new Map(),
    minProperties: 0,
    maxProperties: Infinity,
    items: [],
    prefixItems: [],
    contains: [],
    minItems: 0,
    maxItems: Infinity,
    uniqueItems: false,
    minLength: 0,
    maxLength: Infinity,
    patterns: [],
    minimum: -Infinity,
    maximum: Infinity,
    exclusiveMinimum: -Infinity,
    exclusiveMaximum: Infinity,
    multipleOf: [],
    choices: [],
    conditionals: [],
    nots: [],
    parts: [],
    impossible: false,
  };
}

function sameValue(a: unknown, b: unknown): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

function patternRegex(source: string): RegExp | undefined {
  try {
    return new RegExp(source, "u");
  } catch {
    return undefined;
  }
}

/** Most values one generator makes before it gives up (each branch tried of a oneOf counts its whole subtree). */
const GENERATOR_MAX_STEPS = 20_000;

/** Most time one generator spends, in ms. */
const GENERATOR_BUDGET_MS = 250;

/** Makes one value for a root schema; `mode` and `useExamples` vary the candidates sampleFor tries. */
export class SampleGenerator {
  constructor(
    private readonly root: SchemaObject,
    private readonly subs: WeakMap<object, ValidateFunction | null>,
    private readonly mode: "full" | "minimal",
    private readonly useExamples: boolean,
  ) {}

  /** Values made so far, and when to give up: nested oneOf branches multiply, and a search must stay bounded. */
  private steps = 0;
  private readonly deadline = performance.now() + GENERATOR_BUDGET_MS;

  generate(): Made {
    return this.valueOf(this.root, 0, 0, 0);
  }

  /** True once this generator has spent its budget; every value asked for after that fails, and sampleFor moves on. */
  private spent(): boolean {
    this.steps++;
    return this.steps > GENERATOR_MAX_STEPS || performance.now() > this.deadline;
  }

  /** The schema a local `$ref` of the root names. */
  private resolve(ref: string): unknown {
    if (!ref.startsWith("#")) return undefined;
    let current: unknown = this.root;
    for (const raw of ref.slice(1).split("/").slice(1)) {
      let token = raw;
      try {
        token = decodeURIComponent(raw);
      } catch {
        // As written.
      }
      token = token.replace(/~1/g, "/").replace(/~0/g, "~");
      if (Array.isArray(current) && /^\d+$/.test(token)) current = current[Number(token)];
      else if (isRecord(current) && Object.prototype.hasOwnProperty.call(current, token)) current = current[token];
      else return undefined;
    }
    return current;
  }

  /** Merges `schema` (through `$ref` and `allOf`) into `m`. */
  private merge(schema: unknown, m: Merged, seen: Set<object> = new Set()): void {
    if (schema === false) {
      m.impossible = true;
      return;
    }
    if (!isRecord(schema) || seen.has(schema)) return;
    seen.add(schema);
    m.parts.push(schema);
    const s = schema;
    if (typeof s.$ref === "string") {
      const target = this.resolve(s.$ref);
      if (target !== undefined) this.merge(target, m, seen);
    }
    if (Array.isArray(s.allOf)) for (const part of s.allOf) this.merge(part, m, seen);
    if (s.type !== undefined) {
      const types = new Set<string>((Array.isArray(s.type) ? s.type : [s.type]).filter((t): t is string => typeof t === "string"));
      // An integer is a number: {type: number} and {type: integer} together allow integers.
      if (types.has("number")) types.add("integer");
      m.types = m.types === undefined ? types : new Set([...m.types].filter((t) => types.has(t)));
    }
    if (s.const !== undefined) m.consts.push(s.const);
    if (Array.isArray(s.enum)) m.enums.push(s.enum);
    if (Array.isArray(s.examples)) m.examples.push(...s.examples);
    if (s.default !== undefined) m.examples.push(s.default);
    if (isRecord(s.properties)) {
      for (const [name, sub] of Object.entries(s.properties)) {
        if (!m.properties.has(name)) m.properties.set(name, []);
        m.properties.get(name)!.push(sub);
      }
    }
    if (Array.isArray(s.required)) for (const name of s.required) if (typeof name === "string") m.required.add(name);
    if (s.additionalProperties !== undefined && s.additionalProperties !== true) {
      const patterns = isRecord(s.patternProperties) ? Object.keys(s.patternProperties).map(patternRegex).filter((r): r is RegExp => r !== undefined) : [];
      m.limits.push({ names: new Set(isRecord(s.properties) ? Object.keys(s.properties) : []), patterns, additional: s.additionalProperties });
    }
    if (isRecord(s.patternProperties)) {
      for (const [source, sub] of Object.entries(s.patternProperties)) {
        const regex = patternRegex(source);
        if (regex) m.patternProperties.push({ regex, source, schema: sub });
      }
    }
    if (s.propertyNames !== undefined) m.propertyNames.push(s.propertyNames);
    if (isRecord(s.dependentRequired)) {
      for (const [name, deps] of Object.entries(s.dependentRequired)) if (Array.isArray(deps)) m.dependentRequired.set(name, [...(m.dependentRequired.get(name) ?? []), ...deps]);
    }
    const num = (key: string): number | undefined => (typeof s[key] === "number" ? (s[key] as number) : undefined);
    m.minProperties = Math.max(m.minProperties, num("minProperties") ?? 0);
    m.maxProperties = Math.min(m.maxProperties, num("maxProperties") ?? Infinity);
    if (s.items !== undefined && !Array.isArray(s.items)) m.items.push(s.items);
    if (Array.isArray(s.prefixItems)) m.prefixItems.push(s.prefixItems);
    if (s.contains !== undefined) m.contains.push(s.contains);
    m.minItems = Math.max(m.minItems, num("minItems") ?? 0);
    m.maxItems = Math.min(m.maxItems, num("maxItems") ?? Infinity);
    if (s.uniqueItems === true) m.uniqueItems = true;
    m.minLength = Math.max(m.minLength, num("minLength") ?? 0);
    m.maxLength = Math.min(m.maxLength, num("maxLength") ?? Infinity);
    if (typeof s.pattern === "string") m.patterns.push(s.pattern);
    if (typeof s.format === "string") m.format ??= s.format;
    if (typeof s.contentEncoding === "string") m.contentEncoding ??= s.contentEncoding;
    m.minimum = Math.max(m.minimum, num("minimum") ?? -Infinity);
    m.maximum = Math.min(m.maximum, num("maximum") ?? Infinity);
    m.exclusiveMinimum = Math.max(m.exclusiveMinimum, num("exclusiveMinimum") ?? -Infinity);
    m.exclusiveMaximum = Math.min(m.exclusiveMaximum, num("exclusiveMaximum") ?? Infinity);
    if (typeof s.multipleOf === "number" && s.multipleOf > 0) m.multipleOf.push(s.multipleOf);
    for (const kind of ["oneOf", "anyOf"] as const) {
      const list = s[kind];
      if (Array.isArray(list) && list.length > 0) m.choices.push({ kind, branches: list, holder: s });
    }
    if (s.if !== undefined) m.conditionals.push(s);
    if (isRecord(s.not) || s.not === true) m.nots.push(s);
  }

  /** A value for `schema`: `depth` counts nested values, `objects` nested objects, `variant` varies the choices. */
  private valueOf(schema: unknown, depth: number, objects: number, variant: number): Made {
    if (schema === true) return "example";
    if (depth > MAX_DEPTH || this.spent()) return FAIL;
    const m = emptyMerged();
    this.merge(schema, m);
    return this.fromMerged(m, depth, objects, variant);
  }

  private fromMerged(m: Merged, depth: number, objects: number, variant: number): Made {
    if (m.impossible) return FAIL;
    if (m.choices.length > 0) return this.choose(m, depth, objects, variant);
    if (m.conditionals.length > 0) return this.conditional(m, depth, objects, variant);
    if (m.nots.length > 0) {
      const holders = m.nots;
      m.nots = [];
      for (let v = variant; v < variant + 4; v++) {
        const value = this.plain({ ...m, nots: [] }, depth, objects, v);
        if (value !== FAIL && holders.every((h) => this.check(h, value))) return value;
      }
      return FAIL;
    }
    return this.plain(m, depth, objects, variant);
  }

  /** True unless `holder`'s validator refuses `value` (a holder that does not compile is not in the way). */
  private check(holder: SchemaObject, value: unknown): boolean {
    if (this.spent()) return false;
    const validate = subValidator(this.root, this.subs, holder);
    return validate === null || (validate(value) as boolean);
  }

  /** The first oneOf/anyOf: each branch in turn (null last) merged with the rest, until its holder accepts the value. */
  private choose(m: Merged, depth: number, objects: number, variant: number): Made {
    const [choice, ...rest] = m.choices;
    const order = choice.branches.map((_, k) => k);
    const isNull = (b: unknown) => isRecord(b) && b.type === "null";
    order.sort((a, b) => Number(isNull(choice.branches[a])) - Number(isNull(choice.branches[b])));
    let fallback: Made = FAIL;
    for (const k of order) {
      for (const v of [variant, variant + 1]) {
        const merged = this.copy(m);
        merged.choices = rest;
        this.merge(choice.branches[k], merged);
        const value = this.fromMerged(merged, depth, objects, v);
        if (value === FAIL) continue;
        // anyOf: a value made from a branch matches it; oneOf must match that branch alone.
        if (choice.kind === "anyOf" && rest.length === 0) return value;
        if (this.check(choice.holder, value)) return value;
        if (fallback === FAIL) fallback = value;
      }
    }
    return fallback;
  }

  private conditional(m: Merged, depth: number, objects: number, variant: number): Made {
    const [holder, ...rest] = m.conditionals;
    for (const branch of [[holder.if, holder.then], [holder.else]]) {
      const merged = this.copy(m);
      merged.conditionals = rest;
      for (const part of branch) if (part !== undefined) this.merge(part, merged);
      const value = this.fromMerged(merged, depth, objects, variant);
      if (value !== FAIL && this.check(holder, value)) return value;
    }
    return FAIL;
  }

  private copy(m: Merged): Merged {
    return {
      ...m,
      types: m.types ? new Set(m.types) : undefined,
      consts: [...m.consts],
      enums: [...m.enums],
      examples: [...m.examples],
      properties: new Map([...m.properties].map(([k, v]) => [k, [...v]])),
      required: new Set(m.required),
      limits: [...m.limits],
      patternProperties: [...m.patternProperties],
      propertyNames: [...m.propertyNames],
      dependentRequired: new Map(m.dependentRequired),
      items: [...m.items],
      prefixItems: [...m.prefixItems],
      contains: [...m.contains],
      patterns: [...m.patterns],
      multipleOf: [...m.multipleOf],
      choices: [...m.choices],
      conditionals: [...m.conditionals],
      nots: [...m.nots],
      parts: [...m.parts],
    };
  }

  /** A value once no choice is left: const, enum, an example, else one made for the type. */
  private plain(m: Merged, depth: number, objects: number, variant: number): Made {
    if (m.consts.length > 0) return m.consts.every((c) => sameValue(c, m.consts[0])) ? m.consts[0] : FAIL;
    if (m.enums.length > 0) {
      let values = m.enums[0];
      for (const other of m.enums.slice(1)) values = values.filter((v) => other.some((o) => sameValue(o, v)));
      values = values.filter((v) => m.types === undefined || m.types.has(typeOf(v)) || (typeOf(v) === "integer" && m.types.has("number")));
      if (values.length === 0) return FAIL;
      const nonNull = values.filter((v) => v !== null);
      const pool = nonNull.length > 0 ? nonNull : values;
      return pool[variant % pool.length];
    }
    const types = this.typesOf(m);
    if (this.useExamples && variant === 0) {
      const example = m.examples.find((e) => e !== undefined && e !== null && types.includes(typeOf(e)) && typeOf(e) !== "object" && typeOf(e) !== "array");
      if (example !== undefined && this.primitiveFits(example, m)) return example;
    }
    for (const type of types) {
      const value = this.ofType(type, m, depth, objects, variant);
      if (value !== FAIL) return value;
    }
    return FAIL;
  }

  /** Cheap checks of a primitive example against what was merged (the root check has the last word). */
  private primitiveFits(value: unknown, m: Merged): boolean {
    if (typeof value === "string") {
      if (value.length < m.minLength || value.length > m.maxLength) return false;
      return m.patterns.every((p) => patternRegex(p)?.test(value) ?? true);
    }
    if (typeof value === "number") {
      return value >= m.minimum && value <= m.maximum && value > m.exclusiveMinimum && value < m.exclusiveMaximum && m.multipleOf.every((d) => Number.isInteger(value / d));
    }
    return true;
  }

  /** The types to try, in order: those allowed (null last), else what the keywords suggest. */
  private typesOf(m: Merged): string[] {
    if (m.types !== undefined) {
      const order = ["object", "array", "string", "integer", "number", "boolean", "null"];
      const allowed = order.filter((t) => m.types!.has(t));
      // An integer is a number: keep one of the two, the integer (exact multiples, formats).
      return allowed.includes("integer") ? allowed.filter((t) => t !== "number") : allowed;
    }
    if (m.properties.size > 0 || m.required.size > 0 || m.limits.length > 0 || m.patternProperties.length > 0 || m.minProperties > 0) return ["object"];
    if (m.items.length > 0 || m.prefixItems.length > 0 || m.contains.length > 0 || m.minItems > 0) return ["array"];
    if (m.patterns.length > 0 || m.format !== undefined || m.minLength > 0 || m.maxLength < Infinity) return ["string", "integer"];
    if (m.multipleOf.length > 0 || [m.minimum, m.exclusiveMinimum].some((n) => n > -Infinity) || [m.maximum, m.exclusiveMaximum].some((n) => n < Infinity)) return ["integer", "number"];
    return ["string", "integer", "boolean", "object"];
  }

  private ofType(type: string, m: Merged, depth: number, objects: number, variant: number): Made {
    switch (type) {
      case "object":
        return this.object(m, depth, objects, variant);
      case "array":
        return this.array(m, depth, objects, variant);
      case "string":
        return this.string(m, variant);
      case "integer":
        return this.number(m, true, variant);
      case "number":
        return this.number(m, false, variant);
      case "boolean":
        return variant % 2 === 0;
      case "null":
        return null;
      default:
        return FAIL;
    }
  }

  /** The subschemas a property's value must satisfy: its own, the limiting parts' `additionalProperties`, matching patterns. */
  private propertySchemas(name: string, m: Merged): unknown[] | undefined {
    const schemas = [...(m.properties.get(name) ?? [])];
    for (const limit of m.limits) {
      if (limit.names.has(name) || limit.patterns.some((r) => r.test(name))) continue;
      if (limit.additional === false) return undefined;
      schemas.push(limit.additional);
    }
    for (const p of m.patternProperties) if (p.regex.test(name)) schemas.push(p.schema);
    return schemas;
  }

  private object(m: Merged, depth: number, objects: number, variant: number): Made {
    const out: Record<string, unknown> = {};
    const fill = this.mode === "full" && objects < FULL_DEPTH;
    const put = (name: string, required: boolean): boolean => {
      if (Object.prototype.hasOwnProperty.call(out, name)) return true;
      const schemas = this.propertySchemas(name, m);
      if (schemas === undefined) return !required;
      const value = this.valueOf(schemas.length === 1 ? schemas[0] : { allOf: schemas }, depth + 1, objects + 1, 0);
      if (value === FAIL) return !required;
      out[name] = value;
      return true;
    };
    for (const name of m.required) if (!put(name, true)) return FAIL;
    if (fill) {
      for (const name of m.properties.keys()) {
        if (Object.keys(out).length >= m.maxProperties) break;
        put(name, false);
      }
    }
    for (const [name, deps] of m.dependentRequired) if (name in out) for (const dep of deps) if (!put(dep, true)) return FAIL;
    // Maps (no named properties): one entry shows their shape; more when minProperties asks.
    const wantsEntry = fill && m.properties.size === 0 && (m.limits.some((l) => isRecord(l.additional)) || m.patternProperties.length > 0);
    const target = Math.max(m.minProperties, wantsEntry ? 1 : 0);
    for (let k = 0; Object.keys(out).length < target && k < target + 8; k++) {
      const optional = [...m.properties.keys()].find((name) => !(name in out));
      if (optional !== undefined) {
        put(optional, false);
        continue;
      }
      const key = this.propertyName(m, k + variant);
      if (key === undefined) break;
      put(key, false);
    }
    return out;
  }

  /** A name for an extra property: from a patternProperties pattern or propertyNames, else `key`, `key2`… */
  private propertyName(m: Merged, k: number): string | undefined {
    const candidates: string[] = [];
    for (const p of m.patternProperties) {
      const name = stringMatching(p.source, { variant: k });
      if (name !== undefined) candidates.push(name);
    }
    for (const names of m.propertyNames) {
      const name = this.valueOf(names, MAX_DEPTH, FULL_DEPTH, k);
      if (typeof name === "string") candidates.push(name);
    }
    candidates.push(k === 0 ? "key" : `key${k + 1}`);
    return candidates.find((name) => !m.properties.has(name) && this.propertySchemas(name, m) !== undefined && m.propertyNames.every((n) => this.nameAllowed(n, name)));
  }

  private nameAllowed(schema: unknown, name: string): boolean {
    if (schema === false) return false;
    if (!isRecord(schema)) return true;
    const sub = emptyMerged();
    this.merge(schema, sub);
    if (name.length < sub.minLength || name.length > sub.maxLength) return false;
    if (!sub.patterns.every((p) => patternRegex(p)?.test(name) ?? true)) return false;
    return sub.enums.every((e) => e.includes(name)) && sub.consts.every((c) => c === name);
  }

  private array(m: Merged, depth: number, objects: number, variant: number): Made {
    const prefix = m.prefixItems[0] ?? [];
    const itemSchemas = m.items;
    const closed = itemSchemas.some((s) => s === false);
    const open = depth < MAX_DEPTH - 4;
    let count = Math.max(m.minItems, this.mode === "full" && open && !closed ? Math.max(1, prefix.length) : 0);
    if (closed) count = Math.max(m.minItems, Math.min(count, prefix.length));
    count = Math.min(count, m.maxItems);
    if (m.contains.length > 0) count = Math.max(count, 1);
    const out: unknown[] = [];
    const keys = new Set<string>();
    for (let i = 0; i < count; i++) {
      const schemas: unknown[] = [...m.prefixItems.map((list) => list[i]).filter((s) => s !== undefined)];
      if (i >= prefix.length) schemas.push(...itemSchemas);
      if (i === 0 && m.contains.length > 0) schemas.push(...m.contains);
      const schema = schemas.length === 0 ? true : schemas.length === 1 ? schemas[0] : { allOf: schemas };
      let value: Made = FAIL;
      for (let v = i + variant; v < i + variant + 6; v++) {
        value = this.valueOf(schema, depth + 1, objects, v);
        if (value === FAIL) break;
        if (!m.uniqueItems || !keys.has(JSON.stringify(value))) break;
        value = FAIL;
      }
      if (value === FAIL) return i >= m.minItems ? out : FAIL;
      keys.add(JSON.stringify(value));
      out.push(value);
    }
    return out;
  }

  private string(m: Merged, variant: number): Made {
    const min = m.minLength;
    const max = m.maxLength;
    if (min > max) return FAIL;
    const fits = (text: string) => m.patterns.every((p) => patternRegex(p)?.test(text) ?? true);
    // The runtime's own rules (a header value's characters, base64) are checked, not written from: the document's
    // pattern, or the plain value below, makes a value that reads like one.
    const own = m.patterns.filter((p) => !INPUT_RULE_PATTERNS.includes(p));
    if (own.length > 0) {
      for (let v = variant; v < variant + 3; v++) {
        const text = stringMatching(own[0], { minLength: min, maxLength: max, variant: v });
        if (text !== undefined && fits(text)) return text;
      }
      return FAIL;
    }
    const formatted = m.format !== undefined ? STRING_FORMATS[m.format] : m.contentEncoding === "base64" ? STRING_FORMATS.byte : undefined;
    let text = formatted ?? "example";
    if (variant > 0) text = varied(text, m.format, variant);
    if (text.length < min) text = formatted !== undefined && m.format === "uri" ? `${text}/${"x".repeat(min - text.length - 1)}` : text.padEnd(min, "x");
    if (text.length > max) text = text.slice(0, max);
    if (fits(text)) return text;
    const matching = m.patterns.length > 0 ? stringMatching(m.patterns[0], { minLength: min, maxLength: max, variant }) : undefined;
    return matching !== undefined && fits(matching) ? matching : FAIL;
  }

  private number(m: Merged, integer: boolean, variant: number): Made {
    const bounds = m.format !== undefined ? INTEGER_FORMATS[m.format] : undefined;
    if (bounds) integer = true;
    let low = Math.max(m.minimum, bounds?.[0] ?? -Infinity);
    let high = Math.min(m.maximum, bounds?.[1] ?? Infinity);
    const step = integer ? 1 : 0.5;
    if (m.exclusiveMinimum > -Infinity) low = Math.max(low, nextAbove(m.exclusiveMinimum, integer));
    if (m.exclusiveMaximum < Infinity) high = Math.min(high, nextBelow(m.exclusiveMaximum, integer));
    if (integer) {
      low = Math.ceil(low);
      high = Math.floor(high);
    }
    if (low > high) return FAIL;
    const start = low > -Infinity ? low : high < Infinity ? Math.min(1, high) : 1;
    const divisors = integer ? [...m.multipleOf, 1] : m.multipleOf;
    if (divisors.length === 0) {
      const value = start + variant * step;
      return value <= high ? value : start;
    }
    // The smallest multiple of every divisor from `start` on, exact as Ajv checks it (value / d is an integer).
    const base = Math.max(...divisors);
    let found = 0;
    for (let k = Math.ceil(start / base), tries = 0; tries < 1000; k++, tries++) {
      const value = Number((k * base).toPrecision(15));
      if (value > high) break;
      if (value < low) continue;
      if (divisors.every((d) => Number.isInteger(value / d))) {
        if (found === variant) return value;
        found++;
      }
    }
    return FAIL;
  }
}

/** The JSON type of a value, `integer` for whole numbers. */
function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function nextAbove(n: number, integer: boolean): number {
  return integer ? Math.floor(n) + 1 : n + (Math.abs(n) >= 1 ? 0.5 : 0.25) * 1;
}

function nextBelow(n: number, integer: boolean): number {
  return integer ? Math.ceil(n) - 1 : n - (Math.abs(n) >= 1 ? 0.5 : 0.25);
}
