/**
 * Ajv's errors as the fabric reports them in `details.errors`: a JSON Pointer path and a readable message. The
 * executor and the test harness report a handler's invalid inputs and outputs with these; core's request validation
 * uses them too, so a client reads the same words wherever a schema said no.
 */
import type { ErrorObject } from "ajv";

/** One violation of a schema: where (a JSON Pointer, "/" for the whole value) and what. */
export interface ValidationIssue {
  path: string;
  message: string;
}

/** Turns Ajv errors into `details.errors` entries: a JSON Pointer path and a readable message. */
export function issuesFromAjv(errors: ErrorObject[] | null | undefined, location?: string): ValidationIssue[] {
  if (!errors) return [];
  return errors.map((e) => {
    let path = e.instancePath || "";
    let message = e.message ?? "is invalid";
    if (e.keyword === "required" && typeof e.params.missingProperty === "string") {
      path = `${path}/${e.params.missingProperty}`;
      message = "is required";
    } else if (e.keyword === "additionalProperties" && typeof e.params.additionalProperty === "string") {
      path = `${path}/${e.params.additionalProperty}`;
      message = "is not a known field";
    } else if (e.keyword === "enum" && Array.isArray(e.params.allowedValues)) {
      message = `must be one of ${e.params.allowedValues.map((v: unknown) => JSON.stringify(v)).join(", ")}`;
    } else if (e.keyword === "propertyNames" && typeof e.params.propertyName === "string") {
      path = `${path}/${e.params.propertyName}`;
      message = "is not a valid key (extension keys look like <namespace>.<key>)";
    }
    const issue: ValidationIssue & { location?: string } = { path: path || "/", message };
    if (location) issue.location = location;
    return issue;
  });
}

/** Drops Ajv's noise: `if` failures and duplicate (path, message) pairs. */
export function dedupeIssues(issues: ValidationIssue[]): ValidationIssue[] {
  const seen = new Set<string>();
  const out: ValidationIssue[] = [];
  for (const i of issues) {
    if (i.message === 'must match "then" schema' || i.message === 'must match "else" schema') continue;
    const k = `${i.path}\u0000${i.message}`;
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(i);
  }
  return out;
}
