/**
 * Every HTTP call the console makes, and nothing else does: the gateway's run API (same origin) and the registry's
 * node types and executors (the origin in /console/config.json, allowed by the registry's CORS answer). Each call
 * sends the kept bearer token; a 401 sends the page to #/login. Every non-2xx becomes an ApiError carrying the
 * ErrorEnvelope the fabric sends.
 */
import type { Approval, ErrorEnvelope, FabricErrorBody, NodeRun, NodeType, Run, RunEvent, RunStartRequest } from "@nodefabric/schemas";
import { getToken } from "./auth";
import { currentHash } from "./router";

export type { Approval, FabricErrorBody, NodeRun, NodeType, Run, RunEvent, RunStartRequest };

/** What GET /console/config.json says: where the registry is, and how callers authenticate. */
export interface ConsoleConfig {
  /** The registry's base URL as this browser reaches it. */
  registry_url: string;
  auth: {
    /** Whether the API needs a bearer token (auth mode "required"). */
    required: boolean;
    /** The mode: "required", "optional" or "disabled". */
    mode?: string;
    /** An OpenID provider the page may log in with (authorization code with PKCE), when configured. */
    oidc: null | { issuer: string; client_id: string; scope?: string };
  };
  /** Where a run's trace is shown: a URL template holding `{trace_id}` (FABRIC_CONSOLE_TRACE_URL), or null. */
  trace_url?: string | null;
  /** Regular expressions whose matches the node panel shows as "[redacted]" (FABRIC_CONSOLE_REDACT). */
  redact?: string[];
}

/** An executor in the registry's directory (GET /v1/executors). */
export interface Executor {
  executor_instance_id: string;
  endpoint: string;
  kind: "atomic" | "composite";
  node_types: Array<{ node_type_id: string; version: string }>;
  registered_at: string;
  extensions?: Record<string, unknown>;
}

/** A page of a keyset-paged list: the items, and the token of the next (older) page when there is one. */
export interface Page<T> {
  items: T[];
  nextPageToken?: string;
}

/** A refused call: its HTTP status, the envelope's code, and the whole envelope. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly envelope?: ErrorEnvelope;
  constructor(status: number, code: string, message: string, envelope?: ErrorEnvelope) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.envelope = envelope;
  }
  /** The envelope's error (code, message, details, cause), or one made from the status. */
  get error(): FabricErrorBody {
    return this.envelope?.error ?? { code: this.code, message: this.message };
  }
}

// ------------------------------------------------------------------------------------------------ plumbing

let configPromise: Promise<ConsoleConfig> | undefined;

/** The console's configuration (fetched once per page load). */
export function loadConfig(): Promise<ConsoleConfig> {
  configPromise ??= fetch(`${import.meta.env.BASE_URL}config.json`, { headers: { accept: "application/json" } }).then(async (res) => {
    if (!res.ok) {
      configPromise = undefined;
      throw await errorOf(res);
    }
    return (await res.json()) as ConsoleConfig;
  });
  return configPromise;
}

type Query = Record<string, string | number | boolean | undefined | null>;

function withQuery(path: string, query: Query = {}): string {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== "") qs.set(k, String(v));
  const s = qs.toString();
  return s ? `${path}?${s}` : path;
}

function headers(extra: Record<string, string> = {}): Record<string, string> {
  const h: Record<string, string> = { accept: "application/json", ...extra };
  const token = getToken();
  if (token) h.authorization = `Bearer ${token}`;
  return h;
}

async function errorOf(res: Response): Promise<ApiError> {
  let envelope: ErrorEnvelope | undefined;
  try {
    const body = (await res.json()) as ErrorEnvelope;
    if (body && typeof body === "object" && body.error && typeof body.error.code === "string") envelope = body;
  } catch {
    // not JSON (a proxy's page): the status says enough
  }
  const code = envelope?.error.code ?? `http_${res.status}`;
  return new ApiError(res.status, code, envelope?.error.message ?? `${res.status} ${res.statusText || "error"}`, envelope);
}

/** A 401 means the token is missing, expired or for another fabric: the login page says which and asks again. */
function onUnauthenticated(err: ApiError): void {
  if (err.status !== 401) return;
  const here = currentHash();
  if (here.startsWith("/login")) return;
  location.hash = `#/login?${new URLSearchParams({ next: here, reason: err.message }).toString()}`;
}

async function send(url: string, init: RequestInit & { headers?: Record<string, string> } = {}): Promise<Response> {
  const res = await fetch(url, { ...init, headers: headers(init.headers), credentials: "omit", referrerPolicy: "no-referrer" });
  if (!res.ok) {
    const err = await errorOf(res);
    onUnauthenticated(err);
    throw err;
  }
  return res;
}

async function json<T>(url: string, init?: RequestInit & { headers?: Record<string, string> }): Promise<T> {
  return (await (await send(url, init)).json()) as T;
}

async function page<T>(url: string): Promise<Page<T>> {
  const res = await send(url);
  const items = (await res.json()) as T[];
  return { items, nextPageToken: res.headers.get("x-next-page-token") ?? undefined };
}

async function registry(path: string): Promise<string> {
  const { registry_url } = await loadConfig();
  return `${registry_url.replace(/\/+$/, "")}${path}`;
}

const seg = encodeURIComponent;

// ------------------------------------------------------------------------------------------------ runs (gateway)

export interface RunListQuery {
  state?: string;
  node_type_id?: string;
  /** RFC 3339. */
  created_after?: string;
  /** RFC 3339. */
  created_before?: string;
  tenant_id?: string;
  limit?: number;
  page_token?: string;
}

/** One page of runs, newest first (GET /v1/runs). */
export async function listRuns(q: RunListQuery = {}): Promise<{ runs: Run[]; nextPageToken?: string }> {
  const p = await page<Run>(withQuery("/v1/runs", { ...q }));
  return { runs: p.items, nextPageToken: p.nextPageToken };
}

export function getRun(runId: string): Promise<Run> {
  return json<Run>(`/v1/runs/${seg(runId)}`);
}

/** Every NodeRun of a run. */
export function listNodeRuns(runId: string): Promise<NodeRun[]> {
  return json<NodeRun[]>(`/v1/runs/${seg(runId)}/node-runs`);
}

export function getNodeRun(nodeRunId: string): Promise<NodeRun> {
  return json<NodeRun>(`/v1/node-runs/${seg(nodeRunId)}`);
}

/** Cancels a run and every open NodeRun in it; a run that has ended is returned unchanged. */
export function cancelRun(runId: string): Promise<Run> {
  return json<Run>(`/v1/runs/${seg(runId)}:cancel`, { method: "POST" });
}

/** Starts a run; with `waitSeconds` the answer is held until the run ends or the wait runs out (Prefer: wait). */
export function startRun(body: RunStartRequest, opts: { waitSeconds?: number } = {}): Promise<Run> {
  const extra: Record<string, string> = { "content-type": "application/json" };
  if (opts.waitSeconds !== undefined && opts.waitSeconds > 0) extra.prefer = `wait=${Math.min(60, Math.floor(opts.waitSeconds))}`;
  return json<Run>("/v1/runs", { method: "POST", headers: extra, body: JSON.stringify(body) });
}

export interface StreamOptions {
  /** Resume after this seq (the stream starts at the run's first event without it). */
  afterSeq?: number;
  /** false: only the events that exist now, then the stream ends. */
  follow?: boolean;
  signal?: AbortSignal;
  onEvent: (event: RunEvent) => void;
}

/**
 * Reads a run's NDJSON event stream (GET /v1/runs/{id}/events) until it ends: the server closes it after the run's
 * last event. fetch, not EventSource: EventSource cannot send an Authorization header. Resolves with the last seq
 * seen (to resume after a dropped connection), rejects on a refused request or a broken connection.
 */
export async function streamRunEvents(runId: string, opts: StreamOptions): Promise<number | undefined> {
  const url = withQuery(`/v1/runs/${seg(runId)}/events`, { after_seq: opts.afterSeq, follow: opts.follow === false ? "false" : undefined });
  const res = await send(url, { signal: opts.signal, headers: { accept: "application/x-ndjson" } });
  let last = opts.afterSeq;
  if (!res.body) return last;
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    // Lines are cut by position and the rest kept once per chunk: a replay of a large run is many lines a chunk.
    let from = 0;
    let nl: number;
    while ((nl = buffer.indexOf("\n", from)) >= 0) {
      const line = buffer.slice(from, nl).trim();
      from = nl + 1;
      if (line === "") continue;
      const event = JSON.parse(line) as RunEvent;
      last = event.seq;
      opts.onEvent(event);
    }
    buffer = buffer.slice(from);
  }
  const tail = buffer.trim();
  if (tail !== "") {
    const event = JSON.parse(tail) as RunEvent;
    last = event.seq;
    opts.onEvent(event);
  }
  return last;
}

// ------------------------------------------------------------------------------------------------ approvals (gateway)

export interface ApprovalListQuery {
  state?: "pending" | "approved" | "rejected" | "canceled";
  run_id?: string;
  limit?: number;
  page_token?: string;
}

/** One page of approvals, newest first (GET /v1/approvals). */
export async function listApprovals(q: ApprovalListQuery = {}): Promise<{ approvals: Approval[]; nextPageToken?: string }> {
  const p = await page<Approval>(withQuery("/v1/approvals", { ...q }));
  return { approvals: p.items, nextPageToken: p.nextPageToken };
}

async function resolveApproval(approvalId: string, action: "approve" | "reject", body?: Record<string, unknown>): Promise<void> {
  const init: RequestInit & { headers?: Record<string, string> } = { method: "POST" };
  if (body !== undefined) {
    init.headers = { "content-type": "application/json" };
    init.body = JSON.stringify(body);
  }
  await send(`/v1/approvals/${seg(approvalId)}:${action}`, init);
}

/** Lets the waiting NodeRun proceed. */
export function approve(approvalId: string, body?: Record<string, unknown>): Promise<void> {
  return resolveApproval(approvalId, "approve", body);
}

/** Fails the waiting NodeRun with approval_rejected. */
export function reject(approvalId: string, body?: Record<string, unknown>): Promise<void> {
  return resolveApproval(approvalId, "reject", body);
}

// ------------------------------------------------------------------------------------------------ node types (registry)

export interface NodeTypeListQuery {
  /** Case-insensitive substring of node_type_id. */
  q?: string;
  kind?: "atomic" | "composite";
  limit?: number;
  page_token?: string;
}

/** One page of node types (GET /v1/node-types on the registry). */
export async function listNodeTypes(q: NodeTypeListQuery = {}): Promise<{ nodeTypes: NodeType[]; nextPageToken?: string }> {
  const p = await page<NodeType>(await registry(withQuery("/v1/node-types", { ...q })));
  return { nodeTypes: p.items, nextPageToken: p.nextPageToken };
}

/** One version of a node type; without `version`, the highest by semver. */
export async function getNodeType(nodeTypeId: string, version?: string): Promise<NodeType> {
  return json<NodeType>(await registry(withQuery(`/v1/node-types/${seg(nodeTypeId)}`, { version })));
}

/** Every published version of a node type. */
export async function listNodeTypeVersions(nodeTypeId: string): Promise<string[]> {
  return json<string[]>(await registry(`/v1/node-types/${seg(nodeTypeId)}/versions`));
}

/** The executors heard from lately; with a node type id, those serving it. */
export async function listExecutors(nodeTypeId?: string, version?: string): Promise<Executor[]> {
  return json<Executor[]>(await registry(withQuery("/v1/executors", { node_type_id: nodeTypeId, version: nodeTypeId ? version : undefined })));
}
