/**
 * The coordinator's run operations as plain functions: its routes call them, and so does a gateway in the same
 * process, which then needs no HTTP hop.
 */
import type { Approval, NodeRun, Run, RunStartRequest } from "@nodefabric/schemas";
import type { FastifyRequest } from "fastify";
import type { Principal } from "../../http/auth-plugin.js";
import type { Caller, RunEngine } from "../../engine/run-engine.js";
import type { RunStore } from "../../store/run-store.js";
import { approvalDocument, approvalStoreQuery, nextApprovalsToken, nextRunsToken, runStoreQuery, type ApprovalsQuery, type RunsQuery } from "./listings.js";
import { decisionBody } from "../approval-decision.js";
import { waitForRunEnd } from "./prefer-wait.js";
import type { RunRouting } from "./run-routing.js";
import { inProcessKind } from "../../in-process.js";

/**
 * The engine's view of who made a request, from its verified principal: nobody in particular when authentication
 * is disabled, only runs without a tenant for an anonymous caller, and otherwise the token's tenant and subject (or
 * the one NodeRun of an assignment token).
 */
export function callerOf(req: FastifyRequest): Caller {
  return callerOfPrincipal(req.principal);
}

/** The same, for a principal a route has already verified (undefined: authentication is disabled). */
export function callerOfPrincipal(p: Principal | undefined): Caller {
  if (!p) return {};
  if (p.kind === "anonymous") return { tenant_id: null };
  if (p.assignment) return { assignment: p.assignment };
  const caller: Caller = { authenticated: true };
  if (p.tenant_id !== undefined) caller.tenant_id = p.tenant_id;
  if (p.sub !== undefined) caller.sub = p.sub;
  if (p.iss !== undefined) caller.iss = p.iss;
  return caller;
}

/** The query string of GET /v1/runs, validated (schema run_list_query) and with its default limit. */
export type RunListQuery = RunsQuery;
/** The query string of GET /v1/approvals, validated (schema approval_list_query) and with its default limit. */
export type ApprovalListQuery = ApprovalsQuery;

/** Run operations of one coordinator. */
export class CoordinatorApi {
  constructor(
    readonly engine: RunEngine,
    readonly store: RunStore,
    /** Sends writes for runs another coordinator holds to it (a store several coordinators share). */
    private readonly routing?: RunRouting,
  ) {}

  /** Starts a run; with `waitSeconds`, resolves once it ended or the wait ran out. */
  async startRun(req: RunStartRequest, caller: Caller, waitSeconds?: number): Promise<Run> {
    const run = await this.engine.startRun(req, caller);
    if (waitSeconds === undefined) return run;
    return waitForRunEnd(this.engine, this.engine.store, run, waitSeconds * 1000);
  }

  async getRun(runId: string, caller: Caller): Promise<Run> {
    return (await this.engine.getRunRecord(runId, caller)).run;
  }

  cancelRun(runId: string, caller: Caller): Promise<Run> {
    if (!this.routing) return this.engine.cancelRun(runId, caller);
    return this.routing.call(runId, caller, "runs:write", "POST", `/v1/runs/${encodeURIComponent(runId)}:cancel`, () => this.engine.cancelRun(runId, caller));
  }

  /** Runs newest first, a page at a time, filtered (GET /v1/runs). */
  async listRuns(q: RunListQuery, caller: Caller): Promise<{ runs: Run[]; nextPageToken?: string }> {
    const recs = await this.store.listRuns(runStoreQuery(q, caller));
    const runs = recs.map((r) => r.run);
    const nextPageToken = recs.length === q.limit ? nextRunsToken(recs[recs.length - 1].run_id) : undefined;
    return { runs, nextPageToken };
  }

  /** Approvals of the caller's tenant, newest first, a page at a time (GET /v1/approvals). */
  async listApprovals(q: ApprovalListQuery, caller: Caller): Promise<{ approvals: Approval[]; nextPageToken?: string }> {
    const recs = await this.store.listApprovals(approvalStoreQuery(q, caller));
    const nextPageToken = recs.length === q.limit ? nextApprovalsToken(recs[recs.length - 1]) : undefined;
    return { approvals: recs.map(approvalDocument), nextPageToken };
  }

  async listNodeRuns(runId: string, caller: Caller): Promise<NodeRun[]> {
    await this.engine.getRunRecord(runId, caller);
    return (await this.store.listNodeRuns(runId)).map((n) => n.node_run);
  }

  async getNodeRun(nodeRunId: string, caller: Caller): Promise<NodeRun> {
    return (await this.engine.getNodeRunRecord(nodeRunId, caller)).node_run;
  }

  /** POST /v1/approvals/{id}:approve|:reject, with the person's reason when they gave one. */
  async resolveApproval(approvalId: string, decision: "approved" | "rejected", caller: Caller, reason?: string): Promise<void> {
    if (!this.routing) return this.engine.resolveApproval(approvalId, decision, caller, reason);
    const runId = (await this.store.getApproval(approvalId))?.run_id;
    const path = `/v1/approvals/${encodeURIComponent(approvalId)}:${decision === "approved" ? "approve" : "reject"}`;
    const local = () => this.engine.resolveApproval(approvalId, decision, caller, reason);
    await this.routing.call(runId, caller, "approvals:write", "POST", path, local, decisionBody(reason));
  }
}

/** The coordinator's run operations as an in-process API (in-process.ts): a gateway of the same process calls them. */
export const COORDINATOR_API = inProcessKind<CoordinatorApi>("run-coordinator");
