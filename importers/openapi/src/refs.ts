/**
 * The document's own `$ref`s, followed where they are read (path items, parameters, request bodies, responses,
 * security schemes). Schemas are not followed here: the schema converter keeps their `$ref`s.
 */
import { isRecord } from "./json-values.js";

/** Follows a value's `$ref`s to what they name, or says why it cannot. */
export type RefFollower = (value: unknown) => { value: unknown } | { error: string };

/**
 * Follows local `$ref`s (`#/components/…`, `#/paths/…`) to the value they name, through chains, with JSON Pointer
 * escapes (`~0`, `~1`) and percent-encoding. External refs should have been brought in by loadOpenApi.
 */
export function createRefFollower(document: Record<string, unknown>): RefFollower {
  return (value) => {
    let current = value;
    const seen = new Set<string>();
    while (isRecord(current) && typeof current.$ref === "string") {
      const ref = current.$ref;
      if (seen.has(ref)) return { error: `the $ref ${ref} refers to itself` };
      seen.add(ref);
      if (!ref.startsWith("#")) return { error: `the $ref ${ref} names another document, which could not be brought in` };
      const target = pointerTarget(document, ref.slice(1));
      if (target === undefined) return { error: `the $ref ${ref} names nothing in the document` };
      current = target;
    }
    return { value: current };
  };
}

function pointerTarget(document: unknown, pointer: string): unknown {
  if (pointer === "") return document;
  if (!pointer.startsWith("/")) return undefined;
  let current = document;
  for (const raw of pointer.slice(1).split("/")) {
    let token: string;
    try {
      token = decodeURIComponent(raw);
    } catch {
      token = raw;
    }
    token = token.replace(/~1/g, "/").replace(/~0/g, "~");
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
