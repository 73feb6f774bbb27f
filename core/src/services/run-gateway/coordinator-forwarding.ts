/**
 * How the gateway relays one JSON request to the Run Coordinator and relays the answer back unchanged: the same
 * status, the same ErrorEnvelope, and the few response headers a client relies on.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Dispatcher } from "undici";
import { schemaId } from "@nodefabric/schemas";
import { errorFromResponse, type JsonResponse } from "../../clients/http-client.js";
import { sharedAjv } from "../../http/validation.js";
import type { CoordinatorPool, Replay } from "./coordinator-pool.js";

/** Request headers that travel from the client to the coordinator. */
const FORWARDED_REQUEST_HEADERS = ["authorization", "x-request-id", "traceparent", "tracestate"] as const;

/** Response headers that travel from the coordinator back to the client. */
const RELAYED_RESPONSE_HEADERS = ["preference-applied", "x-next-page-token", "retry-after", "www-authenticate"] as const;

/**
 * The headers of an incoming request that the coordinator must see (identity and tracing), plus `extra`; without
 * `withAuthorization` the client's own Authorization header stays behind.
 */
export function forwardedHeaders(req: Pick<FastifyRequest, "headers"> | { headers: Record<string, string | undefined> }, extra: Record<string, string | undefined> = {}, withAuthorization = true): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of FORWARDED_REQUEST_HEADERS) {
    if (name === "authorization" && !withAuthorization) continue;
    const v = (req.headers as Record<string, string | string[] | undefined>)[name];
    if (typeof v === "string" && v !== "") out[name] = v;
  }
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) out[k] = v;
  return out;
}

/** The response headers of an upstream answer that travel back to the client. */
export function relayedHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name of RELAYED_RESPONSE_HEADERS) {
    const v = headers[name];
    if (typeof v === "string" || Array.isArray(v)) out[name] = v;
  }
  return out;
}

/** Copies the relayed response headers of an upstream answer onto the reply. */
export function relayHeaders(reply: FastifyReply, headers: Record<string, string | string[] | undefined>): void {
  for (const name of RELAYED_RESPONSE_HEADERS) {
    const v = headers[name];
    if (typeof v === "string" || Array.isArray(v)) reply.header(name, v);
  }
}

let envelopeCheck: ((value: unknown) => boolean) | undefined;

/** Whether an upstream's non-2xx body is a valid ErrorEnvelope (relayed as it came) rather than something else. */
export function isErrorEnvelope(value: unknown): boolean {
  envelopeCheck ??= sharedAjv().getSchema(schemaId("error_envelope")) as (value: unknown) => boolean;
  return envelopeCheck(value);
}

/**
 * Answers with a coordinator's non-2xx exactly as it came: status and ErrorEnvelope. An answer without a valid
 * envelope is not passed on raw; it becomes the FabricError its status implies.
 */
export function relayError(reply: FastifyReply, baseUrl: string, status: number, body: unknown, headers: Record<string, string | string[] | undefined>): FastifyReply {
  if (!isErrorEnvelope(body)) throw errorFromResponse(baseUrl, status, body, headers);
  relayHeaders(reply, headers);
  return reply.code(status).type("application/json; charset=utf-8").send(body);
}

/** Sends an upstream JSON answer (2xx or not) back to the client. */
export function relayResponse(reply: FastifyReply, baseUrl: string, res: JsonResponse<unknown>): FastifyReply {
  if (res.status < 200 || res.status >= 300) return relayError(reply, baseUrl, res.status, res.body, res.headers);
  relayHeaders(reply, res.headers);
  reply.code(res.status);
  return res.status === 204 || res.body === null ? reply.send() : reply.send(res.body);
}

export interface ForwardOptions {
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  timeoutMs?: number;
  /**
   * What may be sent again to another coordinator after a transport failure: by default only a request that never
   * went out; "any" for a request that is safe to repeat (a read, a start with a client-chosen run_id).
   */
  replay?: Replay;
}

/**
 * Forwards one request to a live coordinator and relays its answer; transport failures that may not move on to
 * another coordinator (or that every one gave) surface as 502/504.
 */
export async function forward(
  pool: CoordinatorPool,
  reply: FastifyReply,
  method: Dispatcher.HttpMethod,
  path: string,
  options: ForwardOptions = {},
): Promise<FastifyReply> {
  const { value: res, baseUrl } = await pool.request(method, path, options.body, { query: options.query, headers: options.headers, timeoutMs: options.timeoutMs }, options.replay ?? "unsent");
  return relayResponse(reply, baseUrl, res);
}
