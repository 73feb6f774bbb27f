/** Small checks and forms of plain JSON values that the mapping's modules share. */

/** True when two values are the same JSON (compared as text). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  try {
    return JSON.stringify(a) === JSON.stringify(b);
  } catch {
    return false;
  }
}

/** The values trimmed and lower-cased, empty ones dropped. */
export function lowerSet(values: string[] | undefined): Set<string> {
  return new Set((values ?? []).map((v) => v.trim().toLowerCase()).filter((v) => v !== ""));
}

/** The text on one line, runs of whitespace made one space. */
export function oneLine(text: string): string {
  return text.trim().replace(/\s+/g, " ");
}

/** True for a plain JSON object (not null, not an array). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
