/**
 * The request-level error catalogue of NodeFabric: every error code the services answer with, its HTTP status and
 * meaning, and the single function that turns anything thrown into a v1 ErrorEnvelope. The failure codes a NodeRun
 * carries are in failure-codes.ts and the SDK's blocks; docs/errors.md lists both.
 */

/** HTTP status for every request-level error code of the v1 contract (an ErrorEnvelope, schemas/v1/error_envelope.schema.json). */
export const ERROR_STATUS = {
  invalid_request: 400,
  unauthenticated: 401,
  permission_denied: 403,
  route_not_found: 404,
  run_not_found: 404,
  node_run_not_found: 404,
  node_type_not_found: 404,
  candidate_set_not_found: 404,
  approval_not_found: 404,
  unknown_node_type: 404,
  method_not_allowed: 405,
  run_already_exists: 409,
  node_run_terminal: 409,
  node_type_version_conflict: 409,
  idempotency_conflict: 409,
  constraint_violation: 409,
  candidate_binding_violation: 409,
  parent_node_run_invalid: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal_error: 500,
  upstream_unavailable: 502,
  unavailable: 503,
  upstream_timeout: 504,
} as const;

export type RequestErrorCode = keyof typeof ERROR_STATUS;

/** What each request-level code means (docs/errors.md lists them with their status). */
export const REQUEST_ERROR_MEANINGS: { readonly [C in RequestErrorCode]: string } = {
  invalid_request: "The request is malformed: its body, path or query breaks the schema (`details.errors` lists each violation), or it is not valid JSON or HTTP.",
  unauthenticated: "No credentials, or a token that does not verify.",
  permission_denied: "The caller is authenticated but may not do this: a missing scope, another tenant, an assignment token used beyond its NodeRun.",
  route_not_found: "No route for this method and path (or the directory no longer holds the executor).",
  run_not_found: "No such run, or one of another tenant.",
  node_run_not_found: "No such NodeRun, or one of another tenant's run.",
  node_type_not_found: "No such node type (or version) in the registry.",
  candidate_set_not_found: "No such candidate set.",
  approval_not_found: "No such approval, or one of another tenant's run.",
  unknown_node_type: "The node type is not published, or this executor does not serve it.",
  method_not_allowed: "The path exists but not with this method (the Allow header lists those it takes).",
  run_already_exists: "The run_id is taken by a run started with another request.",
  node_run_terminal: "The NodeRun (or run) has already ended, or is not in the state the request needs.",
  node_type_version_conflict: "This version of the node type is published with other content.",
  idempotency_conflict: "The idempotency key was already used for a different request.",
  constraint_violation: "The request breaks the constraints in force (budgets, lists, depth); `details.violations` lists them.",
  candidate_binding_violation: "A child names a node type outside the candidate set it is bound to.",
  parent_node_run_invalid: "The parent NodeRun cannot take children (not a running composite, or not the caller's).",
  payload_too_large: "The request body is larger than the service accepts.",
  unsupported_media_type: "The request body is not application/json.",
  rate_limited: "Too many requests: retry after the Retry-After header.",
  internal_error: "The service failed to handle the request (a bug: its log has the cause).",
  upstream_unavailable: "A service this one needs (another service, the registry, a token endpoint) could not be reached or answered 5xx.",
  unavailable: "The service is overloaded, shutting down or not ready (`details.health`); retry after the Retry-After header.",
  upstream_timeout: "A service this one needs did not answer in time.",
};

// Failure codes (a NodeRun's or a result's `error.code`, not HTTP statuses) have their own blocks.
export { FAILURE_CODES, CORE_FAILURE_CODES, type FailureCode, type CoreFailureCode } from "./failure-codes.js";

/** The `error` object of an ErrorEnvelope or of a result. */
export interface ErrorBody {
  code: string;
  message: string;
  details?: Record<string, unknown>;
  retryable?: boolean;
  cause?: { code?: string; message: string; details?: Record<string, unknown> };
  extensions?: Record<string, unknown>;
}

export interface ErrorEnvelopeBody {
  error: ErrorBody;
}

const FABRIC_ERROR = Symbol.for("nodefabric.FabricError");

/** A request-level error with a catalogued code; the error handler turns it into an ErrorEnvelope. */
export class FabricError extends Error {
  readonly code: RequestErrorCode;
  readonly statusCode: number;
  readonly details?: Record<string, unknown>;
  readonly retryable?: boolean;
  /** Extra response headers, e.g. Retry-After or WWW-Authenticate. */
  readonly headers?: Record<string, string>;

  constructor(
    code: RequestErrorCode,
    message: string,
    options: { details?: Record<string, unknown>; retryable?: boolean; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "FabricError";
    this.code = code;
    this.statusCode = ERROR_STATUS[code];
    this.details = options.details;
    this.retryable = options.retryable;
    this.headers = options.headers;
    Object.defineProperty(this, FABRIC_ERROR, { value: true });
  }

  /** True for a FabricError from any installed copy of this package. */
  static is(value: unknown): value is FabricError {
    return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[FABRIC_ERROR] === true;
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { code: this.code, message: this.message };
    if (this.details !== undefined) body.details = this.details;
    if (this.retryable !== undefined) body.retryable = this.retryable;
    return body;
  }
}

/** Builds an ErrorEnvelope body. */
export function errorEnvelope(code: string, message: string, details?: Record<string, unknown>, retryable?: boolean): ErrorEnvelopeBody {
  const error: ErrorBody = { code, message };
  if (details !== undefined) error.details = details;
  if (retryable !== undefined) error.retryable = retryable;
  return { error };
}

/** One entry of `details.errors` of an `invalid_request`. */
export interface ValidationIssue {
  path: string;
  message: string;
}

/** A 400 invalid_request listing each violation. */
export function invalidRequest(message: string, errors: ValidationIssue[]): FabricError {
  return new FabricError("invalid_request", message, { details: { errors } });
}

/** `details.reason` of the error a client raises for an answer whose body is not JSON. */
export const NOT_JSON = "body_not_json";

/** `details.reason` of the error a client raises for an answer whose body is larger than it reads. */
export const TOO_LARGE = "body_too_large";

/**
 * Whether an error says a peer answered 2xx with a body that is not JSON, or too large to read: a broken peer, not
 * a down one.
 */
export function isMalformedSuccess(err: unknown): boolean {
  const d = FabricError.is(err) ? (err.details as { status?: number; reason?: string } | undefined) : undefined;
  return (d?.reason === NOT_JSON || d?.reason === TOO_LARGE) && typeof d.status === "number" && d.status >= 200 && d.status < 300;
}
