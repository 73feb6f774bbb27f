/**
 * Converted schemas placed under one root: their `$defs` gathered there (shared, never copied; renamed when two
 * differ), and whether a converted schema describes only objects.
 */
import { isRecord, sameJson } from "./json-values.js";
import type { SchemaObject } from "./types.js";

/**
 * Gathers the `$defs` of converted schemas placed under one root (an input schema's properties, an output's
 * `result`): each converted schema's `$ref`s are `#/$defs/…`, so its definitions move to the root. Definitions are
 * shared by reference, never copied; the same name for different definitions is renamed in the schema that brought it.
 */
export class DefsCollector {
  private readonly defs = new Map<string, unknown>();

  /** `converted` without its `$defs`, which join the root's. */
  take(converted: SchemaObject, notes: string[]): SchemaObject {
    if (!isRecord(converted.$defs)) return converted;
    let schema = converted;
    const renames = new Map<string, string>();
    for (const [name, def] of Object.entries(converted.$defs)) {
      const existing = this.defs.get(name);
      if (existing === undefined) this.defs.set(name, def);
      else if (existing !== def && !sameJson(existing, def)) {
        let renamed = `${name}_2`;
        for (let n = 3; this.defs.has(renamed); n++) renamed = `${name}_${n}`;
        renames.set(name, renamed);
      }
    }
    if (renames.size > 0) {
      // Rare: two schemas of one operation gave different definitions one name. That schema is rewritten (copied).
      schema = rewriteDefRefs(converted, renames) as SchemaObject;
      for (const [name, renamed] of renames) this.defs.set(renamed, (schema.$defs as Record<string, unknown>)[renamed]);
      notes.push(`schema definitions renamed to keep them apart: ${[...renames].map(([a, b]) => `${a} → ${b}`).join(", ")}`);
    }
    const { $defs: _defs, ...rest } = schema;
    return rest;
  }

  /** The definition a `#/$defs/<name>` reference names, if gathered. */
  resolve(ref: string): unknown {
    const m = /^#\/\$defs\/([^/]+)$/.exec(ref);
    if (!m) return undefined;
    let name = m[1];
    try {
      name = decodeURIComponent(name);
    } catch {
      // As written.
    }
    return this.defs.get(name.replace(/~1/g, "/").replace(/~0/g, "~"));
  }

  /** Puts the gathered definitions on `root`. */
  attachTo(root: SchemaObject): void {
    if (this.defs.size > 0) root.$defs = Object.fromEntries(this.defs);
  }

  /** `schema` (taken earlier) with the definitions it may use, as a schema of its own. */
  standalone(schema: SchemaObject): SchemaObject {
    return this.defs.size > 0 ? { ...schema, $defs: Object.fromEntries(this.defs) } : schema;
  }
}

function rewriteDefRefs(value: unknown, renames: Map<string, string>): unknown {
  if (Array.isArray(value)) return value.map((item) => rewriteDefRefs(item, renames));
  if (!isRecord(value)) return value;
  const out: Array<[string, unknown]> = [];
  for (const [key, child] of Object.entries(value)) {
    if (key === "$ref" && typeof child === "string") {
      const match = /^#\/\$defs\/([^/]+)(.*)$/.exec(child);
      const renamed = match ? renames.get(decodeURIComponent(match[1])) : undefined;
      out.push([key, renamed ? `#/$defs/${encodeURIComponent(renamed)}${match![2]}` : child]);
    } else if (key === "$defs" && isRecord(child)) {
      out.push([key, Object.fromEntries(Object.entries(child).map(([name, def]) => [renames.get(name) ?? name, rewriteDefRefs(def, renames)]))]);
    } else {
      out.push([key, rewriteDefRefs(child, renames)]);
    }
  }
  return Object.fromEntries(out);
}

/** True when every value valid under `schema` (a converted schema, `$ref`s into its `$defs`) is a JSON object. */
export function describesOnlyObjects(schema: SchemaObject): boolean {
  const defs = isRecord(schema.$defs) ? schema.$defs : {};
  const check = (s: unknown, seen: Set<string>): boolean => {
    if (!isRecord(s)) return false;
    if (typeof s.$ref === "string") {
      const match = /^#\/\$defs\/(.+)$/.exec(s.$ref);
      if (!match) return false;
      const name = decodeURIComponent(match[1]).replace(/~1/g, "/").replace(/~0/g, "~");
      if (seen.has(name)) return false;
      const target = defs[name];
      const next = new Set(seen).add(name);
      if (check(target, next)) return true;
      // A sibling of $ref (2020-12 allows them) may say object too.
      const { $ref: _ignored, ...rest } = s;
      return Object.keys(rest).length > 0 && check(rest, next);
    }
    if (s.type === "object") return true;
    if (Array.isArray(s.type)) return s.type.length === 1 && s.type[0] === "object";
    if (s.type !== undefined) return false;
    if (Array.isArray(s.allOf) && s.allOf.some((sub) => check(sub, seen))) return true;
    for (const key of ["oneOf", "anyOf"] as const) {
      const list = s[key];
      if (Array.isArray(list) && list.length > 0) return list.every((sub) => check(sub, seen));
    }
    // No type but object keywords: an object is what the document means, and the answer is checked at run time.
    return s.properties !== undefined || s.additionalProperties !== undefined || s.required !== undefined;
  };
  return check(schema, new Set());
}
