/**
 * The MCP server requests are served by: low-level SDK `Server`s, one per exchange in flight of each protocol era,
 * reused across requests (server-pool.ts; the SDK's `createMcpHandler` serves the 2026-07-28 revision per request, and
 * the 2025 era statelessly, from one factory), with tools/list from the catalogue and tools/call as a run through the
 * gateway. The low-level Server is used rather than `McpServer.registerTool` because the tools are data (JSON Schemas
 * from the registry, thousands of them), not code.
 */
import type * as Sdk from "@modelcontextprotocol/server";
import type { NodeType, Run, RunStartRequest } from "@nodefabric/schemas";
import { validatorOf } from "./validators.js";
import { TERMINAL_STATES as TERMINAL } from "@nodefabric/core";
import type { CallerInfo } from "@nodefabric/core";
import type { ServerDeps } from "./server-deps.js";
import { CALLER_LABEL, TOOL_LABEL, runLabels, ProgressThrottle, followToEnd, newRunId, resultOfRefusal, resultOfRun, toolOf, type McpTool, type ToolResult } from "./tools.js";
import { taskHandlers } from "./tasks.js";
import { ServerPool, exchangeOf, type Era, type Exchange, type Pooled } from "./server-pool.js";
import { searchTools, SEARCH_TOOL, RUN_TOOL } from "./search.js";

const INSTRUCTIONS =
  "Each tool is a NodeFabric node type; each call is a durable run, under the fabric's policy, budgets and approvals. " +
  "Outputs come back as structuredContent. Long calls can run as tasks.";


interface Cursor {
  after: string;
}

function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify(c)).toString("base64url");
}

function decodeCursor(sdk: typeof Sdk, s: string): Cursor {
  try {
    const c = JSON.parse(Buffer.from(s, "base64url").toString("utf8")) as Cursor;
    if (typeof c?.after === "string") return c;
  } catch {
    // falls through
  }
  throw new sdk.ProtocolError(sdk.ProtocolErrorCode.InvalidParams, "Invalid cursor: it is not one this server gave");
}

/** The node types this caller may run, in node_type_id order. */
export async function toolsFor(deps: ServerDeps, caller: CallerInfo): Promise<NodeType[]> {
  if (!caller.mayRun) return [];
  const types = await deps.catalogue.list();
  return deps.policy ? deps.policy.filter(caller, types) : types;
}

export function callToolError(message: string): ToolResult {
  return { content: [{ type: "text", text: message }], isError: true };
}

/** Starts a run of `t` with `args` and answers when it ended (or, aborted, cancels it). */
export async function runTool(
  deps: ServerDeps,
  caller: CallerInfo,
  t: NodeType,
  args: Record<string, unknown>,
  signal: AbortSignal,
  onProgress?: (p: { progress: number; message?: string }) => void,
): Promise<ToolResult> {
  const checked = validatorOf(deps, t)(args);
  if (!checked.valid) return callToolError(`invalid_inputs: the arguments do not match the input schema of ${t.node_type_id}: ${checked.errorMessage}`);
  const runId = newRunId();
  const request: RunStartRequest = {
    run_id: runId,
    root_node_type_ref: { node_type_id: t.node_type_id, version: t.version },
    input: args,
    metadata: { labels: runLabels(t, caller.digest) },
  };
  // A cancel may come while the start is still held (Prefer: wait): the run id is ours, so it is canceled by id, and
  // again once the start answered, in case the cancel overtook the start.
  const cancel = () => void deps.calls.cancelRun(runId, caller.headers).catch(() => undefined);
  signal.addEventListener("abort", cancel, { once: true });
  try {
    // Without progress wanted, the gateway holds the answer until the run ends (the cheap path); with it, the run's
    // events are followed from the start.
    const started = await deps.calls.startRun(request, caller, onProgress ? 0 : deps.waitSeconds);
    if (started.status >= 300) return resultOfRefusal(started);
    if (signal.aborted) {
      cancel();
      return callToolError("canceled: the call was canceled");
    }
    if (TERMINAL.has(started.body.state)) return resultOfRun(started.body);
    return await follow(deps, caller, runId, signal, onProgress);
  } finally {
    signal.removeEventListener("abort", cancel);
  }
}

async function follow(deps: ServerDeps, caller: CallerInfo, runId: string, signal: AbortSignal, onProgress?: (p: { progress: number; message?: string }) => void): Promise<ToolResult> {
  const throttle = onProgress ? new ProgressThrottle(onProgress, deps.progressIntervalMs) : undefined;
  try {
    const ended = await followToEnd(deps.calls, runId, caller.headers, signal, throttle ? (e) => throttle.event(e) : undefined);
    throttle?.flush();
    if (!ended) return callToolError("canceled: the call was canceled");
    if (ended.status !== 200) return resultOfRefusal(ended);
    return resultOfRun(ended.body as Run);
  } finally {
    throttle?.stop();
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

type TaskHook = (request: Sdk.JSONRPCRequest, ctx: Sdk.ServerContext) => Promise<Sdk.Result | undefined>;
type CancelHook = (notification: Sdk.CancelledNotification, caller: CallerInfo) => void;
export type NodeFabricServer = Sdk.Server & Pooled & { era: Era; taskHook?: TaskHook; cancelled?: CancelHook };
const serverClasses = new WeakMap<object, new (info: Sdk.Implementation, options?: Sdk.ServerOptions) => NodeFabricServer>();

/**
 * The SDK's Server with the seams this plugin needs:
 * - on tools/call, `taskHook` may answer first, with a CreateTaskResult (2025-11-25 `{ task }`, or a 2026-07-28
 *   `resultType: "task"`). The SDK checks every tools/call result against CallToolResult and has no task runtime, so
 *   without this a task could not be answered;
 * - a notifications/cancelled reaches `cancelled` with the caller of the POST it came on. The SDK gives a
 *   notification's handler no context, so the handler is bound to that caller as the notification arrives (the SDK
 *   looks the handler up then, and calls it a moment later);
 * - close() of a 2026-07-28 instance the SDK never connected (a subscriptions/listen exchange) gives it back to the
 *   pool; close() of a 2025-era instance does nothing (see close()).
 */
function serverClass(sdk: typeof Sdk) {
  let C = serverClasses.get(sdk);
  if (!C) {
    class Wrapped extends sdk.Server implements Pooled {
      taskHook?: TaskHook;
      cancelled?: CancelHook;
      serving?: Exchange;
      era: Era = "modern";
      release: () => void = () => undefined;
      protected override _wrapHandler(method: string, handler: (request: Sdk.JSONRPCRequest, ctx: Sdk.ServerContext) => Promise<Sdk.Result>) {
        const inner = super._wrapHandler(method, handler);
        if (method !== "tools/call") return inner;
        return async (request: Sdk.JSONRPCRequest, ctx: Sdk.ServerContext) => (await this.taskHook?.(request, ctx)) ?? inner(request, ctx);
      }
      protected override _onnotification(raw: Sdk.JSONRPCNotification, extra?: Sdk.MessageExtraInfo): void {
        if (raw.method === "notifications/cancelled") {
          const caller = (extra?.authInfo?.extra as Partial<Exchange> | undefined)?.caller;
          this.setNotificationHandler("notifications/cancelled", (n) => {
            if (caller) this.cancelled?.(n, caller);
          });
        }
        super._onnotification(raw, extra);
      }
      override async close(): Promise<void> {
        // The SDK's stateless 2025 leg closes the exchange's transport itself, which gives the instance back, and then
        // calls close(); it may call it again later (the request aborted after its stream ended), when the instance
        // may serve another exchange. So a 2025-era instance leaves closing to its transport.
        if (this.era === "legacy") return;
        if (this.transport === undefined) return this.release();
        await super.close();
      }
    }
    C = Wrapped;
    serverClasses.set(sdk, C);
  }
  return C;
}

/**
 * The MCP server of one era: tools/list from the catalogue, tools/call as a run through the gateway, the task
 * methods. Built once per instance of the pool, for any caller: every handler reads its caller from the request.
 */
function buildServer(deps: ServerDeps, era: Era): NodeFabricServer {
  const { sdk } = deps;
  const server = new (serverClass(sdk))(
    { name: "nodefabric", title: "NodeFabric", version: deps.version },
    {
      capabilities: { tools: { listChanged: true }, ...deps.tasks.capabilities(era) },
      instructions: INSTRUCTIONS,
      // One validator for every instance: each would otherwise build its own and compile anew.
      jsonSchemaValidator: deps.validator,
      cacheHints: { "tools/list": { ttlMs: deps.listTtlMs, cacheScope: "private" }, "server/discover": { ttlMs: deps.listTtlMs, cacheScope: "private" } },
    },
  );

  server.era = era;

  server.setRequestHandler("tools/list", async (request, rctx) => {
    const { caller } = exchangeOf(rctx);
    const listed: McpTool[] = deps.mode === "search" ? (caller.mayRun ? searchTools() : []) : (await toolsFor(deps, caller)).map(toolOf);
    // 2025-11-25 tools say whether they run as tasks: every run can.
    if (era === "legacy") for (const t of listed) (t as McpTool & { execution?: unknown }).execution = { taskSupport: "optional" };
    const cursor = request.params?.cursor;
    const after = cursor === undefined ? undefined : decodeCursor(sdk, cursor).after;
    const from = after === undefined ? 0 : listed.findIndex((t) => t.name > after);
    const page = from < 0 ? [] : listed.slice(from, from + deps.pageSize);
    const more = from >= 0 && from + deps.pageSize < listed.length;
    return { tools: page as never, ...(more ? { nextCursor: encodeCursor({ after: page[page.length - 1]!.name }) } : {}) };
  });

  /** The node type a call names, and its input; a protocol error for an unknown tool. */
  type Resolved = { kind: "run"; t: NodeType; input: Record<string, unknown> } | { kind: "answer"; result: ToolResult };
  const resolve = async (caller: CallerInfo, name: string, args: Record<string, unknown>): Promise<Resolved> => {
    if (deps.mode === "search" && (name === SEARCH_TOOL || name === RUN_TOOL) && caller.mayRun) {
      if (name === SEARCH_TOOL) return { kind: "answer", result: await deps.search.search(caller, args) };
      const picked = await deps.search.pick(caller, args);
      if ("error" in picked) return { kind: "answer", result: picked.error };
      return { kind: "run", t: picked.nodeType, input: picked.input };
    }
    const t = deps.mode === "tools" && caller.mayRun ? await deps.catalogue.get(name) : undefined;
    if (!t) throw new sdk.ProtocolError(sdk.ProtocolErrorCode.InvalidParams, `Unknown tool: ${name}`);
    return { kind: "run", t, input: args };
  };

  // A call that becomes a task answers a CreateTaskResult, which the SDK's tools/call result check (a CallToolResult)
  // would refuse: the task hook answers it before that check (see serverClass).
  server.taskHook = async (request, rctx) => {
    const params = (request.params ?? {}) as { name?: unknown; arguments?: unknown };
    if (typeof params.name !== "string") return undefined;
    const args = isObject(params.arguments) ? params.arguments : {};
    if (!deps.tasks.wants(params as Record<string, unknown>, rctx)) return undefined;
    const { caller } = exchangeOf(rctx);
    const found = await resolve(caller, params.name, args);
    if (found.kind === "answer") return found.result as never;
    const task = deps.tasks.requested(params as Record<string, unknown>, rctx, found.t);
    if (!task) return undefined;
    return (await deps.tasks.start(caller, found.t, found.input, task, rctx)) as never;
  };

  server.setRequestHandler("tools/call", async (request, rctx) => {
    const { caller } = exchangeOf(rctx);
    const { name } = request.params;
    const found = await resolve(caller, name, (request.params.arguments ?? {}) as Record<string, unknown>);
    if (found.kind === "answer") return found.result as never;
    const { t, input: callArgs } = found;

    const key = `${caller.digest}\n${JSON.stringify(rctx.mcpReq.id)}`;
    const ac = new AbortController();
    const onAbort = () => ac.abort();
    rctx.mcpReq.signal.addEventListener("abort", onAbort, { once: true });
    deps.inflight.set(key, ac);
    const token = rctx.mcpReq._meta?.progressToken;
    const onProgress =
      token === undefined
        ? undefined
        : (p: { progress: number; message?: string }) =>
            void rctx.mcpReq.notify({ method: "notifications/progress", params: { progressToken: token, progress: p.progress, ...(p.message ? { message: p.message } : {}) } }).catch(() => undefined);
    try {
      const result = await runTool(deps, caller, t, callArgs, ac.signal, onProgress);
      return server.projectCallToolResult(result as never, t.output_schema as Record<string, unknown> | undefined) as never;
    } finally {
      deps.inflight.delete(key);
      rctx.mcpReq.signal.removeEventListener("abort", onAbort);
    }
  });

  // A 2025-era client cancels with notifications/cancelled, which arrives on a POST of its own, so another instance
  // (stateless serving) receives it: the calls in flight are found by caller and request id.
  server.cancelled = (n, caller) => {
    const id = n.params?.requestId;
    if (id === undefined) return;
    deps.inflight.get(`${caller.digest}\n${JSON.stringify(id)}`)?.abort();
  };

  taskHandlers(server, deps, era);
  return server;
}

/** The servers of both eras, reused across requests (server-pool.ts). */
export function serverPool(deps: ServerDeps): ServerPool<NodeFabricServer> {
  return new ServerPool((era) => buildServer(deps, era));
}

/** The factory `createMcpHandler` calls for each exchange: an idle server of the exchange's era. */
export function serverFactory(pool: ServerPool<NodeFabricServer>): Sdk.McpServerFactory {
  return (ctx) => pool.acquire(ctx.era, exchangeOf({ http: { authInfo: ctx.authInfo } }));
}
