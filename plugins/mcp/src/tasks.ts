/**
 * Tasks: a task is the run. (Filled in below.)
 */
import type * as Sdk from "@modelcontextprotocol/server";
import type { NodeType } from "@nodefabric/schemas";
import type { CallerInfo, ServerDeps } from "./mcp-server.js";

export interface TaskRequest {
  ttl?: number;
}

export interface TaskSupport {
  capabilities(era: "legacy" | "modern"): Record<string, unknown>;
  requested(params: Record<string, unknown>, ctx: Sdk.ServerContext): TaskRequest | undefined;
  start(caller: CallerInfo, t: NodeType, args: Record<string, unknown>, task: TaskRequest, ctx: Sdk.ServerContext): Promise<never>;
}

export function runTasks(_deps: ServerDeps): TaskSupport {
  return {
    capabilities: () => ({}),
    requested: () => undefined,
    start: () => Promise.reject(new Error("tasks are not supported")),
  };
}

export function taskHandlers(_server: Sdk.Server, _deps: ServerDeps, _caller: CallerInfo, _era: "legacy" | "modern"): void {}
