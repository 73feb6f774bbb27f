/**
 * Tasks: a task is the run. Its id is the run's id (128 random bits), the run carries a label binding it to its
 * caller, and every task request reads or acts on the run through the gateway with the caller's identity (so one
 * tenant never sees another's). Because the run is durable, a task outlives a restart of the fabric.
 *
 * Two protocols:
 * - 2025-11-25 experimental tasks: the client asks with `params.task` on tools/call; tasks/get, tasks/result,
 *   tasks/cancel and tasks/list.
 * - the 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): the client declares the extension in
 *   its per-request capabilities and the server decides; tasks/get, tasks/update and tasks/cancel.
 *
 * The SDK (2.4.0) has no runtime for either (its task methods are wire vocabulary only), so this layer registers the
 * methods itself with the SDK's schema-explicit `setRequestHandler(method, { params }, handler)`.
 */
import type * as Sdk from "@modelcontextprotocol/server";
import { z } from "zod";
import type { NodeType, Run } from "@nodefabric/schemas";
import type { CallerInfo } from "@nodefabric/core";
import type { ServerDeps, TaskRequest, TaskSupport } from "./server-deps.js";
import { validatorOf } from "./validators.js";
import { CALLER_LABEL, TOOL_LABEL, runLabels, followToEnd, newRunId, resultOfRefusal, resultOfRun, type ToolResult } from "./tools.js";
import { TERMINAL_STATES as TERMINAL } from "@nodefabric/core";
import { exchangeOf } from "./server-pool.js";

export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
export const RELATED_TASK = "io.modelcontextprotocol/related-task";
const POLL_INTERVAL_MS = 1000;

type TaskStatus = "working" | "input_required" | "completed" | "failed" | "cancelled";

interface TaskView {
  taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
}

/** How a node type asks to be run as a task on 2026-07-28: "always", "never", or "auto" (the default). */
function taskPolicy(t: NodeType): string {
  const v = (t.extensions as Record<string, unknown> | undefined)?.["nodefabric.mcp_task"];
  return typeof v === "string" ? v : "auto";
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The run behind a task id, when the caller may see it and it is a task of this caller. */
async function runOfTask(deps: ServerDeps, caller: CallerInfo, taskId: string): Promise<Run | undefined> {
  if (!/^mcp-[0-9a-f]{32}$/.test(taskId)) return undefined;
  const res = await deps.calls.getRun(taskId, caller.headers);
  if (res.status !== 200) return undefined;
  const labels = (res.body.extensions?.["nodefabric.metadata"] as { labels?: Record<string, string> } | undefined)?.labels ?? {};
  if (labels[CALLER_LABEL] !== caller.digest || labels[TOOL_LABEL] === undefined) return undefined;
  return res.body;
}

/** The task a run is, in the words of a protocol. */
async function viewOf(deps: ServerDeps, caller: CallerInfo, run: Run, era: TaskRequest["era"]): Promise<TaskView & Record<string, unknown>> {
  const base = { taskId: run.run_id, createdAt: run.started_at ?? new Date().toISOString(), lastUpdatedAt: run.ended_at ?? new Date().toISOString() };
  const timing = era === "2026" ? { ttlMs: null, pollIntervalMs: POLL_INTERVAL_MS } : { ttl: null, pollInterval: POLL_INTERVAL_MS };
  if (run.state === "completed" || run.state === "failed") {
    const result = resultOfRun(run);
    if (era === "2026") return { ...base, ...timing, status: "completed", result: { ...result, resultType: "complete" } };
    return { ...base, ...timing, status: run.state === "completed" ? "completed" : "failed", ...(result.isError ? { statusMessage: result.content[0]!.text } : {}) };
  }
  if (run.state === "canceled") return { ...base, ...timing, status: "cancelled", statusMessage: "the run was canceled" };
  const pending = await deps.calls.pendingApprovals(run.run_id, caller.headers);
  if (pending.length > 0) {
    const names = pending.map((a) => a.approval_id).join(", ");
    const message = `waiting for approval ${names}: approve or reject it in the console or with POST /v1/approvals/{approval_id}:approve`;
    // 2025-11-25 has input_required without requests to carry; on 2026 it must carry input requests, and the
    // approval is a human's decision, never the client's, so the task stays working there.
    return { ...base, ...timing, status: era === "2026" ? "working" : "input_required", statusMessage: message };
  }
  return { ...base, ...timing, status: "working", statusMessage: run.state === "queued" ? "the run is queued" : "the run is running" };
}

function notFound(sdk: typeof Sdk, taskId: string): Error {
  return new sdk.ProtocolError(sdk.ProtocolErrorCode.InvalidParams, `Task not found: ${taskId}`);
}

export function runTasks(deps: ServerDeps): TaskSupport {
  return {
    capabilities(era) {
      if (era === "modern") return { extensions: { [TASKS_EXTENSION]: {} } };
      return { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } };
    },
    wants(params, ctx) {
      const env = ctx.mcpReq.envelope as Record<string, { extensions?: Record<string, unknown> } | undefined> | undefined;
      if (env && Object.keys(env).length > 0) return isObject(env["io.modelcontextprotocol/clientCapabilities"]?.extensions?.[TASKS_EXTENSION]);
      return isObject(params.task);
    },
    requested(params, ctx, t) {
      const env = ctx.mcpReq.envelope as Record<string, { extensions?: Record<string, unknown> } | undefined> | undefined;
      if (env && Object.keys(env).length > 0) {
        // 2026-07-28: the server decides, when the client declared the extension on this request.
        if (!isObject(env["io.modelcontextprotocol/clientCapabilities"]?.extensions?.[TASKS_EXTENSION])) return undefined;
        const policy = taskPolicy(t);
        if (policy === "never") return undefined;
        return { era: "2026" };
      }
      const task = params.task;
      if (isObject(task)) return { era: "2025-11-25", ...(typeof task.ttl === "number" ? { ttl: task.ttl } : {}) };
      return undefined;
    },
    async start(caller, t, args, task) {
      const { sdk } = deps;
      const checked = validatorOf(deps, t)(args);
      if (!checked.valid) {
        const r: ToolResult = { content: [{ type: "text", text: `invalid_inputs: the arguments do not match the input schema of ${t.node_type_id}: ${checked.errorMessage}` }], isError: true };
        return r;
      }
      const runId = newRunId();
      // On 2026 the server may answer with the result itself: a short wait, then a task only if the run goes on.
      const wait = task.era === "2026" && taskPolicy(t) !== "always" ? deps.taskAfterSeconds : 0;
      const started = await deps.calls.startRun(
        {
          run_id: runId,
          root_node_type_ref: { node_type_id: t.node_type_id, version: t.version },
          input: args,
          metadata: { labels: runLabels(t, caller.digest) },
        },
        caller,
        wait,
      );
      if (started.status >= 300) return resultOfRefusal(started);
      if (task.era === "2026" && wait > 0 && TERMINAL.has(started.body.state)) return resultOfRun(started.body);
      // The run is stored before POST /v1/runs answers, so tasks/get resolves from here on.
      const view = await viewOf(deps, caller, started.body, task.era);
      if (task.era === "2026") return { ...view, resultType: "task" };
      void sdk;
      return { task: view };
    },
  };
}

const TaskIdParams = z.looseObject({ taskId: z.string() });
const ListParams = z.looseObject({ cursor: z.string().optional() }).optional();
const UpdateParams = z.looseObject({ taskId: z.string(), inputResponses: z.record(z.string(), z.unknown()).optional() });

/** Registers the task methods of the instance's era; each reads its caller from its request (server-pool.ts). */
export function taskHandlers(server: Sdk.Server, deps: ServerDeps, era: "legacy" | "modern"): void {
  const { sdk } = deps;
  const taskEra: TaskRequest["era"] = era === "modern" ? "2026" : "2025-11-25";
  // On 2026-07-28 the task methods belong to the extension: a request that does not declare it gets -32021, naming it.
  const declared = (ctx: Sdk.ServerContext) => {
    if (taskEra !== "2026") return;
    const env = ctx.mcpReq.envelope as Record<string, { extensions?: Record<string, unknown> } | undefined> | undefined;
    if (isObject(env?.["io.modelcontextprotocol/clientCapabilities"]?.extensions?.[TASKS_EXTENSION])) return;
    throw new sdk.ProtocolError(sdk.ProtocolErrorCode.MissingRequiredClientCapability, "Missing required client capability", { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } });
  };
  const find = async (caller: CallerInfo, taskId: string) => {
    const run = await runOfTask(deps, caller, taskId);
    if (!run) throw notFound(sdk, taskId);
    return run;
  };

  server.setRequestHandler("tasks/get", { params: TaskIdParams }, async (p, ctx) => {
    declared(ctx);
    const { caller } = exchangeOf(ctx);
    const run = await find(caller, p.taskId);
    return (await viewOf(deps, caller, run, taskEra)) as never;
  });

  server.setRequestHandler("tasks/cancel", { params: TaskIdParams }, async (p, ctx) => {
    declared(ctx);
    const { caller } = exchangeOf(ctx);
    const run = await find(caller, p.taskId);
    if (TERMINAL.has(run.state)) {
      if (taskEra === "2025-11-25") throw new sdk.ProtocolError(sdk.ProtocolErrorCode.InvalidParams, `Task ${p.taskId} has already ended (${run.state}) and cannot be cancelled`);
      // 2026: cancelling an ended task is acknowledged, and changes nothing.
      return {} as never;
    }
    await deps.calls.cancelRun(run.run_id, caller.headers);
    // 2025-11-25 answers the task; the 2026 extension an empty acknowledgement (tasks/get shows the outcome).
    if (taskEra === "2026") return {} as never;
    const after = await find(caller, p.taskId);
    return (await viewOf(deps, caller, after, taskEra)) as never;
  });

  if (taskEra === "2026") {
    // An approval is never the client's to give, so no task of ours asks for input: updates are acknowledged.
    server.setRequestHandler("tasks/update", { params: UpdateParams }, async (p, ctx) => {
      declared(ctx);
      await find(exchangeOf(ctx).caller, p.taskId);
      return {} as never;
    });
    return;
  }

  server.setRequestHandler("tasks/result", { params: TaskIdParams }, async (p, ctx) => {
    const { caller } = exchangeOf(ctx);
    const run = await find(caller, p.taskId);
    let ended: Run = run;
    if (!TERMINAL.has(run.state)) {
      const res = await followToEnd(deps.calls, run.run_id, caller.headers, ctx.mcpReq.signal);
      if (!res || res.status !== 200) throw new sdk.ProtocolError(sdk.ProtocolErrorCode.InternalError, `the result of task ${p.taskId} could not be read`);
      ended = res.body as Run;
    }
    if (ended.state === "canceled") throw new sdk.ProtocolError(sdk.ProtocolErrorCode.InvalidParams, `Task ${p.taskId} was cancelled`);
    const result = resultOfRun(ended);
    return { ...result, _meta: { ...result._meta, [RELATED_TASK]: { taskId: run.run_id } } } as never;
  });

  server.setRequestHandler("tasks/list", { params: ListParams as never }, async (p: { cursor?: string } | undefined, ctx: Sdk.ServerContext) => {
    const { caller } = exchangeOf(ctx);
    const query: Record<string, string> = { limit: "100" };
    if (p?.cursor) query.page_token = p.cursor;
    const res = await deps.calls.listRuns(query, caller.headers);
    if (res.status !== 200) throw new sdk.ProtocolError(sdk.ProtocolErrorCode.InvalidParams, "Invalid cursor");
    const mine = (res.body as Run[]).filter((r) => {
      const labels = (r.extensions?.["nodefabric.metadata"] as { labels?: Record<string, string> } | undefined)?.labels ?? {};
      return labels[CALLER_LABEL] === caller.digest && labels[TOOL_LABEL] !== undefined;
    });
    const tasks = await Promise.all(mine.map((r) => viewOf(deps, caller, r, taskEra)));
    const next = res.headers["x-next-page-token"];
    return { tasks, ...(typeof next === "string" ? { nextCursor: next } : {}) } as never;
  });
}
