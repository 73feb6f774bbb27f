/**
 * A plan value as a template: JSON literals with `"{% … %}"` expressions at any depth, parsed once and
 * then evaluated many times (once per step, or once per item of a fan-out).
 */
import type { JsonValue } from "@nodefabric/sdk";
import { describeJsonataError, expressionSource, parseExpression, type ExpressionScope, type PlanExpression } from "./plan-expression.js";

/** A compiled plan value. Subtrees without any expression collapse into one literal. */
export type Template =
  | { kind: "literal"; value: JsonValue }
  | { kind: "expression"; expression: PlanExpression; field: string }
  | { kind: "object"; keys: string[]; values: Template[] }
  | { kind: "array"; items: Template[] };

/** Where compiling reports what it finds. */
export interface TemplateSink {
  /** A parsed expression at `field` (a path relative to the step, such as `inputs/city`). */
  expression(field: string, expression: PlanExpression): void;
  /** An expression at `field` that does not parse. */
  syntaxError(field: string, message: string): void;
}

/** A run-time failure of one expression, naming where it sits. */
export class TemplateEvaluationError extends Error {
  readonly field: string;
  constructor(field: string, message: string, cause: unknown) {
    super(message, { cause });
    this.name = "TemplateEvaluationError";
    this.field = field;
  }
}

/** Escapes one JSON Pointer segment (RFC 6901). */
export function pointerSegment(key: string | number): string {
  return String(key).replace(/~/g, "~0").replace(/\//g, "~1");
}

/** Compiles a plan value found at `field`, reporting every expression (and every syntax error) to `sink`. */
export function compileTemplate(value: unknown, field: string, sink: TemplateSink): Template {
  const source = expressionSource(value);
  if (source !== undefined) {
    try {
      const expression = parseExpression(source);
      sink.expression(field, expression);
      return { kind: "expression", expression, field };
    } catch (err) {
      sink.syntaxError(field, describeJsonataError(err));
      return { kind: "literal", value: null };
    }
  }
  if (Array.isArray(value)) {
    const items = value.map((v, i) => compileTemplate(v, `${field}/${i}`, sink));
    if (items.every((t) => t.kind === "literal")) return { kind: "literal", value: value as JsonValue };
    return { kind: "array", items };
  }
  if (typeof value === "object" && value !== null) {
    const keys = Object.keys(value);
    const values = keys.map((k) => compileTemplate((value as Record<string, unknown>)[k], `${field}/${pointerSegment(k)}`, sink));
    if (values.every((t) => t.kind === "literal")) return { kind: "literal", value: value as JsonValue };
    return { kind: "object", keys, values };
  }
  return { kind: "literal", value: value as JsonValue };
}

/**
 * Evaluates a template. An expression that matches nothing leaves its key out of an object and becomes
 * null inside an array, so positions in arrays hold. Literals are shared, never copied: treat results as read-only.
 */
export async function evaluateTemplate(template: Template, scope: ExpressionScope): Promise<JsonValue | undefined> {
  switch (template.kind) {
    case "literal":
      return template.value;
    case "expression":
      try {
        return await template.expression.evaluate(scope);
      } catch (err) {
        throw new TemplateEvaluationError(template.field, describeJsonataError(err), err);
      }
    case "object": {
      const out: Record<string, JsonValue> = {};
      for (let i = 0; i < template.keys.length; i++) {
        const value = await evaluateTemplate(template.values[i] as Template, scope);
        if (value !== undefined) out[template.keys[i] as string] = value;
      }
      return out;
    }
    case "array": {
      const out: JsonValue[] = [];
      for (const item of template.items) out.push((await evaluateTemplate(item, scope)) ?? null);
      return out;
    }
  }
}
