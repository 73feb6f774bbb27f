/**
 * The input and output schemas of node types: the cheap check that tells whether one will compile, and the compile
 * itself. Compiling a schema with Ajv generates code and costs milliseconds, so it happens once, where a schema is
 * used (an executor's first execution of the node type); publishing and loading only run the cheap check, which
 * refuses the common mistakes with the same message a compile would give. Each node type gets its own Ajv instance
 * to compile in: handler authors choose their own `$id`s, and two packages reusing one must not collide.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import type { ValidateFunction } from "ajv";
import addFormatsImport from "ajv-formats";

type FormatsPlugin = (ajv: Ajv2020) => Ajv2020;
// ajv-formats is CommonJS; depending on the loader its default import is the plugin or the module object.
const addFormats: FormatsPlugin =
  (addFormatsImport as unknown as { default?: FormatsPlugin }).default ?? (addFormatsImport as unknown as FormatsPlugin);

const ANY_OBJECT = { type: "object" };

/** Options of `createHandlerAjv`. */
export interface HandlerAjvOptions {
  /**
   * Validate each schema against the 2020-12 meta-schema before compiling it (default true). Turn it off only for
   * schemas that already passed `schemaProblem`: the meta-schema check costs as much as a small compile.
   */
  validateSchema?: boolean;
}

/** A fresh Ajv2020 for handler schemas: unknown keywords tolerated (real schemas carry "example" etc.), every error reported. */
export function createHandlerAjv(options: HandlerAjvOptions = {}): Ajv2020 {
  const ajv = new Ajv2020({ strict: false, allErrors: true, logger: false, validateSchema: options.validateSchema ?? true });
  addFormats(ajv);
  return ajv;
}

/** Compiles one schema of a node type; a missing schema accepts any object, as the contract says (schemas/v1/node_type.schema.json). */
export function compileHandlerSchema(ajv: Ajv2020, schema: Record<string, unknown> | undefined): ValidateFunction {
  return ajv.compile(schema ?? ANY_OBJECT);
}

// ------------------------------------------------------------------------------------------------ the cheap check

let metaAjv: Ajv2020 | undefined;

/** The one Ajv that validates schemas against the meta-schema; it never holds a user schema, so `$id`s cannot collide. */
function metaSchemaAjv(): Ajv2020 {
  metaAjv ??= new Ajv2020({ strict: false, allErrors: false, logger: false });
  return metaAjv;
}

/** Where `$ref`s are resolved from when a schema has no `$id`: a base no real document has. */
const DEFAULT_BASE = "https://nodefabric.invalid/schema.json";
/** Meta-schemas every Ajv2020 holds, so a `$ref` to them compiles. */
const KNOWN_DOCUMENTS = "https://json-schema.org/draft/2020-12/";

/** Keywords whose value is one schema. */
const ONE_SCHEMA = [
  "additionalProperties",
  "items",
  "contains",
  "propertyNames",
  "not",
  "if",
  "then",
  "else",
  "unevaluatedItems",
  "unevaluatedProperties",
  "additionalItems",
  "contentSchema",
];
/** Keywords whose value maps names to schemas. */
const SCHEMA_MAPS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];
/** Keywords whose value is an array of schemas. */
const SCHEMA_LISTS = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];

type JsonObject = Record<string, unknown>;

function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function pointerPart(key: string | number): string {
  return `/${String(key).replace(/~/g, "~0").replace(/\//g, "~1")}`;
}

/** The URI without its fragment. */
function documentOf(url: URL): string {
  const u = new URL(url.href);
  u.hash = "";
  return u.href;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

interface Walk {
  /** Schema resources by their URI (no fragment). */
  resources: Map<string, unknown>;
  /** `$anchor` and `$dynamicAnchor` names, as `<resource URI>#<name>`. */
  anchors: Set<string>;
  refs: Array<{ ref: string; base: string; at: string }>;
  problems: string[];
}

/** Visits every subschema (only where a keyword holds schemas, so data in `const`, `enum` or `examples` is left alone). */
function walk(node: unknown, at: string, base: string, w: Walk): void {
  if (!isObject(node)) return;
  if (typeof node.$id === "string") {
    try {
      base = documentOf(new URL(node.$id, base));
      w.resources.set(base, node);
    } catch {
      w.problems.push(`$id ${JSON.stringify(node.$id)} at ${at || "/"} is not a valid URI reference`);
    }
  }
  for (const key of ["$anchor", "$dynamicAnchor"]) if (typeof node[key] === "string") w.anchors.add(`${base}#${node[key] as string}`);
  for (const key of ["$ref", "$dynamicRef"]) if (typeof node[key] === "string") w.refs.push({ ref: node[key] as string, base, at: `${at}${pointerPart(key)}` });
  if (typeof node.pattern === "string") checkPattern(node.pattern, `${at}/pattern`, w.problems);
  if (isObject(node.patternProperties)) {
    for (const p of Object.keys(node.patternProperties)) checkPattern(p, `${at}/patternProperties${pointerPart(p)}`, w.problems);
  }
  for (const key of ONE_SCHEMA) if (isObject(node[key])) walk(node[key], `${at}${pointerPart(key)}`, base, w);
  for (const key of SCHEMA_MAPS) {
    const map = node[key];
    if (!isObject(map)) continue;
    for (const [name, sub] of Object.entries(map)) walk(sub, `${at}${pointerPart(key)}${pointerPart(name)}`, base, w);
  }
  for (const key of SCHEMA_LISTS) {
    const list = node[key];
    if (Array.isArray(list)) list.forEach((sub, i) => walk(sub, `${at}${pointerPart(key)}${pointerPart(i)}`, base, w));
  }
}

/** Ajv compiles `pattern` and `patternProperties` as `new RegExp(p, "u")`; one that does not compile there is refused. */
function checkPattern(pattern: string, at: string, problems: string[]): void {
  try {
    new RegExp(pattern, "u");
  } catch (err) {
    problems.push(`pattern ${JSON.stringify(pattern)} at ${at} is not a valid regular expression with the u flag: ${messageOf(err)}`);
  }
}

/** The value a JSON Pointer (already percent-decoded) points at inside `doc`, or undefined. */
function resolvePointer(doc: unknown, pointer: string): unknown {
  let node = doc;
  for (const raw of pointer.split("/").slice(1)) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(node) && /^(0|[1-9]\d*)$/.test(key)) node = node[Number(key)];
    else if (isObject(node) && Object.hasOwn(node, key)) node = node[key];
    else return undefined;
  }
  return node;
}

function refProblem(ref: string, base: string, at: string, w: Walk): string | undefined {
  if (ref.startsWith(KNOWN_DOCUMENTS)) return undefined;
  let url: URL;
  try {
    url = new URL(ref, base);
  } catch {
    return `$ref ${JSON.stringify(ref)} at ${at} is not a valid URI reference`;
  }
  const doc = documentOf(url);
  const resource = w.resources.get(doc);
  if (resource === undefined) {
    return `$ref ${JSON.stringify(ref)} at ${at} points outside the schema (a $ref to another document does not resolve here)`;
  }
  let fragment: string;
  try {
    fragment = decodeURIComponent(url.hash.slice(1));
  } catch {
    return `$ref ${JSON.stringify(ref)} at ${at} has a fragment that is not valid percent-encoding`;
  }
  if (fragment === "") return undefined;
  if (fragment.startsWith("/")) {
    return resolvePointer(resource, fragment) === undefined ? `$ref ${JSON.stringify(ref)} at ${at} does not resolve: nothing is at #${fragment}` : undefined;
  }
  return w.anchors.has(`${doc}#${fragment}`) ? undefined : `$ref ${JSON.stringify(ref)} at ${at} does not resolve: no $anchor ${JSON.stringify(fragment)}`;
}

/**
 * Why `schema` would not compile as a handler schema, found without compiling it: it breaks the JSON Schema 2020-12
 * meta-schema (the message is the one Ajv's compile gives: "schema is invalid: …"), a `pattern` or `patternProperties`
 * key is not a regular expression under the `u` flag, or a `$ref` does not resolve inside the document. Undefined
 * when none of these holds; a missing schema (undefined) is fine. Costs a fraction of a compile.
 */
export function schemaProblem(schema: unknown): string | undefined {
  if (schema === undefined) return undefined;
  const ajv = metaSchemaAjv();
  try {
    if (!(ajv.validateSchema(schema as JsonObject) as boolean)) return `schema is invalid: ${ajv.errorsText(ajv.errors)}`;
  } catch (err) {
    // A `$schema` naming a meta-schema Ajv2020 does not hold (draft-07, say) throws here as it would in compile.
    return messageOf(err);
  }
  const w: Walk = { resources: new Map(), anchors: new Set(), refs: [], problems: [] };
  w.resources.set(DEFAULT_BASE, schema);
  walk(schema, "", DEFAULT_BASE, w);
  for (const { ref, base, at } of w.refs) {
    const problem = refProblem(ref, base, at, w);
    if (problem) w.problems.push(problem);
  }
  return w.problems.length > 0 ? w.problems.join("; ") : undefined;
}
