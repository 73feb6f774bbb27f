/**
 * The Run Gateway: the clients' entry point. It keeps no state: it authenticates at the edge, validates with the
 * v1 schemas, and forwards to the Run Coordinators over pooled clients, relaying answers and event streams back.
 */
import { eventsQuery, nodeRunParams, runParams } from "../run-api-schemas.js";
import { approvalDecisionRoute, decisionBody, decisionReason } from "../approval-decision.js";
import { callerOf as caller, type ApprovalListQuery, type CoordinatorApi, type RunListQuery } from "../run-coordinator/coordinator-api.js";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { CALLER_HEADER, encodeCaller, type ServiceSecurityOptions } from "../../http/auth-plugin.js";
import type { RunStartRequest } from "@nodefabric/schemas";
import { createService } from "../../http/service.js";
import { ref } from "../../http/validation.js";
import { parsePreferWait } from "../run-coordinator/prefer-wait.js";
import { forward, forwardedHeaders as clientHeaders } from "./coordinator-forwarding.js";
import { pipeEvents } from "./event-pipe.js";
import { coordinatorCheck } from "./coordinator-health.js";
import { CoordinatorPool } from "./coordinator-pool.js";
import { exposeObservables } from "../../observe/observables.js";
import { REGISTRY_URL_EXTENSION } from "../../clients/gateway-client.js";
import { exposeInProcess } from "../../in-process.js";
import { resolveLimits } from "../../http/edge.js";
import { RUN_GATEWAY_API, runGatewayApi, type GatewayCaller } from "./gateway-api.js";

export interface RunGatewayOptions extends ServiceSecurityOptions {
  logger?: boolean | Record<string, unknown>;
  /**
   * Base URLs of the Run Coordinators requests are spread over, round robin over those up. They share one store, so
   * any of them can take any request; one that fails at the transport level is passed over until its /v1/health
   * answers again (probed after 1 s, doubling to 10 s).
   */
  coordinatorUrls?: string[];
  /** One coordinator: the same as `coordinatorUrls: [coordinatorUrl]` (both may be given; the lists are joined). */
  coordinatorUrl?: string;
  /** How long the coordinator may take to answer a request, beyond any `Prefer: wait` (ms, default 30 s). */
  requestTimeoutMs?: number;
  /** How long the coordinator's /v1/health may take before it counts as down (ms, default 2 s). */
  healthTimeoutMs?: number;
  /** How long a coordinator that failed is passed over before its first probe (ms, default 1 s; doubles up to 10 s). */
  coordinatorDownMs?: number;
  /** Connections kept open to each coordinator (default 64). */
  connections?: number;
  /** Requests in flight past which the gateway sheds load with 503 (default: no limit). */
  maxInFlight?: number;
  /**
   * A coordinator in this same process: every JSON request goes to it directly, with no HTTP hop, and the URLs are
   * then used only for event streams (which still open on a live one of them).
   */
  coordinator?: CoordinatorApi;
  /**
   * The base URL of this fabric's Node Registry, told to clients in GET /v1/health (`nodefabric.registry_url`), so
   * `fabric run --gateway <url>` finds the latest version of a node type without being told where the registry is.
   */
  registryUrl?: string;
}

const seg = encodeURIComponent;

/** Builds the Run Gateway. */
export async function buildRunGateway(options: RunGatewayOptions): Promise<FastifyInstance> {
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  const healthTimeoutMs = options.healthTimeoutMs ?? 2_000;
  // Requests go to a URL's origin, so two spellings of one coordinator count once.
  const urls = [...new Set([...(options.coordinatorUrl ? [options.coordinatorUrl] : []), ...(options.coordinatorUrls ?? [])].map((u) => new URL(u).origin))];
  if (urls.length === 0) throw new Error("the run gateway needs a coordinator URL (coordinatorUrl or coordinatorUrls)");
  // Each forwarded request sets its own header timeout, so a `Prefer: wait` gets its wait on top of it.
  const coordinator = new CoordinatorPool(
    urls,
    { connections: options.connections, headersTimeoutMs: requestTimeoutMs, bodyTimeoutMs: requestTimeoutMs },
    { probeTimeoutMs: healthTimeoutMs, downInitialMs: options.coordinatorDownMs },
  );
  const openStreams = new Set<AbortController>();

  const app = createService({
    name: "run-gateway",
    logger: options.logger,
    maxInFlight: options.maxInFlight,
    health: async () => [coordinatorCheck(await coordinator.health(healthTimeoutMs))],
    healthExtensions: options.registryUrl ? () => ({ [REGISTRY_URL_EXTENSION]: options.registryUrl }) : undefined,
    auth: options.auth,
    limits: options.limits,
  });
  exposeObservables(app, () => ({ event_followers: openStreams.size }));
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
  const forwardedHeaders = async (req: Pick<FastifyRequest, "headers" | "principal"> | GatewayCaller, extra: Record<string, string | undefined> = {}): Promise<Record<string, string>> => {
    if (!tokens) return clientHeaders(req, extra);
    const h = clientHeaders(req, extra, false);
    h.authorization = `Bearer ${await tokens.token("run-coordinator")}`;
    if (req.principal) h[CALLER_HEADER] = encodeCaller(req.principal);
    return h;
  };

  // POST /v1/runs as a function, for a plugin's route that authenticated its caller itself (the MCP server).
  exposeInProcess(
    app,
    RUN_GATEWAY_API,
    runGatewayApi({
      local,
      coordinator,
      authMode: options.auth?.mode ?? "disabled",
      maxJsonDepth: resolveLimits(options.limits).maxJsonDepth,
      requestTimeoutMs,
      forwardedHeaders,
      log: app.log,
    }),
  );

  app.post("/v1/runs", { schema: { body: ref("run_start_request") } }, async (req, reply) => {
    const prefer = req.headers.prefer;
    if (local) {
      const w = parsePreferWait(prefer);
      if (w !== undefined) reply.header("preference-applied", `wait=${w}`);
      return local.startRun(req.body as RunStartRequest, caller(req), w);
    }
    const wait = parsePreferWait(prefer) ?? 0;
    const body = req.body as RunStartRequest;
    return forward(coordinator, reply, "POST", "/v1/runs", {
      body,
      // A repeated run_id with the same request is recognized by the coordinators, so such a start may be sent again.
      replay: body.run_id ? "any" : "unsent",
      headers: await forwardedHeaders(req, { prefer: Array.isArray(prefer) ? prefer.join(", ") : prefer }),
      timeoutMs: wait * 1000 + requestTimeoutMs,
    });
  });

  app.get("/v1/runs", { schema: { querystring: ref("run_list_query") } }, async (req, reply) => {
    const q = req.query as RunListQuery;
    if (local) {
      const { runs, nextPageToken } = await local.listRuns(q, caller(req));
      if (nextPageToken) reply.header("x-next-page-token", nextPageToken);
      return runs;
    }
    return forward(coordinator, reply, "GET", "/v1/runs", { query: { ...q }, headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs, replay: "any" });
  });

  app.get("/v1/approvals", { schema: { querystring: ref("approval_list_query") } }, async (req, reply) => {
    const q = req.query as ApprovalListQuery;
    if (local) {
      const { approvals, nextPageToken } = await local.listApprovals(q, caller(req));
      if (nextPageToken) reply.header("x-next-page-token", nextPageToken);
      return approvals;
    }
    return forward(coordinator, reply, "GET", "/v1/approvals", { query: { ...q }, headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs, replay: "any" });
  });

  app.get("/v1/runs/:run_id", { schema: { params: runParams } }, async (req, reply) => {
    const { run_id } = req.params as { run_id: string };
    if (local) return local.getRun(run_id, caller(req));
    return forward(coordinator, reply, "GET", `/v1/runs/${seg(run_id)}`, { headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs, replay: "any" });
  });

  app.post("/v1/runs/:run_id(.+)::cancel", { schema: { params: runParams } }, async (req, reply) => {
    const { run_id } = req.params as { run_id: string };
    if (local) return local.cancelRun(run_id, caller(req));
    return forward(coordinator, reply, "POST", `/v1/runs/${seg(run_id)}:cancel`, { headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs });
  });

  app.get("/v1/runs/:run_id/node-runs", { schema: { params: runParams } }, async (req, reply) => {
    const { run_id } = req.params as { run_id: string };
    if (local) return local.listNodeRuns(run_id, caller(req));
    return forward(coordinator, reply, "GET", `/v1/runs/${seg(run_id)}/node-runs`, { headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs, replay: "any" });
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
    return forward(coordinator, reply, "GET", `/v1/node-runs/${seg(node_run_id)}`, { headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs, replay: "any" });
  });

  for (const [action, decision] of [["approve", "approved"], ["reject", "rejected"]] as const) {
    app.post(`/v1/approvals/:approval_id(.+)::${action}`, approvalDecisionRoute, async (req, reply) => {
      const { approval_id } = req.params as { approval_id: string };
      const reason = decisionReason(req);
      if (local) {
        await local.resolveApproval(approval_id, decision, caller(req), reason);
        return reply.code(204).send();
      }
      return forward(coordinator, reply, "POST", `/v1/approvals/${seg(approval_id)}:${action}`, { body: decisionBody(reason), headers: await forwardedHeaders(req), timeoutMs: requestTimeoutMs });
    });
  }

  return app;
}
