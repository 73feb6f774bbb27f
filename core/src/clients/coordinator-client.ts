/**
 * Typed client of the Run Coordinator's node-run API, as a composite executor uses it: create children, follow the
 * composite's event stream, report evaluations and complete. Every call may carry the NodeRun's assignment token.
 */
import type {
  NodeRun,
  NodeRunCompleteRequest,
  NodeRunEvaluationReportRequest,
  NodeRunsCreateRequest,
  NodeRunsCreateResponse,
  RunEvent,
} from "@nodefabric/schemas";
import { HttpClient, errorFromResponse, type HttpClientOptions } from "./http-client.js";

export interface FollowOptions {
  /** Resume after this seq (default: from the first event). */
  afterSeq?: number;
  /** The assignment token of the NodeRun. */
  token?: string;
  /** Stops following; the returned promise then resolves. */
  signal?: AbortSignal;
  /**
   * Only events of these types are wanted: the coordinator sends no others (the `types` query extension), and a
   * line that mentions none of them is skipped unparsed (a fan-out of 10,000 children has about 80,000 events, most
   * of which a composite does not need).
   */
  types?: string[];
}

function auth(token: string | undefined): Record<string, string> | undefined {
  return token ? { authorization: `Bearer ${token}` } : undefined;
}

const path = (nodeRunId: string, suffix = "") => `/v1/node-runs/${encodeURIComponent(nodeRunId)}${suffix}`;

/** Talks to one Run Coordinator over HTTP. */
export class CoordinatorClient {
  readonly http: HttpClient;

  constructor(
    baseUrl: string,
    private readonly options: HttpClientOptions = {},
  ) {
    this.http = new HttpClient(baseUrl, options);
  }

  /** POST /v1/node-runs: creates children of a running composite; the NodeRuns come back in spec order. */
  async createNodeRuns(request: NodeRunsCreateRequest, token?: string): Promise<NodeRun[]> {
    const res = await this.http.json<NodeRunsCreateResponse>("POST", "/v1/node-runs", request, { headers: auth(token) });
    return res.node_runs;
  }

  /** GET /v1/node-runs/{id}. */
  getNodeRun(nodeRunId: string, token?: string): Promise<NodeRun> {
    return this.http.json<NodeRun>("GET", path(nodeRunId), undefined, { headers: auth(token) });
  }

  /** POST /v1/node-runs/{id}:evaluation. */
  async reportEvaluation(nodeRunId: string, body: NodeRunEvaluationReportRequest, token?: string): Promise<void> {
    await this.http.json("POST", path(nodeRunId, ":evaluation"), body, { headers: auth(token) });
  }

  /** POST /v1/node-runs/{id}:progress (an extension): how far an atomic execution is. */
  async reportProgress(nodeRunId: string, body: { progress: number; total?: number; message?: string }, token?: string): Promise<void> {
    await this.http.json("POST", path(nodeRunId, ":progress"), body, { headers: auth(token) });
  }

  /** POST /v1/node-runs/{id}:output-delta (an extension): text an atomic execution wrote, as it came. */
  async reportOutputDelta(nodeRunId: string, body: { text: string; index: number; offset: number; attempt: number; truncated?: true }, token?: string): Promise<void> {
    await this.http.json("POST", path(nodeRunId, ":output-delta"), body, { headers: auth(token) });
  }

  /** POST /v1/node-runs/{id}:checkpoint (an extension): what the NodeRun's next execution resumes from. */
  async saveCheckpoint(nodeRunId: string, checkpoint: Record<string, unknown>, token?: string): Promise<void> {
    await this.http.json("POST", path(nodeRunId, ":checkpoint"), { checkpoint }, { headers: auth(token) });
  }

  /** POST /v1/node-runs/{id}:complete (409 node_run_terminal when it has already ended). */
  async completeNodeRun(nodeRunId: string, body: NodeRunCompleteRequest, token?: string): Promise<void> {
    await this.http.json("POST", path(nodeRunId, ":complete"), body, { headers: auth(token) });
  }

  /**
   * Follows GET /v1/node-runs/{id}/events (the NodeRun and all its descendants), handing each event to `onEvent` in
   * order. Resolves when the coordinator closes the stream or `signal` fires; throws a FabricError when the stream
   * cannot be opened or breaks.
   */
  async followNodeRunEvents(nodeRunId: string, onEvent: (event: RunEvent) => void, options: FollowOptions = {}): Promise<void> {
    const query: Record<string, string | number | boolean> = options.afterSeq !== undefined && options.afterSeq >= 0 ? { follow: true, after_seq: options.afterSeq } : { follow: true };
    // The coordinator filters by type too (an extension), so the rest never crosses the wire.
    if (options.types) query.types = options.types.join(",");
    // A stream stays open for a composite's whole life, so it never takes a connection from the calls' pool; its own
    // client is closed with it, which also drops the spare connection undici may open after an aborted request.
    const streams = new HttpClient(this.http.baseUrl, { ...this.options, connections: 1, bodyTimeoutMs: 0 });
    try {
      let res;
      try {
        res = await streams.stream(path(nodeRunId, "/events"), { query, headers: auth(options.token), signal: options.signal });
      } catch (err) {
        if (options.signal?.aborted) return;
        throw err;
      }
      if (res.statusCode !== 200) {
        const text = await res.body.text().catch(() => "");
        let body: unknown = null;
        try {
          body = text ? JSON.parse(text) : null;
        } catch {
          // Not an ErrorEnvelope; the status alone says what went wrong.
        }
        throw errorFromResponse(streams.baseUrl, res.statusCode, body, res.headers);
      }
      const types = options.types;
      res.body.setEncoding("utf8");
      let buffer = "";
      try {
        for await (const chunk of res.body as AsyncIterable<string>) {
          buffer += chunk;
          let start = 0;
          let nl: number;
          while ((nl = buffer.indexOf("\n", start)) >= 0) {
            if (nl > start) {
              const line = buffer.slice(start, nl);
              if (!types || types.some((t) => line.includes(t))) onEvent(JSON.parse(line) as RunEvent);
            }
            start = nl + 1;
          }
          buffer = start === 0 ? buffer : buffer.slice(start);
        }
      } catch (err) {
        if (options.signal?.aborted) return;
        throw errorFromResponse(streams.baseUrl, 502, { error: { code: "upstream_unavailable", message: `the event stream of ${nodeRunId} broke: ${(err as Error).message}` } });
      }
    } finally {
      await streams.close().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    await this.http.close();
  }
}
