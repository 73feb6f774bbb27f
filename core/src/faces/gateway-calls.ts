/**
 * The Run API as the fabric's protocol faces (the MCP and A2A servers on the gateway) use it, always with their
 * caller's own identity. A run starts through the
 * gateway's POST /v1/runs as a function (PluginServiceContext.runs), which makes the route's checks with the caller
 * the face's route authenticated and answers what the route answers, without a second pass through HTTP; the other
 * calls go through the gateway's own routes (fastify's `inject`) with the caller's headers. Authentication, scopes,
 * tenants, validation, the PDP, budgets and approvals therefore apply exactly as they do to the Run API; the plugin
 * never reaches into the engine or the stores, and a call on a face can do nothing its token could not do through the
 * Run API.
 */
import type { FastifyInstance } from "fastify";
import type { Principal } from "../http/auth-plugin.js";
import type { RunGatewayApi } from "../services/run-gateway/gateway-api.js";
import { TERMINAL_STATES as TERMINAL } from "../store/run-store.js";
import type { Run, RunEvent, RunStartRequest } from "@nodefabric/schemas";

/** The headers that carry a caller's identity and trace to the gateway's routes. */
export type CallerHeaders = Record<string, string>;

/** Who calls, for the gateway: the headers passed on, and the principal the face's route authenticated. */
export interface FaceCaller {
  headers: CallerHeaders;
  /** `request.principal` of the face's request (undefined when authentication is disabled). */
  verified?: Principal;
}

/** What the gateway answered: its status and parsed body (an ErrorEnvelope when not 2xx). */
export interface FaceAnswer<T> {
  status: number;
  body: T;
  headers: Record<string, string | string[] | number | undefined>;
}

export interface FaceErrorBody {
  error?: { code?: string; message?: string; details?: unknown };
}

/** The identity and tracing headers of an incoming request worth passing on. */
export function callerHeaders(headers: Record<string, string | string[] | undefined>): CallerHeaders {
  const out: CallerHeaders = {};
  for (const k of ["authorization", "traceparent", "tracestate"]) {
    const v = headers[k];
    if (typeof v === "string" && v !== "") out[k] = v;
  }
  return out;
}

const seg = encodeURIComponent;

export class GatewayCalls {
  /** `runs`: the gateway's POST /v1/runs in process (without it, as for a core that has none, runs start by inject). */
  constructor(private readonly app: FastifyInstance, private readonly runs?: RunGatewayApi) {}

  private async call<T>(method: "GET" | "POST", url: string, caller: CallerHeaders, body?: unknown, extra: Record<string, string> = {}): Promise<FaceAnswer<T>> {
    const res = await this.app.inject({
      method,
      url,
      headers: { ...caller, ...extra, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });
    let parsed: unknown = undefined;
    if (res.body !== "") {
      try {
        parsed = JSON.parse(res.body);
      } catch {
        parsed = { error: { code: "internal_error", message: res.body.slice(0, 200) } };
      }
    }
    return { status: res.statusCode, body: parsed as T, headers: res.headers };
  }

  /** POST /v1/runs, held for up to `waitSeconds` (Prefer: wait) for the run's end. */
  async startRun(request: RunStartRequest, caller: FaceCaller, waitSeconds: number): Promise<FaceAnswer<Run & FaceErrorBody>> {
    if (!this.runs) return this.call("POST", "/v1/runs", caller.headers, request, waitSeconds > 0 ? { prefer: `wait=${waitSeconds}` } : {});
    const answer = await this.runs.startRun(request, { principal: caller.verified, headers: caller.headers }, waitSeconds > 0 ? waitSeconds : undefined);
    return answer as FaceAnswer<Run & FaceErrorBody>;
  }

  getRun(runId: string, caller: CallerHeaders): Promise<FaceAnswer<Run & FaceErrorBody>> {
    return this.call("GET", `/v1/runs/${seg(runId)}`, caller);
  }

  cancelRun(runId: string, caller: CallerHeaders): Promise<FaceAnswer<Run & FaceErrorBody>> {
    return this.call("POST", `/v1/runs/${seg(runId)}:cancel`, caller);
  }

  /** GET /v1/runs with the caller's identity (their tenant's runs only). */
  listRuns(query: Record<string, string>, caller: CallerHeaders): Promise<FaceAnswer<Run[] & FaceErrorBody>> {
    const qs = new URLSearchParams(query).toString();
    return this.call("GET", `/v1/runs${qs ? `?${qs}` : ""}`, caller);
  }

  /** POST /v1/approvals/{id}:approve or :reject, with the caller's rights (the approvals API's own checks). */
  decideApproval(approvalId: string, decision: "approve" | "reject", caller: CallerHeaders, reason?: string): Promise<FaceAnswer<FaceErrorBody>> {
    return this.call("POST", `/v1/approvals/${seg(approvalId)}:${decision}`, caller, reason !== undefined ? { reason } : {});
  }

  /** The approvals waiting in a run. */
  async pendingApprovals(runId: string, caller: CallerHeaders): Promise<{ approval_id: string; node_run_id?: string; reason?: string }[]> {
    const res = await this.call<unknown>("GET", `/v1/approvals?run_id=${seg(runId)}&state=pending`, caller);
    if (res.status !== 200 || !Array.isArray(res.body)) return [];
    return res.body as { approval_id: string }[];
  }

  /**
   * Follows a run's events (GET /v1/runs/{id}/events, follow) until the stream ends or `signal` aborts, calling
   * `onEvent` for each. Resolves when the run's last event was seen (or the stream closed).
   */
  async followEvents(runId: string, caller: CallerHeaders, afterSeq: number | undefined, onEvent: (e: RunEvent) => void, signal: AbortSignal): Promise<void> {
    const q = afterSeq !== undefined ? `&after_seq=${afterSeq}` : "";
    const res = await this.app.inject({ method: "GET", url: `/v1/runs/${seg(runId)}/events?follow=true${q}`, headers: caller, payloadAsStream: true, signal } as never);
    if (res.statusCode !== 200) return;
    const stream = res.stream();
    const stop = () => stream.destroy();
    signal.addEventListener("abort", stop, { once: true });
    let buf = "";
    try {
      for await (const chunk of stream) {
        buf += typeof chunk === "string" ? chunk : (chunk as Buffer).toString("utf8");
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line === "") continue;
          try {
            onEvent(JSON.parse(line) as RunEvent);
          } catch {
            // a line that is not an event is skipped
          }
        }
      }
    } catch {
      // aborted or closed: the caller reads the run's state next
    } finally {
      signal.removeEventListener("abort", stop);
    }
  }
}

/**
 * Waits for a run's end: follows its events through the gateway (reporting them to `onEvent`) until the stream ends,
 * then reads the Run. Resolves undefined when `signal` aborts first.
 */
export async function followToEnd(calls: GatewayCalls, runId: string, caller: CallerHeaders, signal: AbortSignal, onEvent?: (e: RunEvent) => void): Promise<FaceAnswer<Run & FaceErrorBody> | undefined> {
  let lastSeq: number | undefined;
  for (let round = 0; round < 1000 && !signal.aborted; round++) {
    let ended = false;
    await calls.followEvents(
      runId,
      caller,
      lastSeq,
      (e) => {
        lastSeq = e.seq;
        if (e.type === "run_completed") ended = true;
        onEvent?.(e);
      },
      signal,
    );
    if (signal.aborted) return undefined;
    const run = await calls.getRun(runId, caller);
    if (run.status !== 200 || ended || TERMINAL.has(run.body.state)) return run;
    await new Promise((r) => setTimeout(r, 200));
  }
  return undefined;
}
