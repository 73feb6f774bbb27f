/**
 * `defineAtomicSet`: how a handler package declares many atomic node types that share one handler, such as the
 * operations of an API, without holding their NodeTypes in memory. The NodeTypes live as JSON files in a directory,
 * listed by a small `index.json`; only the index is read when the package is imported, and an executor reads a
 * node type's file when it first runs it.
 *
 * ```ts
 * export const operations = defineAtomicSet({ directory: new URL("../node-types/", import.meta.url), handler: callOperation });
 * export default operations;
 * ```
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { NodeType } from "@nodefabric/schemas";
import { defineAtomic, SDK_VERSION } from "./define-atomic.js";
import type { AtomicDefinition, AtomicSet, AtomicSetEntry, HandlerFn, JsonObject } from "./types.js";

/** Marks sets with a symbol from the global registry, so an executor recognises sets made by another copy of the SDK. */
export const ATOMIC_SET_BRAND: unique symbol = Symbol.for("nodefabric.atomic-set") as never;

/** The file of a set's directory that lists its node types. */
export const SET_INDEX_FILE = "index.json";

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The directory as an absolute path: a `file:` URL (`new URL("../node-types/", import.meta.url)`) or a path. */
function directoryPath(directory: unknown): string {
  if (directory instanceof URL || (typeof directory === "string" && directory.startsWith("file:"))) {
    const url = directory instanceof URL ? directory : new URL(directory);
    if (url.protocol !== "file:") throw new TypeError(`defineAtomicSet: directory must be a file: URL or a path, not ${url.href}`);
    return path.resolve(fileURLToPath(url));
  }
  if (typeof directory === "string" && directory !== "") return path.resolve(directory);
  throw new TypeError('defineAtomicSet: directory is required: the folder of index.json, such as new URL("../node-types/", import.meta.url)');
}

/** Reads and checks `index.json`; every problem is a TypeError naming the file and the entry at fault. */
function readIndex(directory: string): AtomicSetEntry[] {
  const file = path.join(directory, SET_INDEX_FILE);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new TypeError(
      code === "ENOENT" ? `defineAtomicSet: ${file} does not exist; the directory of a set holds index.json and one NodeType file per node type` : `defineAtomicSet: cannot read ${file}: ${messageOf(err)}`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new TypeError(`defineAtomicSet: ${file} is not valid JSON: ${messageOf(err)}`);
  }
  const list = isPlainObject(parsed) ? parsed.node_types : undefined;
  if (!Array.isArray(list)) throw new TypeError(`defineAtomicSet: ${file} must be an object { "node_types": [{ "node_type_id", "version", "file" }, ...] }`);
  const seen = new Set<string>();
  return list.map((item, i): AtomicSetEntry => {
    const where = `defineAtomicSet: ${file}: node_types[${i}]`;
    if (!isPlainObject(item)) throw new TypeError(`${where} must be an object { "node_type_id", "version", "file" }`);
    const { node_type_id, version, file: rel } = item;
    if (typeof node_type_id !== "string" || node_type_id === "") throw new TypeError(`${where}.node_type_id must be a non-empty string`);
    if (typeof version !== "string" || version === "") throw new TypeError(`${where}.version of ${node_type_id} must be a non-empty string`);
    if (typeof rel !== "string" || rel === "") throw new TypeError(`${where}.file of ${node_type_id}@${version} must be a non-empty string`);
    const full = path.resolve(directory, rel);
    if (path.isAbsolute(rel) || !full.startsWith(directory + path.sep)) {
      throw new TypeError(`${where}.file of ${node_type_id}@${version} must be a path inside the set's directory, not ${JSON.stringify(rel)}`);
    }
    const key = `${node_type_id}@${version}`;
    if (seen.has(key)) throw new TypeError(`${where}: ${key} is listed twice; each (node_type_id, version) must be listed once`);
    seen.add(key);
    return Object.freeze({ node_type_id, version, file: rel });
  });
}

/**
 * Reads the NodeType file of one entry and checks what the SDK can check without a schema validator: it is a JSON
 * object whose node_type_id and version are the entry's and whose kind, when given, is "atomic" (a missing kind is
 * set). Throws an Error naming the file as index.json does, with the bare `problem` ("does not exist") as a property;
 * the executor validates the result against the NodeType schema.
 */
export function readSetMember(directory: string, entry: AtomicSetEntry): NodeType & { kind: "atomic" } {
  // Messages name the file as index.json does (relative): they reach executor answers, which show no local paths.
  const fail = (problem: string) => Object.assign(new Error(`the NodeType file of ${entry.node_type_id}@${entry.version} (${entry.file}) ${problem}`), { problem });
  let text: string;
  try {
    text = readFileSync(path.resolve(directory, entry.file), "utf8");
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw fail(code === "ENOENT" ? "does not exist" : `cannot be read (${typeof code === "string" ? code : messageOf(err)})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw fail(`is not valid JSON: ${messageOf(err)}`);
  }
  if (!isPlainObject(parsed)) throw fail("must hold a JSON object");
  if (parsed.node_type_id !== entry.node_type_id || parsed.version !== entry.version) {
    throw fail(`holds ${String(parsed.node_type_id)}@${String(parsed.version)}; its node_type_id and version must be the ones index.json lists`);
  }
  if (parsed.kind !== undefined && parsed.kind !== "atomic") throw fail(`has kind ${JSON.stringify(parsed.kind)}; a set holds atomic node types`);
  return { ...parsed, kind: "atomic" } as NodeType & { kind: "atomic" };
}

/**
 * Declares a set of atomic node types served by one `handler`, their NodeTypes in the JSON files `directory`'s
 * `index.json` lists (`{ "node_types": [{ "node_type_id", "version", "file" }] }`). Reads only the index, at once;
 * a missing or malformed index throws a TypeError saying what is wrong.
 */
export function defineAtomicSet<I = JsonObject, O = JsonObject>(spec: { directory: URL | string; handler: HandlerFn<I, O> }): AtomicSet<I, O> {
  if (typeof spec !== "object" || spec === null) throw new TypeError("defineAtomicSet: pass { directory, handler }");
  if (typeof spec.handler !== "function") throw new TypeError("defineAtomicSet: handler must be a function");
  const directory = directoryPath(spec.directory);
  const entries = Object.freeze(readIndex(directory));
  const handler = spec.handler;
  const entryOf = (nodeTypeId: string, version: string): AtomicSetEntry => {
    const entry = entries.find((e) => e.node_type_id === nodeTypeId && e.version === version);
    if (!entry) throw new TypeError(`defineAtomicSet: ${nodeTypeId}@${version} is not in the set of ${directory} (see its index.json)`);
    return entry;
  };
  const set = {
    kind: "atomic-set" as const,
    sdkVersion: SDK_VERSION,
    directory,
    entries,
    handler,
    load(nodeTypeId: string, version: string) {
      return readSetMember(directory, entryOf(nodeTypeId, version));
    },
    get(nodeTypeId: string, version?: string): AtomicDefinition<I, O> {
      let v = version;
      if (v === undefined) {
        const versions = entries.filter((e) => e.node_type_id === nodeTypeId).map((e) => e.version);
        if (versions.length === 0) throw new TypeError(`defineAtomicSet: ${nodeTypeId} is not in the set of ${directory} (see its index.json)`);
        if (versions.length > 1) throw new TypeError(`defineAtomicSet: ${nodeTypeId} has versions ${versions.join(", ")} in the set; pass the version to get()`);
        v = versions[0]!;
      }
      return defineAtomic<I, O>({ nodeType: set.load(nodeTypeId, v), handler });
    },
  };
  Object.defineProperty(set, ATOMIC_SET_BRAND, { value: true });
  return Object.freeze(set);
}

/** True for a set made by `defineAtomicSet` of any installed copy of the SDK. */
export function isAtomicSet(value: unknown): value is AtomicSet {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string | symbol, unknown>;
  return v[ATOMIC_SET_BRAND] === true && v.kind === "atomic-set" && typeof v.directory === "string" && Array.isArray(v.entries) && typeof v.handler === "function";
}
