/**
 * A published NodeType's input and output schemas must be compilable JSON Schema draft 2020-12, or every executor
 * would fail on them later. The registry does not compile them (the executor that runs a node type does, once, on
 * first use; compiling every schema of a 1,000-operation publish would cost seconds): it runs the cheap check of
 * handler-schemas.ts, which refuses what would not compile in the common cases (a schema that breaks the
 * meta-schema, a `$ref` that does not resolve inside the document, a regular expression that is not valid).
 */
import type { ValidationIssue } from "../../http/errors.js";
import { schemaProblem } from "@nodefabric/sdk/runtime";

/** Checks each named schema; returns one issue per schema that would not compile, at its JSON Pointer path. */
export function schemaCompileIssues(schemas: Array<{ path: string; schema: unknown }>): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  for (const { path, schema } of schemas) {
    const problem = schemaProblem(schema);
    if (problem) issues.push({ path, message: `is not a compilable JSON Schema (draft 2020-12): ${problem}` });
  }
  return issues;
}
