/**
 * The listings of the run API beyond a run's own reads: the filters of GET /v1/runs and GET /v1/approvals (both
 * NodeFabric extensions), their opaque page tokens, and the Approval document built from a stored approval.
 */
import type { Approval, ApprovalListQuery as ApprovalQuery, RunListQuery as RunQuery } from "@nodefabric/schemas";
import { FabricError } from "../../http/errors.js";
import type { Caller } from "../../engine/run-engine.js";
import { DECISION_REASON_KEY, type ApprovalListing, type ApprovalListQuery, type RunListQuery } from "../../store/run-store.js";

/** A query string as the route hands it over: validated against its schema, `limit` defaulted. */
export type RunsQuery = RunQuery & { limit: number };
export type ApprovalsQuery = ApprovalQuery & { limit: number };

function invalid(field: string, message: string): FabricError {
  return new FabricError("invalid_request", `${field} ${message}`, { details: { errors: [{ path: `/${field}`, message }] } });
}

/** A page token carries a prefix naming its listing, so a token of one listing is refused by the other. */
function encodeToken(prefix: string, value: string): string {
  return Buffer.from(`${prefix}:${value}`).toString("base64url");
}

function decodeToken(token: string, prefix: string): string {
  const s = Buffer.from(token, "base64url").toString("utf8");
  if (!s.startsWith(`${prefix}:`)) throw invalid("page_token", "is not a token this service issued");
  return s.slice(prefix.length + 1);
}

function instant(field: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const t = Date.parse(value);
  if (Number.isNaN(t)) throw invalid(field, "must be an RFC 3339 date-time with a time zone");
  return t;
}

/**
 * Which tenant's runs a caller lists. A caller confined to a tenant (a token with `tenant_id`, or an anonymous
 * caller, confined to runs without one) lists only those, and may name only its own tenant; a caller confined to
 * none (no `tenant_id` in its token, or authentication disabled) sees every tenant and may pick one.
 */
function tenantScope(caller: Caller, asked: string | undefined): string | null | undefined {
  if (asked === undefined) return caller.tenant_id;
  if (caller.tenant_id !== undefined && caller.tenant_id !== asked) {
    throw new FabricError("permission_denied", "tenant_id may name only the caller's own tenant", {
      details: { tenant_id: asked },
    });
  }
  return asked;
}

/** The store query of GET /v1/runs, or a 400/403 FabricError. */
export function runStoreQuery(q: RunsQuery, caller: Caller): RunListQuery {
  const out: RunListQuery = { tenant_id: tenantScope(caller, q.tenant_id), limit: q.limit };
  if (q.state !== undefined) out.state = q.state;
  if (q.node_type_id !== undefined) out.root_node_type_id = q.node_type_id;
  const after = instant("created_after", q.created_after);
  const before = instant("created_before", q.created_before);
  if (after !== undefined) out.created_after = after;
  if (before !== undefined) out.created_before = before;
  if (q.page_token !== undefined) out.before_run_id = decodeToken(q.page_token, "r");
  return out;
}

export function nextRunsToken(lastRunId: string): string {
  return encodeToken("r", lastRunId);
}

/** The store query of GET /v1/approvals: the caller's tenant only (every tenant for a caller confined to none). */
export function approvalStoreQuery(q: ApprovalsQuery, caller: Caller): ApprovalListQuery {
  const out: ApprovalListQuery = { tenant_id: caller.tenant_id, limit: q.limit };
  if (q.state !== undefined) out.state = q.state;
  if (q.run_id !== undefined) out.run_id = q.run_id;
  if (q.page_token !== undefined) {
    const m = /^(\d{1,16}):(.+)$/s.exec(decodeToken(q.page_token, "a"));
    if (!m) throw invalid("page_token", "is not a token this service issued");
    out.before = { created_at: Number(m[1]), approval_id: m[2] };
  }
  return out;
}

export function nextApprovalsToken(last: ApprovalListing): string {
  return encodeToken("a", `${last.created_at}:${last.approval_id}`);
}

const CHECKPOINTS: ReadonlySet<string> = new Set(["run.start", "node.run.create", "node.run.execute"]);

/** The Approval document of a stored approval: what waits, where, why the PDP asked, and what was decided. */
export function approvalDocument(a: ApprovalListing): Approval {
  const asked = a.decision as { reason_code?: unknown; message?: unknown; "nodefabric.checkpoint"?: unknown };
  const checkpoint = asked["nodefabric.checkpoint"];
  const doc: Approval = {
    approval_id: a.approval_id,
    run_id: a.run_id,
    node_run_id: a.node_run_id,
    state: a.state,
    // Approvals stored before every checkpoint could ask were all at node.run.execute.
    action: typeof checkpoint === "string" && CHECKPOINTS.has(checkpoint) ? (checkpoint as Approval["action"]) : "node.run.execute",
    node_type_ref: { node_type_id: a.node_type_ref.node_type_id, version: a.node_type_ref.version },
    created_at: new Date(a.created_at).toISOString(),
  };
  if (a.tenant_id !== null) doc.tenant_id = a.tenant_id;
  if (typeof asked.reason_code === "string" && asked.reason_code !== "") doc.reason_code = asked.reason_code;
  if (typeof asked.message === "string") doc.message = asked.message;
  if (a.state === "approved" || a.state === "rejected") {
    doc.decision = a.state;
    const reason = a.decision[DECISION_REASON_KEY];
    if (typeof reason === "string" && reason !== "") doc.decision_reason = reason;
  }
  if (a.resolved_at !== null) doc.resolved_at = new Date(a.resolved_at).toISOString();
  return doc;
}
