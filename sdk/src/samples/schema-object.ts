/** A JSON Schema as plain data, and the check every sample module makes of a value before reading its keys. */

/** A JSON Schema (2020-12) or a part of one, as plain data. */
export type SchemaObject = Record<string, unknown>;

/** True for a plain JSON object (not null, not an array). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
