/**
 * A tool call as an MCP task (2025-11-25: `tools/call` with `task`, then `tasks/get` until it ends, then
 * `tasks/result`). The SDK v2 client has no runtime for task methods, so this speaks the few JSON-RPC messages itself,
 * over the executor's egress fetch (the same policy, host-bound credentials and time-outs as every call).
 *
 * The server's session and task ids are saved with the NodeRun (`ctx.saveCheckpoint`) as soon as the task exists: a
 * later execution of the NodeRun (after a crash of the executor, or a retry) resumes polling that task instead of
 * calling the tool again. A canceled run sends `tasks/cancel` (a final egress request).
 */
import type { AtomicContext, HandlerEgress } from "@nodefabric/sdk";
import type { CallToolResult } from "@modelcontextprotocol/client";
import { fail } from "./failure-codes.js";

export const TASK_PROTOCOL_VERSION = "2025-11-25";
const TERMINAL = new Set(["completed", "failed", "cancelled"]);

/** What is saved with the NodeRun while an upstream task runs. */
export interface TaskCheckpoint {
  url: string;
  tool: string;
  session_id?: string;
  task_id: string;
}

/** The task this NodeRun started earlier for `tool` at `url`, from `ctx.checkpoint`. */
export function savedTask(ctx: AtomicContext, url: string, tool: string): TaskCheckpoint | undefined {
  const t = (ctx.checkpoint as { mcp_task?: Partial<TaskCheckpoint> } | undefined)?.mcp_task;
  if (!t || t.url !== url || t.tool !== tool || typeof t.task_id !== "string") return undefined;
  return { url, tool, task_id: t.task_id, ...(typeof t.session_id === "string" ? { session_id: t.session_id } : {}) };
}

interface Rpc {
  (method: string, params: Record<string, unknown>, options?: { final?: boolean }): Promise<Record<string, unknown>>;
  notify(method: string): Promise<void>;
  session(): string | undefined;
}

/** The JSON-RPC answer to request `id` in a response body: plain JSON, or the `data:` lines of an SSE stream. */
function answerIn(text: string, contentType: string, id: number): { result?: Record<string, unknown>; error?: { code: number; message: string; data?: unknown } } | undefined {
  const messages: unknown[] = [];
  if (contentType.includes("text/event-stream")) {
    for (const event of text.split(/\r?\n\r?\n/)) {
      const data = event
        .split(/\r?\n/)
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).replace(/^ /, ""))
        .join("\n");
      if (data.trim()) messages.push(JSON.parse(data));
    }
  } else if (text.trim()) {
    const parsed = JSON.parse(text) as unknown;
    messages.push(...(Array.isArray(parsed) ? parsed : [parsed]));
  }
  return messages.find((m) => (m as { id?: unknown }).id === id) as never;
}

function rpcOver(url: string, headers: Record<string, string>, egress: HandlerEgress, ctx: AtomicContext, session: string | undefined, where: string): Rpc {
  let nextId = 1;
  let sessionId = session;
  const post = (body: unknown, final: boolean) =>
    egress.fetch(url, {
      method: "POST",
      headers: {
        ...headers,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": TASK_PROTOCOL_VERSION,
        ...(sessionId ? { "mcp-session-id": sessionId } : {}),
      },
      body: JSON.stringify(body),
      ...(final ? { final: true } : { timeoutMs: Math.max(1, ctx.deadline - Date.now()) }),
    } as RequestInit);
  const rpc = (async (method, params, options = {}) => {
    const id = nextId++;
    const res = await post({ jsonrpc: "2.0", id, method, params }, options.final === true);
    sessionId ??= res.headers.get("mcp-session-id") ?? undefined;
    const text = await res.text();
    if (res.status === 401 || res.status === 403) {
      throw fail("upstream_unauthorized", `${where} refused the credentials (HTTP ${res.status})`, { retryable: false, details: { status: res.status, phase: method } });
    }
    if (res.status === 404 && method !== "initialize") {
      throw fail("upstream_unavailable", `${where} no longer knows the session of task ${method}`, { retryable: false, details: { status: 404, phase: method } });
    }
    if (res.status >= 500 || res.status === 429) {
      throw fail("upstream_unavailable", `${where} answered HTTP ${res.status} to ${method}`, { retryable: true, details: { status: res.status, phase: method } });
    }
    let answer;
    try {
      answer = answerIn(text, res.headers.get("content-type") ?? "", id);
    } catch (err) {
      throw fail("upstream_protocol_error", `${where} answered ${method} with something that is not JSON-RPC: ${(err as Error).message}`, { retryable: false, details: { phase: method } });
    }
    if (!answer) throw fail("upstream_protocol_error", `${where} answered ${method} (HTTP ${res.status}) without a JSON-RPC response`, { retryable: false, details: { status: res.status, phase: method } });
    if (answer.error) {
      throw fail("upstream_protocol_error", `${where} answered ${method} with a JSON-RPC error ${answer.error.code}: ${answer.error.message}`, {
        retryable: false,
        details: { mcp_code: answer.error.code, phase: method },
      });
    }
    return answer.result ?? {};
  }) as Rpc;
  rpc.notify = async (method) => {
    const res = await post({ jsonrpc: "2.0", method }, false);
    await res.text();
  };
  rpc.session = () => sessionId;
  return rpc;
}

export interface TaskCallOptions {
  url: string;
  tool: string;
  inputs: Record<string, unknown>;
  headers: Record<string, string>;
  egress: HandlerEgress;
  ctx: AtomicContext;
  /** What the failure of this call is named after, such as `t.research@1.0.0: MCP server http://…`. */
  where: string;
}

/** Calls `tool` as a task (or resumes the task saved with the NodeRun) and resolves with its CallToolResult. */
export async function callToolAsTask(o: TaskCallOptions): Promise<CallToolResult> {
  const { ctx } = o;
  const resumed = savedTask(ctx, o.url, o.tool);
  const rpc = rpcOver(o.url, o.headers, o.egress, ctx, resumed?.session_id, o.where);
  let taskId: string;
  let pollMs = 1_000;
  if (resumed) {
    taskId = resumed.task_id;
    ctx.log.info({ task_id: taskId }, "resuming the MCP task this NodeRun started earlier");
  } else {
    await rpc("initialize", { protocolVersion: TASK_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "nodefabric-mcp-call", version: "0.1.0" } });
    await rpc.notify("notifications/initialized");
    const created = await rpc("tools/call", { name: o.tool, arguments: o.inputs, task: { ttl: Math.max(60_000, ctx.deadline - Date.now()) } });
    const task = created.task as { taskId?: unknown; pollInterval?: unknown } | undefined;
    if (!task || typeof task.taskId !== "string") {
      throw fail("upstream_protocol_error", `${o.where} answered a task-augmented tools/call without a task`, { retryable: false, details: { phase: "tools/call" } });
    }
    taskId = task.taskId;
    if (typeof task.pollInterval === "number") pollMs = task.pollInterval;
    const checkpoint: TaskCheckpoint = { url: o.url, tool: o.tool, task_id: taskId, ...(rpc.session() ? { session_id: rpc.session()! } : {}) };
    // Saved before waiting: from here on, a lost executor's NodeRun resumes this task instead of starting another.
    if (typeof ctx.saveCheckpoint === "function") await ctx.saveCheckpoint({ mcp_task: { ...checkpoint } });
  }
  const cancel = () => {
    void rpc("tasks/cancel", { taskId }, { final: true }).catch(() => undefined);
  };
  ctx.signal.addEventListener("abort", cancel, { once: true });
  let lastMessage: string | undefined;
  let stage = 0;
  try {
    for (;;) {
      const status = await rpc("tasks/get", { taskId });
      const state = String(status.status ?? "");
      if (typeof status.pollInterval === "number") pollMs = status.pollInterval;
      if (TERMINAL.has(state)) break;
      if (state === "input_required") {
        throw fail("tool_error", `${o.where}: the MCP task ${taskId} of ${o.tool} asks for input, which a NodeRun cannot give`, { retryable: false, details: { task_id: taskId, status: state } });
      }
      if (typeof status.statusMessage === "string" && status.statusMessage !== lastMessage && typeof ctx.reportProgress === "function") {
        lastMessage = status.statusMessage;
        ctx.reportProgress(++stage, undefined, lastMessage);
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(5_000, Math.max(100, pollMs)));
        ctx.signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
      });
      if (ctx.signal.aborted) throw ctx.signal.reason ?? new Error("canceled");
    }
    return (await rpc("tasks/result", { taskId })) as unknown as CallToolResult;
  } finally {
    ctx.signal.removeEventListener("abort", cancel);
  }
}
