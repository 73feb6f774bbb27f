/**
 * JSON values written as TypeScript source, the way a person would write them: unquoted keys where possible, short
 * values on one line, two-space indentation.
 */

/** Longest literal kept on one line. */
const ONE_LINE_WIDTH = 100;

/** `value` as a TypeScript expression; continuation lines are indented by `indent` plus nesting. */
export function tsLiteral(value: unknown, indent = ""): string {
  const flat = oneLine(value);
  if (flat.length + indent.length <= ONE_LINE_WIDTH || !isContainer(value)) return flat;
  const inner = `${indent}  `;
  if (Array.isArray(value)) {
    return `[\n${value.map((item) => `${inner}${tsLiteral(item, inner)},`).join("\n")}\n${indent}]`;
  }
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
  return `{\n${entries.map(([k, v]) => `${inner}${propertyKey(k)}: ${tsLiteral(v, inner)},`).join("\n")}\n${indent}}`;
}

/** A string literal in double quotes. */
export function tsString(text: string): string {
  return JSON.stringify(text);
}

/** `key` as an object literal key: bare when it is an identifier, quoted otherwise. */
export function propertyKey(key: string): string {
  // In a literal, even a quoted __proto__ sets the prototype; only a computed key makes it a property.
  if (key === "__proto__") return '["__proto__"]';
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? key : JSON.stringify(key);
}

function isContainer(value: unknown): boolean {
  return typeof value === "object" && value !== null;
}

function oneLine(value: unknown): string {
  if (Array.isArray(value)) return value.length === 0 ? "[]" : `[${value.map(oneLine).join(", ")}]`;
  if (isContainer(value)) {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return entries.length === 0 ? "{}" : `{ ${entries.map(([k, v]) => `${propertyKey(k)}: ${oneLine(v)}`).join(", ")} }`;
  }
  // JSON.stringify covers strings, numbers, booleans and null; non-finite numbers cannot come from JSON.
  return JSON.stringify(value) ?? "undefined";
}
