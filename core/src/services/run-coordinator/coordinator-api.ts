/**
 * The coordinator's run operations as plain functions: its routes call them, and so does a gateway in the same
 * process, which then needs no HTTP hop.
 */
import type { NodeRun, Run, RunStartRequest } from "@nodefabric/schemas";
import type { FastifyRequest } from "fastify";
import { FabricError } from "../../http/errors.js";
import type { Caller, RunEngine } from "../../engine/run-engine.js";
import type { RunState, RunStore } from "../../store/run-store.js";
import { waitForRunEnd } from "./prefer-wait.js";
import type { RunRouting } from "./run-routing.js";

/**
 * The engine's view of who made a request, from its verified principal: nobody in particular when authentication
 * is disabled, only runs without a tenant for an anonymous caller, and otherwise the token's tenant and subject (or
 * the one NodeRun of an assignment token).
 */
export function callerOf(req: FastifyRequest): Caller {
  const p = req.principal;
  if (!p) return {};
  if (p.kind === "anonymous") return { tenant_id: null };
  if (p.assignment) return { assignment: p.assignment };
  const caller: Caller = { authenticated: true };
  if (p.tenant_id !== undefined) caller.tenant_id = p.tenant_id;
  if (p.sub !== undefined) caller.sub = p.sub;
  if (p.iss !== undefined) caller.iss = p.iss;
  return caller;
}

export interface RunListQuery {
  state?: RunState;
  limit: number;
  page_token?: string;
}

function decodePageToken(token: string | undefined): string | undefined {
  if (token === undefined) return undefined;
  const s = Buffer.from(token, "base64url").toString("utf8");
  if (!s.startsWith("r:")) {
    throw new FabricError("invalid_request", "page_token is not valid", { details: { errors: [{ path: "/page_token", message: "is not a token this service issued" }] } });
  }
  return s.slice(2);
}

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
    return waitForRunEnd(this.engine, this.store, run, waitSeconds * 1000);
  }

  async getRun(runId: string, caller: Caller): Promise<Run> {
    return (await this.engine.getRunRecord(runId, caller)).run;
  }

  cancelRun(runId: string, caller: Caller): Promise<Run> {
    if (!this.routing) return this.engine.cancelRun(runId, caller);
    return this.routing.call(runId, caller, "runs:write", "POST", `/v1/runs/${encodeURIComponent(runId)}:cancel`, () => this.engine.cancelRun(runId, caller));
  }

  /** Runs newest first, a page at a time. */
  async listRuns(q: RunListQuery, caller: Caller): Promise<{ runs: Run[]; nextPageToken?: string }> {
    const recs = await this.store.listRuns({ tenant_id: caller.tenant_id, state: q.state, limit: q.limit, before_run_id: decodePageToken(q.page_token) });
    const runs = recs.map((r) => r.run);
    const nextPageToken = recs.length === q.limit ? Buffer.from(`r:${recs[recs.length - 1].run_id}`).toString("base64url") : undefined;
    return { runs, nextPageToken };
  }

  async listNodeRuns(runId: string, caller: Caller): Promise<NodeRun[]> {
    await this.engine.getRunRecord(runId, caller);
    return (await this.store.listNodeRuns(runId)).map((n) => n.node_run);
  }

  async getNodeRun(nodeRunId: string, caller: Caller): Promise<NodeRun> {
    return (await this.engine.getNodeRunRecord(nodeRunId, caller)).node_run;
  }

  async resolveApproval(approvalId: string, decision: "approved" | "rejected", caller: Caller): Promise<void> {
    if (!this.routing) return this.engine.resolveApproval(approvalId, decision, caller);
    const runId = (await this.store.getApproval(approvalId))?.run_id;
    const path = `/v1/approvals/${encodeURIComponent(approvalId)}:${decision === "approved" ? "approve" : "reject"}`;
    await this.routing.call(runId, caller, "approvals:write", "POST", path, () => this.engine.resolveApproval(approvalId, decision, caller));
  }
}
