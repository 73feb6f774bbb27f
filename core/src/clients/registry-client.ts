/**
 * Typed client of the Node Registry (`/v1/node-types`, and the executor directory `/v1/executors`).
 */
import type { NodeType, NodeTypeRef } from "@nodefabric/schemas";
import { FabricError } from "../http/errors.js";
import type { NodeTypeDirectory } from "../engine-ports.js";
import { HttpClient, errorFromResponse, type HttpClientOptions } from "./http-client.js";

/** What an executor tells the registry's directory about itself (`PUT /v1/executors/{id}`, an extension). */
export interface ExecutorRegistration {
  endpoint: string;
  kind: "atomic" | "composite";
  node_types: NodeTypeRef[];
  extensions?: Record<string, unknown>;
}

/** A directory entry as the registry stores it. */
export interface ExecutorEntry extends ExecutorRegistration {
  executor_instance_id: string;
  registered_at: string;
}

export interface NodeTypeListQuery {
  q?: string;
  kind?: "atomic" | "composite";
  limit?: number;
  page_token?: string;
}

/** Body of PUT /v1/executors/{executor_instance_id}: an executor announcing itself (same as ExecutorRegistration). */
export type ExecutorRegistrationBody = ExecutorRegistration;

/** The most NodeTypes one `POST /v1/node-types:batch` takes. */
export const MAX_BATCH = 500;

/** True for the answer of a registry that has no `POST /v1/node-types:batch` (one older than the endpoint). */
export function isBatchUnsupported(err: unknown): boolean {
  return FabricError.is(err) && (err.statusCode === 405 || (err.statusCode === 404 && (err.code as string) === "route_not_found"));
}

/** What a heartbeat learns: whether the registry still lists the executor, and for how long (its TTL) when it says. */
export type HeartbeatAnswer =
  | { registered: true; ttlMs?: number }
  /** `unsupported`: a registry older than heartbeats (no such route); registering again is its heartbeat. */
  | { registered: false; unsupported?: true };

/** The registry's executor TTL from an answer's `x-executor-ttl-ms`, when it is a positive integer. */
export function executorTtlOf(headers: Record<string, string | string[] | undefined>): number | undefined {
  const v = headers["x-executor-ttl-ms"];
  const n = typeof v === "string" && /^\d+$/.test(v) ? Number(v) : NaN;
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** Talks to a Node Registry over HTTP. */
export class RegistryClient implements NodeTypeDirectory {
  readonly http: HttpClient;

  constructor(baseUrl: string, options?: HttpClientOptions) {
    this.http = new HttpClient(baseUrl, options);
  }

  /** Publishes one NodeType version (200 when new or identical, 409 node_type_version_conflict otherwise). */
  publish(nodeType: NodeType): Promise<NodeType> {
    return this.http.json<NodeType>("POST", "/v1/node-types", { node_type: nodeType });
  }

  /**
   * Publishes NodeType versions in batches (`POST /v1/node-types:batch`, an extension), each all or nothing: a refusal
   * is the registry's FabricError (400 whose `details.errors` point at `/node_types/<i>/…`, or 409 naming the
   * conflicts in `details.conflicts`). More than 500 are sent 500 at a time, and a batch the registry finds too large
   * (413) is halved, so all or nothing holds for what fits in one request. A registry without the batch endpoint (404 or
   * 405) is sent one POST /v1/node-types per NodeType, in order, stopping at the first refusal. Answers the NodeTypes as
   * stored, in the order given.
   */
  async publishMany(nodeTypes: readonly NodeType[], options: { signal?: AbortSignal } = {}): Promise<NodeType[]> {
    if (nodeTypes.length > MAX_BATCH) {
      const out: NodeType[] = [];
      for (let i = 0; i < nodeTypes.length; i += MAX_BATCH) out.push(...(await this.publishMany(nodeTypes.slice(i, i + MAX_BATCH), options)));
      return out;
    }
    if (nodeTypes.length === 0) return [];
    try {
      const res = await this.http.json<{ node_types: NodeType[] }>("POST", "/v1/node-types:batch", { node_types: nodeTypes }, { signal: options.signal });
      return res.node_types;
    } catch (err) {
      if (FabricError.is(err) && err.statusCode === 413 && nodeTypes.length > 1) {
        const half = Math.ceil(nodeTypes.length / 2);
        return [...(await this.publishMany(nodeTypes.slice(0, half), options)), ...(await this.publishMany(nodeTypes.slice(half), options))];
      }
      if (!isBatchUnsupported(err)) throw err;
    }
    const stored: NodeType[] = [];
    for (const nodeType of nodeTypes) stored.push(await this.http.json<NodeType>("POST", "/v1/node-types", { node_type: nodeType }, { signal: options.signal }));
    return stored;
  }

  /** The latest version (the registry's version order, docs/versions.md), or the exact `version`. */
  get(nodeTypeId: string, version?: string): Promise<NodeType> {
    return this.http.json<NodeType>("GET", `/v1/node-types/${encodeURIComponent(nodeTypeId)}`, undefined, { query: { version } });
  }

  /** One page of node types, with the token of the next page when more remain. */
  async listPage(query: NodeTypeListQuery = {}): Promise<{ items: NodeType[]; nextPageToken?: string }> {
    const res = await this.http.request<NodeType[]>("GET", "/v1/node-types", undefined, { query: { ...query } });
    if (res.status !== 200) {
      throw errorFromResponse(this.http.baseUrl, res.status, res.body, res.headers);
    }
    const next = res.headers["x-next-page-token"];
    return { items: res.body, nextPageToken: typeof next === "string" && next ? next : undefined };
  }

  /** Every node type matching the query, following page tokens. */
  async listAll(query: Omit<NodeTypeListQuery, "page_token"> = {}): Promise<NodeType[]> {
    const out: NodeType[] = [];
    let token: string | undefined;
    do {
      const page = await this.listPage({ ...query, page_token: token });
      out.push(...page.items);
      token = page.nextPageToken;
    } while (token);
    return out;
  }

  /** The versions published for an id. */
  versions(nodeTypeId: string): Promise<string[]> {
    return this.http.json<string[]>("GET", `/v1/node-types/${encodeURIComponent(nodeTypeId)}/versions`);
  }

  /** Registers (or re-registers) an executor and the node types it serves; `heartbeat` then keeps it listed. */
  registerExecutor(executorInstanceId: string, registration: ExecutorRegistration): Promise<ExecutorEntry> {
    return this.http.json<ExecutorEntry>("PUT", `/v1/executors/${encodeURIComponent(executorInstanceId)}`, registration);
  }

  /**
   * Tells the registry the executor is alive (`POST /v1/executors/{id}:heartbeat`, an extension). `registered: false`
   * when the registry does not hold it (404): the executor must register again. Other refusals are thrown.
   */
  async heartbeat(executorInstanceId: string, options: { signal?: AbortSignal } = {}): Promise<HeartbeatAnswer> {
    const res = await this.http.request("POST", `/v1/executors/${encodeURIComponent(executorInstanceId)}:heartbeat`, undefined, { signal: options.signal });
    // A registry older than heartbeats takes the path for PUT /v1/executors/{id} (405), or has no such route (404).
    if (res.status === 405) return { registered: false, unsupported: true };
    if (res.status === 404) {
      // The registry's "not registered" names the executor; a 404 that does not is a registry without the route.
      const details = (res.body as { error?: { details?: { executor_instance_id?: unknown } } } | null)?.error?.details;
      return details?.executor_instance_id === undefined ? { registered: false, unsupported: true } : { registered: false };
    }
    if (res.status < 200 || res.status >= 300) throw errorFromResponse(this.http.baseUrl, res.status, res.body, res.headers);
    const ttlMs = executorTtlOf(res.headers);
    return ttlMs === undefined ? { registered: true } : { registered: true, ttlMs };
  }

  /** Executors heard from within the registry's TTL, optionally only those serving a node type (and version). */
  listExecutors(filter: { node_type_id?: string; version?: string } = {}): Promise<ExecutorEntry[]> {
    return this.http.json<ExecutorEntry[]>("GET", "/v1/executors", undefined, { query: { ...filter } });
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
