/**
 * Typed client of a PDP: `POST /v1/policy:decide`, and `POST /v1/policy:decideBatch` (our extension) for several
 * questions in one exchange. A PDP without the batch endpoint (an older one during a rolling upgrade, or another
 * vendor's) is remembered for a while and asked one question at a time (docs/pdp.md, "Several decisions in one request").
 */
import type { PolicyDecision, PolicyDecisionBatchResponse, PolicyDecisionRequest } from "@nodefabric/schemas";
import { clock } from "../clock.js";
import { FabricError } from "../http/errors.js";
import { HttpClient, errorFromResponse, type HttpClientOptions } from "./http-client.js";
import type { PolicyClient } from "../engine-ports.js";

/** The most requests one `POST /v1/policy:decideBatch` takes (its body schema's bound). */
export const MAX_DECISION_BATCH = 100;

/** How long a PDP that has no batch endpoint is asked one question at a time before the batch is tried again. */
export const DEFAULT_BATCH_RETRY_MS = 5 * 60_000;

/** Statuses that say the PDP has no batch endpoint: no such route, not that method, not implemented. */
const NO_BATCH = new Set([404, 405, 501]);

export interface PolicyClientOptions extends HttpClientOptions {
  /** How long a PDP without the batch endpoint is asked one question at a time (ms, default 5 min). */
  batchRetryMs?: number;
  /** Told each time the PDP is found without the batch endpoint (the status it answered), for a log line. */
  onBatchUnsupported?: (status: number) => void;
}

/** The status of a refusal whose body was not JSON (another vendor's 404 page), from the error `send` throws. */
function statusOfUnreadable(err: unknown): number | undefined {
  const status = FabricError.is(err) ? (err.details as { status?: unknown } | undefined)?.status : undefined;
  return typeof status === "number" ? status : undefined;
}

/** Asks a PDP over HTTP; throws when it cannot be reached or answers an error. */
export class HttpPolicyClient implements PolicyClient {
  readonly http: HttpClient;
  private readonly batchRetryMs: number;
  private readonly onBatchUnsupported?: (status: number) => void;
  /** Until when (epoch ms) this PDP is taken to have no batch endpoint. */
  private noBatchUntil = 0;

  constructor(baseUrl: string, options: PolicyClientOptions = {}) {
    const { batchRetryMs, onBatchUnsupported, ...http } = options;
    this.http = new HttpClient(baseUrl, { headersTimeoutMs: 5_000, ...http });
    this.batchRetryMs = batchRetryMs ?? DEFAULT_BATCH_RETRY_MS;
    this.onBatchUnsupported = onBatchUnsupported;
  }

  decide(request: PolicyDecisionRequest): Promise<PolicyDecision> {
    return this.http.json<PolicyDecision>("POST", "/v1/policy:decide", request);
  }

  /**
   * The decisions for `requests` from `POST /v1/policy:decideBatch`, in order; more than MAX_DECISION_BATCH go in
   * several requests. Undefined when the PDP has no batch endpoint (404, 405 or 501: remembered for `batchRetryMs`,
   * with no request sent meanwhile) or finds the questions too large together (413); the caller asks one at a time.
   * Throws as `decide` does when the PDP cannot be reached or answers another error, and when its answer does not
   * hold one decision per request.
   */
  async decideMany(requests: PolicyDecisionRequest[]): Promise<PolicyDecision[] | undefined> {
    if (requests.length === 0) return [];
    if (clock.now() < this.noBatchUntil) return undefined;
    if (requests.length > MAX_DECISION_BATCH) {
      const out: PolicyDecision[] = [];
      for (let i = 0; i < requests.length; i += MAX_DECISION_BATCH) {
        const part = await this.decideMany(requests.slice(i, i + MAX_DECISION_BATCH));
        if (!part) return undefined;
        out.push(...part);
      }
      return out;
    }
    let res;
    try {
      res = await this.http.request<PolicyDecisionBatchResponse>("POST", "/v1/policy:decideBatch", { requests });
    } catch (err) {
      const status = statusOfUnreadable(err);
      if (status !== undefined && NO_BATCH.has(status)) return this.noBatch(status);
      throw err;
    }
    if (res.status >= 200 && res.status < 300) {
      const decisions = res.body?.decisions;
      if (!Array.isArray(decisions) || decisions.length !== requests.length) {
        throw new Error(`the PDP answered ${Array.isArray(decisions) ? decisions.length : "no"} decisions to ${requests.length} questions`);
      }
      return decisions;
    }
    if (NO_BATCH.has(res.status)) return this.noBatch(res.status);
    // The questions together may be more than the PDP takes in one body where each alone is not.
    if (res.status === 413) return undefined;
    throw errorFromResponse(this.http.baseUrl, res.status, res.body, res.headers);
  }

  private noBatch(status: number): undefined {
    this.noBatchUntil = clock.now() + this.batchRetryMs;
    this.onBatchUnsupported?.(status);
    return undefined;
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
