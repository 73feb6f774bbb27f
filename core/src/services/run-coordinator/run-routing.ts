/**
 * Requests that change a run go to the coordinator that holds it. With one coordinator (the embedded store) every
 * run is local and this does nothing. With several on one PostgreSQL database, a request for a run another
 * coordinator holds is forwarded to it as it came (method, path, body and the caller's credentials), and its answer
 * is relayed unchanged. A forwarded request is never forwarded again: if the run moved meanwhile, the answer is a
 * retryable 503.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Dispatcher } from "undici";
import { HttpClient, errorFromResponse, type JsonResponse } from "../../clients/http-client.js";
import { FabricError } from "../../http/errors.js";
import { CALLER_HEADER, encodeCaller } from "../../http/auth-plugin.js";
import type { ServiceTokens } from "../../clients/service-tokens.js";
import type { RunEngine, Caller } from "../../engine/run-engine.js";
import type { RunPlace } from "../../engine/ownership.js";
import { relayResponse } from "../run-gateway/coordinator-forwarding.js";

/** Set on a request one coordinator forwards to another: the forwarding coordinator's instance id. */
export const FORWARDED_BY = "x-nodefabric-forwarded-by";

const PASSED_ON = ["authorization", CALLER_HEADER, "x-request-id", "traceparent", "tracestate"] as const;

type RemotePlace = Extract<RunPlace, { local: false }> & { endpoint: string };

export class RunRouting {
  private readonly peers = new Map<string, HttpClient>();

  constructor(
    private readonly engine: RunEngine,
    private readonly instanceId: string,
    private readonly tokens?: ServiceTokens,
    private readonly timeoutMs = 30_000,
  ) {}

  /** Where a run's writes go; local for a run the store does not know (the engine answers its 404). */
  private async place(runId: string | undefined, forwarded: boolean): Promise<RemotePlace | undefined> {
    if (runId === undefined) return undefined;
    const place = await this.engine.placeOf(runId);
    if (!place || place.local) return undefined;
    if (forwarded || place.endpoint === null) {
      const why = forwarded ? "moved to another coordinator while this request was forwarded" : "is held by a coordinator that has not announced its address yet";
      throw new FabricError("unavailable", `run ${runId} ${why}; try again`, {
        retryable: true,
        details: { run_id: runId },
        headers: { "retry-after": "1" },
      });
    }
    return place as RemotePlace;
  }

  private client(endpoint: string): HttpClient {
    let c = this.peers.get(endpoint);
    if (!c) {
      c = new HttpClient(endpoint, { connections: 16, headersTimeoutMs: this.timeoutMs, bodyTimeoutMs: this.timeoutMs });
      this.peers.set(endpoint, c);
    }
    return c;
  }

  private async send(place: RemotePlace, method: Dispatcher.HttpMethod, path: string, body: unknown, headers: Record<string, string>): Promise<JsonResponse<unknown>> {
    try {
      return await this.client(place.endpoint).request(method, path, body, { headers: { ...headers, [FORWARDED_BY]: this.instanceId }, timeoutMs: this.timeoutMs });
    } catch (err) {
      // The holder is unreachable: once its lease runs out the run is taken over, and a retry lands here.
      throw new FabricError("unavailable", `the coordinator holding this run (${place.owner}) cannot be reached: ${(err as Error).message}`, {
        retryable: true,
        details: { owner: place.owner },
        headers: { "retry-after": "1" },
      });
    }
  }

  /**
   * For a route: forwards the request when another coordinator holds `runId`, and answers true once the reply is
   * sent; false means "serve it here".
   */
  async forwardRequest(req: FastifyRequest, reply: FastifyReply, runId: string | undefined): Promise<boolean> {
    const place = await this.place(runId, typeof req.headers[FORWARDED_BY] === "string");
    if (!place) return false;
    const headers: Record<string, string> = {};
    for (const name of PASSED_ON) {
      const v = req.headers[name];
      if (typeof v === "string" && v !== "") headers[name] = v;
    }
    const res = await this.send(place, req.method as Dispatcher.HttpMethod, req.url, req.body, headers);
    relayResponse(reply, place.endpoint, res);
    return true;
  }

  /**
   * For an in-process call (a gateway in this process): runs `local` when the run is here, otherwise sends the
   * same operation to its holder on behalf of `caller`, carrying `scope` (the scope of the operation, which the
   * gateway in this process already checked at its edge), with `body` when given. Answers undefined for a 204.
   */
  async call<T>(runId: string | undefined, caller: Caller, scope: string, method: Dispatcher.HttpMethod, path: string, local: () => Promise<T>, body?: unknown): Promise<T> {
    const place = await this.place(runId, false);
    if (!place) return local();
    const headers: Record<string, string> = {};
    if (this.tokens) {
      headers.authorization = `Bearer ${await this.tokens.token("run-coordinator")}`;
      headers[CALLER_HEADER] = encodeCaller(
        caller.authenticated
          ? { kind: "token", sub: caller.sub, iss: caller.iss, tenant_id: caller.tenant_id ?? undefined, scopes: new Set([scope]) }
          : { kind: "anonymous", scopes: new Set() },
      );
    }
    const res = await this.send(place, method, path, body, headers);
    if (res.status >= 200 && res.status < 300) return (res.status === 204 ? undefined : res.body) as T;
    throw errorFromResponse(place.endpoint, res.status, res.body, res.headers);
  }

  async close(): Promise<void> {
    await Promise.all([...this.peers.values()].map((c) => c.close()));
  }
}
