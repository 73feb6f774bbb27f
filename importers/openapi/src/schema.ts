/**
 * OpenAPI Schema Objects made into the self-contained JSON Schema 2020-12 that node types carry. The document keeps
 * its `$ref`s, and so do the results: each referenced schema becomes an entry of the result's top-level `$defs`,
 * converted once per direction and shared (the same object) by every result that reaches it, so a component used by
 * a thousand operations costs its size once, not a thousand times. Callers serialise results; they must not change
 * them. A result whose definitions would pass the size budget is trimmed from its deepest references up.
 */
import { translatePattern } from "./regex-dialects.js";
import type { OpenApiDocument, SchemaObject } from "./types.js";

/** Which side of the operation a schema describes: `readOnly` properties exist only in answers, `writeOnly` ones only in requests. */
export type SchemaDirection = "request" | "response";

/** Options of createSchemaConverter. */
export interface SchemaConverterOptions {
  /**
   * Most bytes a result may take serialised, `$defs` included (default DEFAULT_MAX_SCHEMA_BYTES). Above it, the
   * deepest definitions are replaced by permissive ones that only describe what was left out.
   */
  maxSchemaBytes?: number;
}

/** Converts the schemas of one document; see createSchemaConverter. */
export interface SchemaConverter {
  /**
   * `schema` (an OpenAPI Schema Object of the document, `$ref`s and all) as a self-contained JSON Schema 2020-12 for
   * `direction`; what was changed on the way (patterns translated or dropped, `$ref`s that do not resolve, trimming)
   * is added to `notes` as plain sentences, each once. The result and its `$defs` entries are shared: do not modify.
   */
  convert(schema: unknown, direction: SchemaDirection, notes?: string[]): SchemaObject;
}

/**
 * Budget of one converted schema, `$defs` included: 256 KiB. GitHub's largest answers (a repository with its
 * organisation, template and parent) need about 60 KiB and every GitHub schema fits; a few of Stripe's, whose objects
 * expand into one another, would need several MiB and are trimmed at their deepest references.
 */
export const DEFAULT_MAX_SCHEMA_BYTES = 256 * 1024;

/** OpenAPI-only keywords, and keywords that mean nothing (or something else) once the schema leaves the document. */
const DROPPED_KEYWORDS = new Set([
  "discriminator",
  "xml",
  "externalDocs",
  "nullable",
  "x-nullable",
  "example",
  "$schema",
  "$id",
  "$anchor",
  "$dynamicAnchor",
  "$recursiveAnchor",
  "$defs",
  "definitions",
  "$vocabulary",
]);

/** Keywords whose value is one subschema (a schema object or a boolean). */
const ONE_SCHEMA_KEYWORDS = new Set([
  "additionalProperties",
  "not",
  "if",
  "then",
  "else",
  "contains",
  "propertyNames",
  "unevaluatedProperties",
  "unevaluatedItems",
  "contentSchema",
]);

/** Keywords whose value is a non-empty list of subschemas. */
const SCHEMA_LIST_KEYWORDS = new Set(["allOf", "anyOf", "oneOf", "prefixItems"]);

/** Keywords that must be non-negative integers. */
const COUNT_KEYWORDS = new Set(["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"]);

/** Keywords that must be numbers. */
const NUMBER_KEYWORDS = new Set(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]);

/** Keywords that must be strings, or booleans. */
const STRING_KEYWORDS = new Set(["title", "description", "format", "contentMediaType", "contentEncoding", "$comment"]);
const BOOLEAN_KEYWORDS = new Set(["deprecated", "readOnly", "writeOnly", "uniqueItems"]);

/** Annotations that stay outside when a schema is wrapped (`anyOf` with null). */
const ANNOTATIONS = ["title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"];

/** Annotations kept beside a `$ref` in OpenAPI 3.0, where its other siblings are ignored. */
const REF_SIBLINGS_30 = new Set(["title", "description", "default", "example", "examples", "deprecated", "readOnly", "writeOnly", "nullable", "x-nullable"]);

/** JSON Schema's types, and what documents write for them by mistake. */
const TYPES = new Set(["string", "number", "integer", "boolean", "object", "array", "null"]);
const TYPE_MISTAKES: Readonly<Record<string, { type: string; format?: string }>> = {
  file: { type: "string", format: "binary" },
  int: { type: "integer" },
  long: { type: "integer", format: "int64" },
  float: { type: "number", format: "float" },
  double: { type: "number", format: "double" },
  bool: { type: "boolean" },
  date: { type: "string", format: "date" },
  datetime: { type: "string", format: "date-time" },
  "date-time": { type: "string", format: "date-time" },
  map: { type: "object" },
  list: { type: "array" },
};

/** Pointer tokens left out of definition names (`#/components/schemas/Pet/properties/tags` → `Pet_tags`). */
const NAME_NOISE = new Set(["components", "schemas", "definitions", "$defs", "properties", "content", "schema", "paths", "responses", "requestBodies", "parameters", "headers"]);
const NAME_MAX = 80;

/** Where `$ref`s of converted schemas point. */
const DEFS_PREFIX = "#/$defs/";

/** One referenced schema, converted for one direction. */
interface Definition {
  name: string;
  /** The converted schema; undefined until its turn in the queue comes. */
  schema: SchemaObject | boolean | undefined;
  /** The raw schema of the document it is made from. */
  source: unknown;
  /** Names of the definitions it refers to directly. */
  refs: string[];
  /** What was changed while converting it. */
  notes: string[];
  /** Serialised size in bytes. */
  bytes: number;
}

/** The state of converting one schema (a root or a definition). */
interface Walk {
  direction: SchemaDirection;
  refs: Set<string>;
  notes: string[];
  ancestors: Set<object>;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The tokens of a local `$ref` (`#/a/b~1c` → ["a", "b/c"]), percent-decoded; undefined when it is not a local JSON Pointer. */
function pointerTokens(ref: string): string[] | undefined {
  if (!ref.startsWith("#")) return undefined;
  const pointer = ref.slice(1);
  if (pointer === "") return [];
  if (!pointer.startsWith("/")) return undefined;
  return pointer
    .slice(1)
    .split("/")
    .map((raw) => {
      let token = raw;
      try {
        token = decodeURIComponent(raw);
      } catch {
        // Not percent-encoded after all.
      }
      return token.replace(/~1/g, "/").replace(/~0/g, "~");
    });
}

function targetOf(document: unknown, tokens: string[]): unknown {
  let current = document;
  for (const token of tokens) {
    if (Array.isArray(current)) {
      if (!/^\d+$/.test(token)) return undefined;
      current = current[Number(token)];
    } else if (isRecord(current) && Object.prototype.hasOwnProperty.call(current, token)) {
      current = current[token];
    } else {
      return undefined;
    }
  }
  return current;
}

function addNote(notes: string[], note: string): void {
  if (!notes.includes(note)) notes.push(note);
}

function byteLength(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value));
}

/**
 * A converter for the schemas of `document` (internal `$ref`s kept, as loadOpenApi gives it). Rules:
 * - every `$ref` becomes `#/$defs/<name>` and its target an entry of the result's `$defs`: names are readable and
 *   unique in the document (`Pet`, `Pet_tags` for `#/components/schemas/Pet/properties/tags`); recursion stays a `$ref`;
 *   a `$ref` that does not resolve accepts anything, with a note; each target is converted once per direction;
 * - OpenAPI 3.0 `nullable` (also beside a `$ref`): `"null"` added to `type` and `enum`, or `anyOf` with null around
 *   schemas made of `$ref`, `allOf`, `oneOf`…; boolean `exclusiveMinimum`/`exclusiveMaximum` become numeric;
 * - beside a `$ref`, 3.0 keeps only annotations and `nullable` (as 3.0 says); 3.1 keeps all (as 2020-12 allows);
 * - `example` → `examples`; `discriminator`, `xml`, `externalDocs`, `$schema`, `$id`, `id`, `x-*` are dropped;
 * - `readOnly` properties are left out of requests and `writeOnly` ones out of answers (from `required` too);
 * - `type: file` → a binary string; tuple `items` → `prefixItems`; `dependencies` → `dependentRequired`/`dependentSchemas`;
 * - `pattern` and `patternProperties` keys are translated to ECMAScript regex (translatePattern), or dropped with a note;
 * - values a 2020-12 validator would refuse (a `required: true`, `minimum: "0"`, an empty `oneOf`) are mended or dropped;
 * - a schema that is not an object (or boolean) is `{}`.
 */
export function createSchemaConverter(document: OpenApiDocument, options: SchemaConverterOptions = {}): SchemaConverter {
  const maxBytes = options.maxSchemaBytes ?? DEFAULT_MAX_SCHEMA_BYTES;
  const isOpenApi30 = typeof document.openapi === "string" && document.openapi.startsWith("3.0");
  /** Definition names by canonical pointer, shared by both directions. */
  const names = new Map<string, string>();
  const takenNames = new Set<string>();
  const definitions: Record<SchemaDirection, Map<string, Definition>> = { request: new Map(), response: new Map() };
  /** Definitions registered and not converted yet (converting through a queue keeps the stack flat on deep documents). */
  let queue: Array<{ direction: SchemaDirection; definition: Definition }> = [];

  function nameFor(tokens: string[]): string {
    const key = JSON.stringify(tokens);
    const known = names.get(key);
    if (known !== undefined) return known;
    const parts = tokens
      .filter((token) => !NAME_NOISE.has(token))
      .map((token) => token.replace(/[^A-Za-z0-9_.-]+/g, "_").replace(/^_+|_+$/g, ""))
      .filter((part) => part !== "");
    let base = parts.join("_") || "schema";
    if (base.length > NAME_MAX) base = `${base.slice(0, NAME_MAX - 9)}_${shortHash(key)}`;
    let name = base;
    for (let n = 2; takenNames.has(name); n++) name = `${base}_${n}`;
    takenNames.add(name);
    names.set(key, name);
    return name;
  }

  /** The definition a local pointer names (registered and queued on first use), or undefined when nothing is there. */
  function definitionAt(tokens: string[], direction: SchemaDirection): Definition | undefined {
    const name = nameFor(tokens);
    const known = definitions[direction].get(name);
    if (known) return known;
    const source = targetOf(document, tokens);
    if (source === undefined) return undefined;
    const definition: Definition = { name, schema: undefined, source, refs: [], notes: [], bytes: 0 };
    definitions[direction].set(name, definition);
    queue.push({ direction, definition });
    return definition;
  }

  function drain(): void {
    for (let i = 0; i < queue.length; i++) {
      const { direction, definition } = queue[i];
      const walk: Walk = { direction, refs: new Set(), notes: definition.notes, ancestors: new Set() };
      definition.schema = convertNode(definition.source, walk, definition.name);
      definition.refs = [...walk.refs];
      definition.bytes = byteLength(definition.schema);
      definition.source = undefined;
    }
    queue = [];
  }

  /** Follows a `$ref` chain to the schema it ends at (for readOnly/writeOnly checks), raw. */
  function follow(value: unknown): unknown {
    let current = value;
    for (let hops = 0; hops < 32 && isRecord(current) && typeof current.$ref === "string"; hops++) {
      const tokens = pointerTokens(current.$ref);
      if (tokens === undefined) return current;
      const next = targetOf(document, tokens);
      if (next === undefined) return current;
      current = next;
    }
    return current;
  }

  /** True when a property schema is marked `readOnly` (requests) or `writeOnly` (answers), through `$ref` and `allOf`. */
  function hiddenIn(value: unknown, direction: SchemaDirection, depth = 0): boolean {
    const flag = direction === "request" ? "readOnly" : "writeOnly";
    let current = value;
    for (let hops = 0; hops < 32 && isRecord(current); hops++) {
      if (current[flag] === true) return true;
      if (depth < 3 && Array.isArray(current.allOf) && current.allOf.some((part) => hiddenIn(part, direction, depth + 1))) return true;
      if (typeof current.$ref !== "string") return false;
      const tokens = pointerTokens(current.$ref);
      current = tokens === undefined ? undefined : targetOf(document, tokens);
    }
    return false;
  }

  /** Names of the properties hidden in `direction` in `schema` and its `allOf` parts (followed through `$ref`). */
  function hiddenNames(schema: Record<string, unknown>, direction: SchemaDirection, depth = 0): Set<string> {
    const out = new Set<string>();
    if (isRecord(schema.properties)) for (const [name, sub] of Object.entries(schema.properties)) if (hiddenIn(sub, direction)) out.add(name);
    if (depth < 3 && Array.isArray(schema.allOf)) {
      for (const part of schema.allOf) {
        const followed = follow(part);
        if (isRecord(followed)) for (const name of hiddenNames(followed, direction, depth + 1)) out.add(name);
      }
    }
    return out;
  }

  function convertNode(node: unknown, walk: Walk, label: string, hiddenRequired?: Set<string>): SchemaObject | boolean {
    if (node === true || node === false) return node;
    if (!isRecord(node)) return {};
    if (walk.ancestors.has(node)) return {};
    walk.ancestors.add(node);
    try {
      return convertObject(node, walk, label, hiddenRequired);
    } finally {
      walk.ancestors.delete(node);
    }
  }

  function convertRef(node: Record<string, unknown>, walk: Walk, label: string): SchemaObject {
    const ref = node.$ref as string;
    let tokens = pointerTokens(ref);
    // A $ref to a bare $ref: go straight to the end of the chain, so no definition is only an alias.
    for (let hops = 0; tokens !== undefined && hops < 32; hops++) {
      const target = targetOf(document, tokens);
      if (!isRecord(target) || typeof target.$ref !== "string" || Object.keys(target).length !== 1) break;
      const next = pointerTokens(target.$ref);
      if (next === undefined || JSON.stringify(next) === JSON.stringify(tokens)) break;
      tokens = next;
    }
    const definition = tokens === undefined ? undefined : definitionAt(tokens, walk.direction);
    if (definition === undefined) {
      addNote(walk.notes, `the $ref ${ref} of ${label || "the schema"} does not resolve in the document; any value is accepted there`);
      return {};
    }
    walk.refs.add(definition.name);
    return { $ref: `${DEFS_PREFIX}${definition.name}` };
  }

  function convertObject(node: Record<string, unknown>, walk: Walk, label: string, hiddenRequired?: Set<string>): SchemaObject {
    let out: SchemaObject = {};
    const where = label || "the schema";
    const hasRef = typeof node.$ref === "string";
    if (hasRef) out = convertRef(node, walk, label);
    const hidden = isRecord(node.properties) || Array.isArray(node.allOf) ? hiddenNames(node, walk.direction) : new Set<string>();
    const droppedRequired = new Set<string>([...hidden, ...(hiddenRequired ?? [])]);

    for (const [key, value] of Object.entries(node)) {
      if (key === "$ref" || DROPPED_KEYWORDS.has(key) || key.startsWith("x-")) continue;
      if (hasRef && isOpenApi30 && !REF_SIBLINGS_30.has(key)) continue;
      if (key === "id" && typeof value === "string") continue;
      if (key === "$dynamicRef" || key === "$recursiveRef") {
        addNote(walk.notes, `the ${key} of ${where} is not followed; any value is accepted there`);
        continue;
      }
      if (key === "properties") {
        if (!isRecord(value)) continue;
        const properties: Record<string, unknown> = {};
        for (const [name, sub] of Object.entries(value)) {
          if (hidden.has(name) && hiddenIn(sub, walk.direction)) continue;
          properties[name] = convertNode(sub, walk, `${label ? `${label}.` : ""}${name}`);
        }
        out.properties = properties;
      } else if (key === "patternProperties") {
        if (!isRecord(value)) continue;
        const patterns: Record<string, unknown> = {};
        for (const [pattern, sub] of Object.entries(value)) {
          const translated = translatePattern(pattern, `the patternProperties of ${where}`);
          if (translated.note) addNote(walk.notes, translated.pattern === undefined ? translated.note.replace(/; any string is accepted there$/, "; properties it named are checked as any other") : translated.note);
          if (translated.pattern !== undefined) patterns[translated.pattern] = convertNode(sub, walk, `${where}[${pattern}]`);
        }
        out.patternProperties = patterns;
      } else if (key === "dependentSchemas") {
        if (isRecord(value)) out.dependentSchemas = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, convertNode(sub, walk, label)]));
      } else if (key === "dependencies") {
        if (!isRecord(value)) continue;
        const required: Record<string, string[]> = {};
        const schemas: Record<string, unknown> = {};
        for (const [name, dep] of Object.entries(value)) {
          if (Array.isArray(dep)) required[name] = [...new Set(dep.filter((d): d is string => typeof d === "string"))];
          else schemas[name] = convertNode(dep, walk, label);
        }
        if (Object.keys(required).length > 0) out.dependentRequired = { ...(out.dependentRequired as object), ...required };
        if (Object.keys(schemas).length > 0) out.dependentSchemas = { ...(out.dependentSchemas as object), ...schemas };
      } else if (key === "dependentRequired") {
        if (isRecord(value)) out.dependentRequired = { ...(out.dependentRequired as object), ...value };
      } else if (key === "items") {
        if (Array.isArray(value)) {
          // Draft-4 tuple `items` is `prefixItems` in 2020-12; `additionalItems` becomes `items`.
          if (value.length > 0) out.prefixItems = value.map((sub, i) => convertNode(sub, walk, `${where}[${i}]`));
          const extra = node.additionalItems;
          if (extra === false || isRecord(extra)) out.items = convertNode(extra, walk, `${where}[]`);
        } else if (isRecord(value) || typeof value === "boolean") {
          out.items = convertNode(value, walk, `${where}[]`);
        }
      } else if (key === "additionalItems") {
        continue;
      } else if (ONE_SCHEMA_KEYWORDS.has(key)) {
        if (isRecord(value) || typeof value === "boolean") out[key] = convertNode(value, walk, key === "additionalProperties" ? `${where}[*]` : label);
      } else if (SCHEMA_LIST_KEYWORDS.has(key)) {
        if (!Array.isArray(value) || value.length === 0) continue;
        // Inline allOf parts must not require what another part hides (`required: [id]` beside a readOnly `id`).
        out[key] = value.map((sub) => convertNode(sub, walk, label, key === "allOf" ? droppedRequired : undefined));
      } else if (key === "required") {
        if (!Array.isArray(value)) continue;
        const required = [...new Set(value.filter((name): name is string => typeof name === "string" && !droppedRequired.has(name)))];
        if (required.length > 0) out.required = required;
      } else if (key === "type") {
        const type = convertType(value, out);
        if (type !== undefined) out.type = type;
        else addNote(walk.notes, `the type ${JSON.stringify(value)} of ${where} is not a JSON Schema type; it is not checked`);
      } else if (key === "pattern") {
        if (typeof value !== "string") continue;
        const translated = translatePattern(value, where);
        if (translated.note) addNote(walk.notes, translated.note);
        if (translated.pattern !== undefined) out.pattern = translated.pattern;
      } else if (key === "enum") {
        if (Array.isArray(value)) out.enum = value;
      } else if (key === "examples") {
        if (Array.isArray(value)) out.examples = value;
      } else if (COUNT_KEYWORDS.has(key)) {
        const n = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
        if (typeof n === "number" && Number.isInteger(n) && n >= 0) out[key] = n;
      } else if (NUMBER_KEYWORDS.has(key)) {
        if (typeof value === "boolean") continue; // 3.0's boolean exclusive bounds: below.
        const n = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
        if (typeof n === "number" && Number.isFinite(n) && (key !== "multipleOf" || n > 0)) out[key] = n;
      } else if (STRING_KEYWORDS.has(key)) {
        if (typeof value === "string") out[key] = value;
      } else if (BOOLEAN_KEYWORDS.has(key)) {
        if (typeof value === "boolean") out[key] = value;
      } else {
        // `const`, `default` and keywords a validator ignores are kept as they are (shared, never copied).
        out[key] = value;
      }
    }

    if (node.example !== undefined && out.examples === undefined) out.examples = [node.example];
    for (const [flag, bound] of [
      ["exclusiveMinimum", "minimum"],
      ["exclusiveMaximum", "maximum"],
    ] as const) {
      if (typeof node[flag] !== "boolean") continue;
      if (node[flag] === true && typeof out[bound] === "number") {
        out[flag] = out[bound];
        delete out[bound];
      }
    }
    if (node.nullable === true || node["x-nullable"] === true) out = withNull(out);
    return out;
  }

  function convert(schema: unknown, direction: SchemaDirection, notes: string[] = []): SchemaObject {
    const walk: Walk = { direction, refs: new Set(), notes: [], ancestors: new Set() };
    const converted = convertNode(schema, walk, "");
    drain();
    const root: SchemaObject = converted === true ? {} : converted === false ? { not: {} } : converted;
    const result = withDefinitions(root, [...walk.refs], definitions[direction], maxBytes, direction, walk.notes);
    for (const note of walk.notes) addNote(notes, note);
    return result;
  }

  return { convert };
}

/** `type` as 2020-12 has it (common mistakes mended, `file` a binary string, setting `format` on `out`), or undefined. */
function convertType(value: unknown, out: SchemaObject): string | string[] | undefined {
  const one = (t: unknown): string | undefined => {
    if (typeof t !== "string") return undefined;
    const lower = t.toLowerCase();
    if (TYPES.has(lower)) return lower;
    const mended = TYPE_MISTAKES[lower];
    if (mended === undefined) return undefined;
    if (mended.format && out.format === undefined) out.format = mended.format;
    return mended.type;
  };
  if (Array.isArray(value)) {
    const types = [...new Set(value.map(one).filter((t): t is string => t !== undefined))];
    return types.length === 0 ? undefined : types.length === 1 ? types[0] : types;
  }
  return one(value);
}

/** `out` also accepting null: in `type` and `enum` where that says it all, else as `anyOf` with null around it. */
function withNull(out: SchemaObject): SchemaObject {
  const composite = ["$ref", "allOf", "anyOf", "oneOf", "not", "const", "if"].some((key) => out[key] !== undefined);
  if (!composite) {
    if (typeof out.type === "string") out.type = out.type === "null" ? "null" : [out.type, "null"];
    else if (Array.isArray(out.type) && !out.type.includes("null")) out.type = [...out.type, "null"];
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
    return out;
  }
  const inner: SchemaObject = {};
  const outer: SchemaObject = {};
  for (const [key, value] of Object.entries(out)) (ANNOTATIONS.includes(key) ? outer : inner)[key] = value;
  if (Array.isArray(inner.anyOf) && Object.keys(inner).length === 1) {
    outer.anyOf = inner.anyOf.some((b) => isRecord(b) && b.type === "null") ? inner.anyOf : [...inner.anyOf, { type: "null" }];
  } else {
    outer.anyOf = [inner, { type: "null" }];
  }
  return outer;
}

/**
 * `root` with the `$defs` it reaches. Above `maxBytes`, the definitions farthest from the root (in references) are
 * replaced by permissive ones, keeping as many levels whole as fit, then as many of the next level as fit.
 */
function withDefinitions(root: SchemaObject, rootRefs: string[], all: Map<string, Definition>, maxBytes: number, direction: SchemaDirection, notes: string[]): SchemaObject {
  if (rootRefs.length === 0) return root;
  const depth = new Map<string, number>();
  const order: Definition[] = [];
  let frontier = rootRefs;
  for (let level = 1; frontier.length > 0; level++) {
    const next: string[] = [];
    for (const name of frontier) {
      if (depth.has(name)) continue;
      depth.set(name, level);
      const definition = all.get(name)!;
      order.push(definition);
      for (const ref of definition.refs) if (!depth.has(ref)) next.push(ref);
    }
    frontier = next;
  }
  const rootBytes = byteLength(root) + 12;
  const entryBytes = (d: Definition) => d.bytes + d.name.length + 4;
  let total = rootBytes;
  for (const d of order) total += entryBytes(d);
  const attach = (defs: Record<string, unknown>) => ({ ...root, $defs: defs });

  if (total <= maxBytes) {
    for (const d of order) for (const note of d.notes) addNote(notes, note);
    return attach(Object.fromEntries(order.map((d) => [d.name, d.schema])));
  }

  const kib = Math.floor(maxBytes / 1024);
  const stubOf = (name: string) => ({ description: `${name}: not checked (schema trimmed to stay under ${kib} KiB)` });
  const stubBytes = (name: string) => byteLength(stubOf(name)) + name.length + 4;
  // Keep every definition at depth <= kept whole; those they refer to at depth kept+1 become stubs.
  const levels = new Map<number, Definition[]>();
  for (const d of order) {
    const level = depth.get(d.name)!;
    if (!levels.has(level)) levels.set(level, []);
    levels.get(level)!.push(d);
  }
  let kept = 0;
  let size = rootBytes + rootRefs.reduce((sum, name) => sum + stubBytes(name), 0);
  for (let level = 1; levels.has(level); level++) {
    const nextStubs = levels.get(level + 1) ?? [];
    const grown = size + levels.get(level)!.reduce((sum, d) => sum + entryBytes(d) - stubBytes(d.name), 0) + nextStubs.reduce((sum, d) => sum + stubBytes(d.name), 0);
    if (grown > maxBytes) break;
    size = grown;
    kept = level;
  }
  const whole = new Set(order.filter((d) => depth.get(d.name)! <= kept).map((d) => d.name));
  const stubs = new Set(order.filter((d) => depth.get(d.name) === kept + 1).map((d) => d.name));
  // Then the next level, one definition at a time in the order reached, while it fits.
  for (const d of levels.get(kept + 1) ?? []) {
    const newStubs = d.refs.filter((ref) => !whole.has(ref) && !stubs.has(ref) && ref !== d.name);
    const cost = entryBytes(d) - stubBytes(d.name) + newStubs.reduce((sum, ref) => sum + stubBytes(ref), 0);
    if (size + cost > maxBytes) continue;
    size += cost;
    whole.add(d.name);
    stubs.delete(d.name);
    for (const ref of newStubs) stubs.add(ref);
  }
  if (size > maxBytes) {
    addNote(notes, `the ${direction} schema would take more than ${kib} KiB even without its definitions; it is not checked`);
    return { description: `not checked (schema trimmed to stay under ${kib} KiB)` };
  }
  const defs: Record<string, unknown> = {};
  for (const d of order) {
    if (whole.has(d.name)) {
      defs[d.name] = d.schema;
      for (const note of d.notes) addNote(notes, note);
    } else if (stubs.has(d.name)) {
      defs[d.name] = stubOf(d.name);
    }
  }
  const left = [...stubs];
  addNote(
    notes,
    `the ${direction} schema would take ${Math.ceil(total / 1024)} KiB, so it was trimmed to stay under ${kib} KiB: ${left.length} definition${left.length === 1 ? "" : "s"} ${
      kept + 1 === 1 ? "it refers to directly" : `${kept + 1} references deep or more`
    } ${left.length === 1 ? "is" : "are"} not checked (${left.slice(0, 5).join(", ")}${left.length > 5 ? ", …" : ""})`,
  );
  return attach(defs);
}

/** A short, stable hash of a string (FNV-1a), for names cut to length. */
function shortHash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, "0");
}
