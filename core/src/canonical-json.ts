/**
 * Canonical JSON: object keys sorted at every depth, no whitespace. Two documents with the same
 * content serialize to the same bytes, which is how a republished NodeType version is recognised.
 */

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === "object") {
    // fromEntries defines own properties, so a "__proto__" key stays data and never becomes a prototype.
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, sortKeys((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}

/** Serializes `value` with keys sorted at every depth. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}
