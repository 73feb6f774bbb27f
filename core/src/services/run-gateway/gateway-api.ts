/**
 * The gateway's POST /v1/runs as a function, for a plugin's route on the gateway that has authenticated its caller
 * itself (the MCP server's /mcp, whose every tool call starts a run). It makes the checks the route's edge makes, in
 * the same order and with the same answers: the caller's access (ROUTE_ACCESS), what the strict JSON parser refuses
 * (nesting deeper than limits.max_json_depth, prototype keys) and the run_start_request schema. Then it starts the
 * run as the route does, on the coordinator of this process or forwarded to one elsewhere, and answers what the route
 * would have sent: its status, the Run or the ErrorEnvelope, and the headers a client relies on. What it saves is the
 * second pass through HTTP (fastify's inject): no request built, serialised and parsed again, no token verified twice.
 */
import { schemaId, type Run, type RunStartRequest } from "@nodefabric/schemas";
import { errorCodes, type FastifyBaseLogger } from "fastify";
import { assertAccess, type AuthMode, type Principal } from "../../http/auth-plugin.js";
import { ROUTE_ACCESS, type RouteAccess } from "../../http/auth-scopes.js";
import type { ErrorEnvelopeBody } from "../../http/errors.js";
import { jsonTooDeep, schemaViolation, toErrorResponse } from "../../http/service.js";
import { jsonValueProblem, sharedAjv } from "../../http/validation.js";
import { errorFromResponse } from "../../clients/http-client.js";
import { inProcessKind } from "../../in-process.js";
import { callerOfPrincipal, type CoordinatorApi } from "../run-coordinator/coordinator-api.js";
import { MAX_WAIT_SECONDS } from "../run-coordinator/prefer-wait.js";
import { isErrorEnvelope, relayedHeaders } from "./coordinator-forwarding.js";
import type { CoordinatorPool } from "./coordinator-pool.js";

/** Who calls, as the plugin's route found them. */
export interface GatewayCaller {
  /** The caller its route verified (`request.principal`; undefined when authentication is disabled). */
  principal?: Principal;
  /**
   * The request's identity and tracing headers (authorization, x-request-id, traceparent, tracestate): passed on to a
   * coordinator in another process exactly as the route passes them.
   */
  headers: Record<string, string | undefined>;
}

/** What the route would have answered. */
export interface GatewayAnswer<T> {
  status: number;
  /** The document on 2xx; an ErrorEnvelope otherwise. */
  body: T | ErrorEnvelopeBody;
  headers: Record<string, string | string[]>;
}

/** The Run API operations a plugin on the gateway may call in process. */
export interface RunGatewayApi {
  /**
   * POST /v1/runs, held as `Prefer: wait=<waitSeconds>` holds it when waitSeconds is given. Never throws for a
   * refusal: that is an answer with its status and ErrorEnvelope, as over HTTP.
   */
  startRun(request: RunStartRequest, caller: GatewayCaller, waitSeconds?: number): Promise<GatewayAnswer<Run>>;
}

/** The gateway's in-process API (in-process.ts); the launcher hands it to the gateway's plugins (PluginServiceContext.runs). */
export const RUN_GATEWAY_API = inProcessKind<RunGatewayApi>("run-gateway");

export interface RunGatewayApiOptions {
  /** The coordinator of this process, when there is one (the route's `local`). */
  local?: CoordinatorApi;
  /** The coordinators elsewhere, otherwise. */
  coordinator: CoordinatorPool;
  authMode: AuthMode;
  /** limits.max_json_depth of the gateway's edge (0: no limit). */
  maxJsonDepth: number;
  /** How long a forwarded request may take beyond its wait (ms). */
  requestTimeoutMs: number;
  /** The headers a forwarded request carries for this caller (the route's own function). */
  forwardedHeaders(caller: GatewayCaller, extra: Record<string, string | undefined>): Promise<Record<string, string>>;
  log: FastifyBaseLogger;
}

const START_ACCESS: RouteAccess = ROUTE_ACCESS["run-gateway"].find((r) => r.method === "POST" && r.path === "/v1/runs")!;

export function runGatewayApi(o: RunGatewayApiOptions): RunGatewayApi {
  let validate: ((value: unknown) => boolean) & { errors?: unknown[] | null } | undefined;
  const answerOf = (err: unknown): GatewayAnswer<never> => {
    const res = toErrorResponse(err);
    // As the service's error handler does: a failure nobody foresaw is logged with its cause.
    if (res.status >= 500 && res.body.error.code === "internal_error") o.log.error({ err }, "request failed");
    return { status: res.status, body: res.body, headers: res.headers };
  };
  return {
    async startRun(request, caller, waitSeconds) {
      try {
        assertAccess(caller.principal, START_ACCESS, "run-gateway", o.authMode);
        const problem = jsonValueProblem(request, o.maxJsonDepth);
        if (problem === "too_deep") throw jsonTooDeep(o.maxJsonDepth);
        // The error the route's JSON parser (fastify's, over secure-json-parse) raises for it.
        if (problem === "prototype") throw new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY();
        validate ??= sharedAjv().getSchema(schemaId("run_start_request")) as typeof validate;
        if (!validate!(request)) throw schemaViolation(validate!.errors ?? [], "body");
        const wait = waitSeconds === undefined ? undefined : Math.min(MAX_WAIT_SECONDS, Math.max(0, Math.floor(waitSeconds)));
        if (o.local) {
          const run = await o.local.startRun(request, callerOfPrincipal(caller.principal), wait);
          return { status: 200, body: run, headers: wait !== undefined ? { "preference-applied": `wait=${wait}` } : {} };
        }
        const headers = await o.forwardedHeaders(caller, { prefer: wait !== undefined ? `wait=${wait}` : undefined });
        const { value: res, baseUrl } = await o.coordinator.request(
          "POST",
          "/v1/runs",
          request,
          { headers, timeoutMs: (wait ?? 0) * 1000 + o.requestTimeoutMs },
          // A repeated run_id with the same request is recognized by the coordinators, so such a start may be sent again.
          request.run_id ? "any" : "unsent",
        );
        const ok = res.status >= 200 && res.status < 300;
        if (!ok && !isErrorEnvelope(res.body)) throw errorFromResponse(baseUrl, res.status, res.body, res.headers);
        return { status: res.status, body: res.body as Run | ErrorEnvelopeBody, headers: relayedHeaders(res.headers) };
      } catch (err) {
        return answerOf(err);
      }
    },
  };
}
