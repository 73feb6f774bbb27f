/**
 * A published NodeType's input and output schemas must compile as JSON Schema draft 2020-12, or
 * every executor would fail on them later. They are compiled with an Ajv instance of their own so
 * user schemas never mix with the v1 contract schemas.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import type { ValidationIssue } from "../../http/errors.js";

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv2020) => Ajv2020;

let userAjv: Ajv2020 | undefined;

function ajv(): Ajv2020 {
  if (!userAjv) {
    // strict: false because real-world schemas carry keywords (e.g. "example") that strict mode refuses.
    userAjv = new Ajv2020({ strict: false, allErrors: false, logger: false });
    addFormats(userAjv);
  }
  return userAjv;
}

/** Compiles each named schema; returns one issue per schema that does not compile, at its JSON Pointer path. */
export function schemaCompileIssues(schemas: Array<{ path: string; schema: unknown }>): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const instance = ajv();
  for (const { path, schema } of schemas) {
    if (schema === undefined) continue;
    try {
      instance.compile(schema as Record<string, unknown>);
    } catch (err) {
      issues.push({ path, message: `is not a compilable JSON Schema (draft 2020-12): ${(err as Error).message}` });
    } finally {
      // Forget it again: a schema's $id would otherwise collide with the next publish of the same id.
      instance.removeSchema();
    }
  }
  return issues;
}
