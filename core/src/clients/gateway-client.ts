/**
 * Typed client of the Run Gateway: start, read and cancel runs, list them, read NodeRuns, resolve approvals,
 * and follow a run's NDJSON event stream.
 */
import type { Approval, ApprovalListQuery as ApprovalListQueryDoc, NodeRun, Run, RunEvent, RunListQuery as RunListQueryDoc, RunStartRequest } from "@nodefabric/schemas";
import { HttpClient, errorFromResponse, type HttpClientOptions } from "./http-client.js";
import { FabricError } from "../http/errors.js";

export interface StartRunOptions {
  /** `Prefer: wait=<seconds>`: hold the answer until the run ends or this many seconds (at most 60) pass. */
  waitSeconds?: number;
}

export interface StartedRun {
  run: Run;
  /** The `Preference-Applied` answer header, when the gateway honoured a wait. */
  preferenceApplied?: string;
}

/** The filters and page of GET /v1/runs (schema run_list_query). */
export type RunListQuery = RunListQueryDoc;
/** The filters and page of GET /v1/approvals (schema approval_list_query). */
export type ApprovalListQuery = ApprovalListQueryDoc;

export interface RunEventsOptions {
  /** Resume after this seq. */
  afterSeq?: number;
  /** Keep the stream open for live events (default true). */
  follow?: boolean;
  signal?: AbortSignal;
}

const seg = encodeURIComponent;
const DEFAULT_TIMEOUT_MS = 30_000;

/** The extension of the gateway's GET /v1/health that names its fabric's Node Registry (a base URL). */
export const REGISTRY_URL_EXTENSION = "nodefabric.registry_url";

/** Talks to a Run Gateway over HTTP. */
export class GatewayClient {
  readonly http: HttpClient;

  constructor(baseUrl: string, options?: HttpClientOptions) {
    this.http = new HttpClient(baseUrl, { connections: 8, ...options });
  }

  /** Starts a run; with `waitSeconds`, the answer is held until it ends or the wait runs out. */
  async startRun(request: RunStartRequest, options: StartRunOptions = {}): Promise<StartedRun> {
    const wait = options.waitSeconds;
    const res = await this.http.request<Run>("POST", "/v1/runs", request, {
      headers: wait === undefined ? undefined : { prefer: `wait=${wait}` },
      timeoutMs: (wait ?? 0) * 1000 + DEFAULT_TIMEOUT_MS,
    });
    if (res.status !== 200) throw errorFromResponse(this.http.baseUrl, res.status, res.body, res.headers);
    const applied = res.headers["preference-applied"];
    return { run: res.body, preferenceApplied: typeof applied === "string" ? applied : undefined };
  }

  /**
   * The base URL of the Node Registry of the gateway's fabric, as its GET /v1/health names it; undefined when the
   * gateway names none (an older gateway) or cannot say.
   */
  async registryUrl(): Promise<string | undefined> {
    type Health = { extensions?: Record<string, unknown> };
    const res = await this.http.request<Health & { error?: { details?: { health?: Health } } }>("GET", "/v1/health", undefined, { timeoutMs: 5_000 });
    // A gateway that is down (503) still says who it is, in the envelope's details.
    const health = res.status === 200 ? res.body : res.status === 503 ? res.body?.error?.details?.health : undefined;
    const url = health?.extensions?.[REGISTRY_URL_EXTENSION];
    return typeof url === "string" && /^https?:\/\//.test(url) ? url : undefined;
  }

  /** The Run as it stands. */
  getRun(runId: string): Promise<Run> {
    return this.http.json<Run>("GET", `/v1/runs/${seg(runId)}`);
  }

  /** Cancels a run (a run that already ended comes back unchanged). */
  cancelRun(runId: string): Promise<Run> {
    return this.http.json<Run>("POST", `/v1/runs/${seg(runId)}:cancel`);
  }

  /** One page of recent runs, with the token of the next page when more remain. */
  async listRuns(query: RunListQuery = {}): Promise<{ items: Run[]; nextPageToken?: string }> {
    const res = await this.http.request<Run[]>("GET", "/v1/runs", undefined, { query: { ...query } });
    if (res.status !== 200) throw errorFromResponse(this.http.baseUrl, res.status, res.body, res.headers);
    const next = res.headers["x-next-page-token"];
    return { items: res.body, nextPageToken: typeof next === "string" && next ? next : undefined };
  }

  /** One page of approvals, newest first, with the token of the next page when more remain. */
  async listApprovals(query: ApprovalListQuery = {}): Promise<{ items: Approval[]; nextPageToken?: string }> {
    const res = await this.http.request<Approval[]>("GET", "/v1/approvals", undefined, { query: { ...query } });
    if (res.status !== 200) throw errorFromResponse(this.http.baseUrl, res.status, res.body, res.headers);
    const next = res.headers["x-next-page-token"];
    return { items: res.body, nextPageToken: typeof next === "string" && next ? next : undefined };
  }

  /** Every NodeRun of a run. */
  listNodeRuns(runId: string): Promise<NodeRun[]> {
    return this.http.json<NodeRun[]>("GET", `/v1/runs/${seg(runId)}/node-runs`);
  }

  /** One NodeRun. */
  getNodeRun(nodeRunId: string): Promise<NodeRun> {
    return this.http.json<NodeRun>("GET", `/v1/node-runs/${seg(nodeRunId)}`);
  }

  /** Approves a pending approval, with the person's reason when given; the NodeRun waiting on it proceeds. */
  async approve(approvalId: string, reason?: string): Promise<void> {
    await this.http.json("POST", `/v1/approvals/${seg(approvalId)}:approve`, reason === undefined ? undefined : { reason });
  }

  /** Rejects a pending approval, with the person's reason when given; the NodeRun waiting on it fails with approval_rejected. */
  async reject(approvalId: string, reason?: string): Promise<void> {
    await this.http.json("POST", `/v1/approvals/${seg(approvalId)}:reject`, reason === undefined ? undefined : { reason });
  }

  /**
   * A run's events as they arrive. A non-2xx is thrown as the FabricError it carries before the first event;
   * a stream cut off midway throws `upstream_unavailable`, so the caller can resume with `afterSeq`.
   */
  async *events(runId: string, options: RunEventsOptions = {}): AsyncGenerator<RunEvent> {
    const res = await this.http.stream(`/v1/runs/${seg(runId)}/events`, {
      query: { after_seq: options.afterSeq, follow: options.follow === undefined ? undefined : String(options.follow) },
      signal: options.signal,
    });
    if (res.statusCode < 200 || res.statusCode >= 300) {
      const text = await res.body.text();
      let body: unknown = null;
      try {
        body = text ? JSON.parse(text) : null;
      } catch {
        // not JSON: errorFromResponse names the status instead
      }
      throw errorFromResponse(this.http.baseUrl, res.statusCode, body, res.headers);
    }
    res.body.setEncoding("utf8");
    let pending = "";
    try {
      for await (const chunk of res.body as AsyncIterable<string>) {
        pending += chunk;
        let nl: number;
        while ((nl = pending.indexOf("\n")) >= 0) {
          const line = pending.slice(0, nl).trim();
          pending = pending.slice(nl + 1);
          if (line) yield JSON.parse(line) as RunEvent;
        }
      }
    } catch (err) {
      if (options.signal?.aborted || FabricError.is(err)) throw err;
      if (err instanceof SyntaxError) throw new FabricError("upstream_unavailable", `the event stream sent a line that is not JSON: ${err.message}`);
      throw new FabricError("upstream_unavailable", `the event stream from ${this.http.baseUrl} broke off (${(err as { code?: string }).code ?? (err as Error).message})`, { retryable: true, cause: err });
    } finally {
      // Leaving the loop early (break, return) must not leave the connection streaming.
      if (!res.body.destroyed) res.body.destroy();
    }
    const rest = pending.trim();
    if (rest) yield JSON.parse(rest) as RunEvent;
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
