/**
 * The Run Gateway: the clients' entry point. It keeps no state: it authenticates at the edge, validates with the
 * v1 schemas, and forwards to the Run Coordinator over a pooled client, relaying answers and event streams back.
 */
import { approvalParams, eventsQuery, listQuery, nodeRunParams, runParams } from "../run-api-schemas.js";
import { callerOf as caller, type CoordinatorApi, type RunListQuery } from "../run-coordinator/coordinator-api.js";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { CALLER_HEADER, encodeCaller, type ServiceSecurityOptions } from "../../http/auth-plugin.js";
import type { RunStartRequest } from "@nodefabric/schemas";
import { createService } from "../../http/service.js";
import { ref } from "../../http/validation.js";
import { HttpClient } from "../../clients/http-client.js";
import { parsePreferWait } from "../run-coordinator/prefer-wait.js";
import { forward, forwardedHeaders as clientHeaders } from "./coordinator-forwarding.js";
import { pipeEvents } from "./event-pipe.js";
import { coordinatorHealth } from "./coordinator-health.js";

export interface RunGatewayOptions extends ServiceSecurityOptions {
  logger?: boolean | Record<string, unknown>;
  /** Base URL of the Run Coordinator every request is forwarded to. */
  coordinatorUrl: string;
  /** How long the coordinator may take to answer a request, beyond any `Prefer: wait` (ms, default 30 s). */
  requestTimeoutMs?: number;
  /** How long the coordinator's /v1/health may take before it counts as down (ms, default 2 s). */
  healthTimeoutMs?: number;
  /** Connections kept open to the coordinator (default 64). */
  connections?: number;
  /** Requests in flight past which the gateway sheds load with 503 (default: no limit). */
  maxInFlight?: number;
  /**
   * A coordinator in this same process: JSON requests go to it directly, with no HTTP hop (event streams still
   * use `coordinatorUrl`).
   */
  coordinator?: CoordinatorApi;
}

const seg = encodeURIComponent;

/** Builds the Run Gateway. */
export async function buildRunGateway(options: RunGatewayOptions): Promise<FastifyInstance> {
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  // Each forwarded request sets its own header timeout, so a `Prefer: wait` gets its wait on top of it.
  const coordinator = new HttpClient(options.coordinatorUrl, {
    connections: options.connections,
    headersTimeoutMs: requestTimeoutMs,
    bodyTimeoutMs: requestTimeoutMs,
  });
  const openStreams = new Set<AbortController>();

  const app = createService({
    name: "run-gateway",
    logger: options.logger,
    maxInFlight: options.maxInFlight,
    health: async () => [await coordinatorHealth(coordinator, options.healthTimeoutMs ?? 2_000)],
    auth: options.auth,
    limits: options.limits,
  });
  // Live streams would otherwise hold the close until their runs end.
  app.addHook("preClose", async () => {
    for (const ac of openStreams) ac.abort();
  });
  app.addHook("onClose", async () => {
    await coordinator.close();
  });

  const local = options.coordinator;
  // With its own tokens, a forwarded request carries the gateway's token and the verified caller (CALLER_HEADER);
  // without them the client's Authorization header is forwarded as it came.
  const tokens = options.tokens;
  /** Headers of a forwarded request: identity (the gateway's token and its verified caller) and tracing. */
  const forwardedHeaders = async (req: FastifyRequest, extra: Record<string, string | undefined> = {}): Promise<Record<string, string>> => {
    if (!tokens) return clientHeaders(req, extra);
    const h = clientHeaders(req, extra, false);
    h.authorization = `Bearer ${await tokens.token("run-coordinator")}`;
    if (req.principal) h[CALLER_HEADER] = encodeCaller(req.principal);
    return h;
  };

  app.post("/v1/runs", { schema: { body: ref("run_start_request") } }, async (req, reply) => {
    const prefer = req.headers.prefer;
    if (local) {
      const w = parsePreferWait(prefer);
      if (w !== undefined) reply.header("preference-applied", `wait=${w}`);
      return local.startRun(req.body as RunStartRequest, caller(req), w);
    }
    const wait = parsePreferWait(prefer) ?? 0;
    return forward(coordinator, reply, "POST", "/v1/runs", {
      body: req.body as RunStartRequest,
      headers: await forwardedHeaders(req, { prefer: Array.isArray(prefer) ? prefer.join(", ") : prefer }),
      timeoutMs: wait * 1000 + requestTimeoutMs,
    });
  });

  app.get("/v1/runs", { schema: { querystring: listQuery } }, async (req, reply) => {
    const q = req.query as { state?: string; limit: number; page_token?: string };
    if (local) {
      const { runs, nextPageToken } = await local.listRuns(q as RunListQuery, caller(req));
      if (nextPageToken) reply.header("x-next-page-token", nextPageToken);
      return runs;
    }
    return forward(coordinator, reply, "GET", "/v1/runs", { query: { ...q }, headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs });
  });

  app.get("/v1/runs/:run_id", { schema: { params: runParams } }, async (req, reply) => {
    const { run_id } = req.params as { run_id: string };
    if (local) return local.getRun(run_id, caller(req));
    return forward(coordinator, reply, "GET", `/v1/runs/${seg(run_id)}`, { headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs });
  });

  app.post("/v1/runs/:run_id(.+)::cancel", { schema: { params: runParams } }, async (req, reply) => {
    const { run_id } = req.params as { run_id: string };
    if (local) return local.cancelRun(run_id, caller(req));
    return forward(coordinator, reply, "POST", `/v1/runs/${seg(run_id)}:cancel`, { headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs });
  });

  app.get("/v1/runs/:run_id/node-runs", { schema: { params: runParams } }, async (req, reply) => {
    const { run_id } = req.params as { run_id: string };
    if (local) return local.listNodeRuns(run_id, caller(req));
    return forward(coordinator, reply, "GET", `/v1/runs/${seg(run_id)}/node-runs`, { headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs });
  });

  app.get("/v1/runs/:run_id/events", { schema: { params: runParams, querystring: eventsQuery } }, async (req, reply) => {
    const { run_id } = req.params as { run_id: string };
    const q = req.query as { after_seq?: number; follow: boolean; types?: string };
    await pipeEvents(coordinator, req, reply, {
      path: `/v1/runs/${seg(run_id)}/events`,
      query: { after_seq: q.after_seq, follow: q.follow, types: q.types },
      headers: await forwardedHeaders(req),
      open: openStreams,
    });
  });

  app.get("/v1/node-runs/:node_run_id", { schema: { params: nodeRunParams } }, async (req, reply) => {
    const { node_run_id } = req.params as { node_run_id: string };
    if (local) return local.getNodeRun(node_run_id, caller(req));
    return forward(coordinator, reply, "GET", `/v1/node-runs/${seg(node_run_id)}`, { headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs });
  });

  app.post("/v1/approvals/:approval_id(.+)::approve", { schema: { params: approvalParams } }, async (req, reply) => {
    const { approval_id } = req.params as { approval_id: string };
    if (local) {
      await local.resolveApproval(approval_id, "approved", caller(req));
      return reply.code(204).send();
    }
    return forward(coordinator, reply, "POST", `/v1/approvals/${seg(approval_id)}:approve`, { headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs });
  });

  app.post("/v1/approvals/:approval_id(.+)::reject", { schema: { params: approvalParams } }, async (req, reply) => {
    const { approval_id } = req.params as { approval_id: string };
    if (local) {
      await local.resolveApproval(approval_id, "rejected", caller(req));
      return reply.code(204).send();
    }
    return forward(coordinator, reply, "POST", `/v1/approvals/${seg(approval_id)}:reject`, { headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs });
  });

  return app;
}
