/**
 * What the MCP server is given (ServerDeps) and the shapes of its two helpers, tasks and search mode: a module of its
 * own so the server and the helpers import it rather than each other (docs/architecture.md, "Floors").
 */
import type * as Sdk from "@modelcontextprotocol/server";
import type { NodeType } from "@nodefabric/schemas";
import type { Catalogue } from "@nodefabric/core";
import type { CallerInfo } from "@nodefabric/core";
import type { GatewayCalls } from "@nodefabric/core";
import type { PolicyFilter } from "@nodefabric/core";
import type { ToolResult } from "./tools.js";

export interface ServerDeps {
  sdk: typeof Sdk;
  validator: Sdk.jsonSchemaValidator;
  catalogue: Catalogue;
  calls: GatewayCalls;
  version: string;
  /** Tools per tools/list page. */
  pageSize: number;
  /** "tools": every exposed node type is a tool; "search": a search tool and a run tool instead. */
  mode: "tools" | "search";
  /** Longest a blocking tools/call holds one `Prefer: wait` (s). */
  waitSeconds: number;
  /** Least time between two progress notifications of one call (ms). */
  progressIntervalMs: number;
  /** On 2026-07-28, how long a call may run before it becomes a task (s; 0: a task at once). */
  taskAfterSeconds: number;
  /** How long the catalogue is reused: the ttlMs of tools/list on 2026-07-28. */
  listTtlMs: number;
  /** Calls in flight, by caller digest and JSON-RPC id, for a 2025-era notifications/cancelled (a separate POST). */
  inflight: Map<string, AbortController>;
  tasks: TaskSupport;
  search: SearchSupport;
  /** Leaves out of tools/list what the PDP would not let the caller start (none: not asked). */
  policy?: PolicyFilter;
}

export interface TaskRequest {
  era: "2025-11-25" | "2026";
  ttl?: number;
}

export interface TaskSupport {
  capabilities(era: "legacy" | "modern"): Record<string, unknown>;
  /** Whether the client asks for, or accepts, a task on this tools/call. */
  wants(params: Record<string, unknown>, ctx: Sdk.ServerContext): boolean;
  /** Whether this tools/call becomes a task, and in which protocol. */
  requested(params: Record<string, unknown>, ctx: Sdk.ServerContext, t: NodeType): TaskRequest | undefined;
  start(caller: CallerInfo, t: NodeType, args: Record<string, unknown>, task: TaskRequest, ctx: Sdk.ServerContext): Promise<Record<string, unknown>>;
}

export interface SearchSupport {
  search(caller: CallerInfo, args: Record<string, unknown>): Promise<ToolResult>;
  pick(caller: CallerInfo, args: Record<string, unknown>): Promise<{ nodeType: NodeType; input: Record<string, unknown> } | { error: ToolResult }>;
}
