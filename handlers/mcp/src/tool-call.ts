/**
 * One call of an MCP tool as one execution of a NodeRun: connect (Streamable HTTP through the executor's egress
 * policy, or the operator's shared stdio server), check the tool's definition against the pinned hash, call it
 * within the node type's time-out, and turn the answer into outputs or a HandlerError:
 * - `isError: true` → `tool_error`, not retryable (the tool ran and said no);
 * - a JSON-RPC error or an answer that is not MCP → `upstream_protocol_error`, not retryable;
 * - the server unreachable or gone → `upstream_unavailable`, retryable when nothing was sent yet or the tool is
 *   read-only or idempotent;
 * - no answer within the node type's time-out → `upstream_unavailable` with `details.reason` `timeout`, under the
 *   same rule (the SDK's own 60-second default never applies);
 * - the tool changed since the node type was made → `tool_definition_changed`, not retryable.
 */
import { clientCredentialsToken, HandlerError, networkFailureOf, type AtomicContext, type HandlerEgress, type JsonObject } from "@nodefabric/sdk";
import { createHash } from "node:crypto";
import { Client, ProtocolError, SdkError, SdkErrorCode, StreamableHTTPClientTransport, type CallToolResult, type PriorDiscovery, type VersionNegotiationMode } from "@modelcontextprotocol/client";
import { TENANT_PLACEHOLDER, type McpConfig, type ProtocolMode } from "./mcp-config.js";
import { operatorStdioServers, type StdioServerPool } from "./stdio-servers.js";
import { toolDefinitionHash, type McpTool } from "./tool-definition.js";
import { callToolAsTask, savedTask } from "./task-call.js";
import { fail } from "./failure-codes.js";

/** How long a server's protocol era is remembered. */
const ERA_TTL_MS = 5 * 60_000;
const MAX_KNOWN_ERAS = 1_000;
const knownEras = new Map<string, { verdict: PriorDiscovery; until: number }>();

/** The key of a server's era: its URL and the credentials sent (a verdict is reused only within one authorization). */
function eraKey(url: URL, headers: Record<string, string>): string {
  const digest = createHash("sha256").update(JSON.stringify(Object.entries(headers).sort())).digest("base64url");
  return `${url.href} ${digest}`;
}

/** Forgets the protocol eras of servers (tests). */
export function forgetProtocolEras(): void {
  knownEras.clear();
}

/** What this client says it is. */
export const CLIENT_INFO = { name: "nodefabric-mcp-call", version: "0.1.0" } as const;

function negotiation(mode: ProtocolMode): VersionNegotiationMode {
  return mode;
}

function nameOf(ctx: AtomicContext): string {
  return `${ctx.nodeType.node_type_id}@${ctx.nodeType.version}`;
}

/** Time left for this execution: the node type's time-out as the executor set the deadline. */
function remainingMs(ctx: AtomicContext): number {
  return Math.max(1, ctx.deadline - Date.now());
}

function egressOf(ctx: AtomicContext): HandlerEgress {
  const egress = (ctx as Partial<Pick<AtomicContext, "egress">>).egress;
  if (!egress || typeof egress.fetch !== "function" || typeof egress.secretFor !== "function") {
    throw fail("invalid_configuration", "this executor gives handlers no ctx.egress; @nodefabric/handler-mcp needs a newer @nodefabric/core", { retryable: false });
  }
  return egress;
}

/** The headers sent to `url`: the node type's plain headers, then its secrets, each only for a host it is bound to. */
async function headersFor(config: McpConfig, url: URL, ctx: AtomicContext, egress: HandlerEgress): Promise<Record<string, string>> {
  const headers: Record<string, string> = Object.fromEntries(config.headers);
  const secret = (template: string, field: string, host: URL = url): string => {
    const name = secretNameFor(template, field, ctx);
    let value: string | undefined;
    try {
      value = egress.secretFor(name, host);
    } catch (err) {
      if (!HandlerError.is(err)) throw err;
      throw new HandlerError(err.code, `${nameOf(ctx)}: nodefabric.mcp.${field}: ${err.message}`, { retryable: false, details: { ...err.details, field: `nodefabric.mcp.${field}` } });
    }
    if (value === undefined) {
      if (name !== template) {
        throw fail("upstream_unauthorized", `${nameOf(ctx)}: tenant ${ctx.tenant_id} has no credentials for this MCP server: nodefabric.mcp.${field} names the secret ${template}, and this executor has no ${name} (FABRIC_SECRET_${name})`, {
          retryable: false,
          details: { field: `nodefabric.mcp.${field}`, secret: name, tenant_id: ctx.tenant_id },
        });
      }
      throw fail("invalid_configuration", `${nameOf(ctx)}: nodefabric.mcp.${field} names the secret ${name}, which this executor does not have (FABRIC_SECRET_${name})`, {
        retryable: false,
        details: { field: `nodefabric.mcp.${field}`, secret: name },
      });
    }
    return value;
  };
  for (const s of config.secretHeaders) headers[s.header] = s.prefix + secret(s.secret, `secret_headers.${s.header}`);
  if (config.oauth2) {
    // The client id and secret go to the token endpoint: they must be bound to its host.
    const tokenUrl = new URL(config.oauth2.tokenUrl);
    const token = await clientCredentialsToken({
      tokenUrl,
      clientId: secret(config.oauth2.clientIdSecret, "oauth2.client_id_secret", tokenUrl),
      clientSecret: secret(config.oauth2.clientSecretSecret, "oauth2.client_secret_secret", tokenUrl),
      scopes: config.oauth2.scopes,
      fetch: egress.fetch,
    });
    headers.authorization = `Bearer ${token}`;
  }
  return headers;
}

/**
 * The secret a configured name stands for in this run: `{tenant}` replaced by the run's tenant. A per-tenant secret
 * in a run without a tenant, or of a tenant whose id cannot be part of a secret's name, is refused: no other
 * tenant's credentials, and no shared ones, are used instead.
 */
function secretNameFor(template: string, field: string, ctx: AtomicContext): string {
  if (!template.includes(TENANT_PLACEHOLDER)) return template;
  const tenant = ctx.tenant_id;
  if (typeof tenant !== "string" || tenant === "") {
    throw fail("upstream_unauthorized", `${nameOf(ctx)}: nodefabric.mcp.${field} names a secret per tenant (${template}), and this run has no tenant`, {
      retryable: false,
      details: { field: `nodefabric.mcp.${field}`, secret: template },
    });
  }
  if (!/^[A-Za-z0-9_]{1,64}$/.test(tenant)) {
    throw fail("upstream_unauthorized", `${nameOf(ctx)}: nodefabric.mcp.${field} names a secret per tenant (${template}), and the tenant id ${JSON.stringify(tenant.slice(0, 80))} cannot be part of a secret's name (letters, digits and _, at most 64)`, {
      retryable: false,
      details: { field: `nodefabric.mcp.${field}`, secret: template, tenant_id: tenant },
    });
  }
  return template.replaceAll(TENANT_PLACEHOLDER, tenant);
}

/** Walks `err`'s causes for the first HandlerError (the executor's egress fetch throws them). */
function handlerErrorIn(err: unknown, depth = 0): HandlerError | undefined {
  if (depth > 8 || typeof err !== "object" || err === null) return undefined;
  if (HandlerError.is(err)) return err;
  return handlerErrorIn((err as { cause?: unknown }).cause, depth + 1);
}

type Phase = "connect" | "list" | "call";

/** The HandlerError of a failure of `phase`, for `config`. */
export function mapFailure(err: unknown, phase: Phase, config: McpConfig, ctx: AtomicContext): unknown {
  if (ctx.signal.aborted) return err;
  const target = config.url ?? `stdio server ${config.server}`;
  const where = `${nameOf(ctx)}: MCP server ${target}`;
  // Nothing reached the tool before tools/call was sent; afterwards, only a read-only or idempotent tool may run twice.
  const mayRetry = phase !== "call" || config.retrySafe;
  const found = handlerErrorIn(err);
  if (found) {
    if (found.code === "upstream_unavailable") {
      const reason = found.details?.reason;
      const nothingSent = reason === "connection_refused" || reason === "dns_failure";
      return new HandlerError(found.code, `${where}: ${found.message}`, { retryable: nothingSent || mayRetry, details: { ...found.details, phase }, cause: found });
    }
    return found;
  }
  const network = networkFailureOf(err);
  if (network) {
    const nothingSent = network.reason === "connection_refused" || network.reason === "dns_failure";
    return fail("upstream_unavailable", `${where} is unreachable (${network.reason}: ${network.message})`, {
      retryable: nothingSent || mayRetry,
      details: { reason: network.reason, code: network.code, phase },
      cause: err,
    });
  }
  if (err instanceof ProtocolError) {
    return fail("upstream_protocol_error", `${where} answered ${phase === "call" ? "tools/call" : phase === "list" ? "tools/list" : "the handshake"} with a JSON-RPC error ${err.code}: ${err.message}`, {
      retryable: false,
      details: { mcp_code: err.code, ...(err.data === undefined ? {} : { mcp_data: err.data as unknown }), phase },
    });
  }
  if (err instanceof SdkError) {
    const data = err.data as { status?: number } | undefined;
    switch (err.code) {
      case SdkErrorCode.RequestTimeout:
        return fail("upstream_unavailable", `${where} did not answer ${phase === "call" ? `tools/call ${config.tool}` : phase} within the node type's time-out`, {
          retryable: mayRetry,
          details: { reason: "timeout", phase },
        });
      case SdkErrorCode.ConnectionClosed:
      case SdkErrorCode.SendFailed:
      case SdkErrorCode.NotConnected:
        return fail("upstream_unavailable", `${where} closed the connection (${err.message})`, { retryable: mayRetry, details: { reason: "connection_reset", phase } });
      case SdkErrorCode.ClientHttpAuthentication:
      case SdkErrorCode.ClientHttpForbidden:
        return fail("upstream_unauthorized", `${where} refused the credentials of ${nameOf(ctx)} (HTTP ${data?.status ?? "401/403"}): check its secrets`, {
          retryable: false,
          details: { status: data?.status, phase },
        });
      default: {
        const status = typeof data?.status === "number" ? data.status : undefined;
        if (status !== undefined && (status >= 500 || status === 429)) {
          return fail("upstream_unavailable", `${where} answered HTTP ${status}`, { retryable: mayRetry, details: { status, phase } });
        }
        return fail("upstream_protocol_error", `${where}: ${err.message}`, { retryable: false, details: { sdk_code: err.code, ...(status ? { status } : {}), phase } });
      }
    }
  }
  if (err instanceof Error && (err.name === "ZodError" || /invalid|parse|unexpected/i.test(err.message))) {
    return fail("upstream_protocol_error", `${where} answered something that is not MCP: ${err.message}`, { retryable: false, details: { phase } });
  }
  return err;
}

/** A connected client and how to let go of it (a shared stdio client is kept). */
interface Connection {
  client: Client;
  release(): Promise<void>;
  /** For an HTTP server: the headers sent (credentials included) and the egress they go through. */
  http?: { headers: Record<string, string>; egress: HandlerEgress };
}

async function connectHttp(config: McpConfig, ctx: AtomicContext): Promise<Connection> {
  const egress = egressOf(ctx);
  const url = new URL(config.url!);
  const headers = await headersFor(config, url, ctx, egress);
  const client = new Client(CLIENT_INFO, { versionNegotiation: { mode: negotiation(config.protocol), probe: { timeoutMs: remainingMs(ctx) } } });
  // Every connection goes through the egress policy (the address is checked when it connects), redirects stay on
  // the server's origin (the SDK's default), and only the headers of the node type's configuration are sent: never
  // the caller's own token, which the executor does not even hold.
  // The answer to a tool call streams for as long as the tool runs: up to the node type's time-out, not the executor's
  // per-request one.
  const fetch = (input: string | URL | Request, init?: RequestInit) => {
    // A canceled run's call is canceled upstream: on the 2025 era the SDK then POSTs notifications/cancelled, which
    // goes out as a `final` egress request (through the egress policy, not aborted with the execution, 5 s at most),
    // in the background; the transport's own abort (the client is closed at once) does not stop it.
    if (ctx.signal.aborted && isCancelNotification(init)) {
      const { signal: _transportSignal, ...rest } = init ?? {};
      return egress.fetch(input, { ...rest, final: true } as RequestInit);
    }
    return egress.fetch(input, { ...init, timeoutMs: remainingMs(ctx) } as RequestInit);
  };
  const transport = new StreamableHTTPClientTransport(url, { fetch, requestInit: { headers } });
  // The era a server answered with is remembered for a while (per URL and credentials), so later calls skip the
  // probe: a 2026-07-28 server's discover result is adopted as is, a 2025 server gets its handshake at once.
  const key = config.protocol === "auto" ? eraKey(url, headers) : undefined;
  const prior = key ? knownEras.get(key) : undefined;
  const fresh = prior && prior.until > Date.now() ? prior.verdict : undefined;
  try {
    await client.connect(transport, { timeout: remainingMs(ctx), signal: ctx.signal, ...(fresh ? { prior: fresh } : {}) });
  } catch (err) {
    await client.close().catch(() => undefined);
    if (key) knownEras.delete(key);
    throw mapFailure(err, "connect", config, ctx);
  }
  if (key && !fresh) {
    const discover = client.getDiscoverResult();
    const verdict: PriorDiscovery = client.getProtocolEra() === "modern" && discover ? { kind: "modern", discover } : { kind: "legacy" };
    knownEras.set(key, { verdict, until: Date.now() + ERA_TTL_MS });
    if (knownEras.size > MAX_KNOWN_ERAS) knownEras.delete(knownEras.keys().next().value!);
  }
  return {
    client,
    http: { headers, egress },
    release: async () => {
      // After a cancel only notifications/cancelled is still sent (a final request): the session is left to expire.
      if (transport.sessionId && !ctx.signal.aborted) await transport.terminateSession().catch(() => undefined);
      await client.close().catch(() => undefined);
    },
  };
}

async function connectStdio(config: McpConfig, ctx: AtomicContext, pool: StdioServerPool): Promise<Connection> {
  try {
    const client = await pool.client(config.server!, async (transport) => {
      const c = new Client(CLIENT_INFO, { versionNegotiation: { mode: negotiation(config.protocol), probe: { timeoutMs: Math.min(remainingMs(ctx), 5_000) } } });
      try {
        await c.connect(transport, { timeout: remainingMs(ctx) });
      } catch (err) {
        await c.close().catch(() => undefined);
        throw err;
      }
      return c;
    });
    return { client, release: async () => undefined };
  } catch (err) {
    throw mapFailure(err, "connect", config, ctx);
  }
}

/** Finds the tool on the server and compares its definition with the node type's pin. */
async function checkPin(client: Client, config: McpConfig, ctx: AtomicContext): Promise<McpTool> {
  let tools: McpTool[];
  try {
    tools = (await client.listTools(undefined, { timeout: remainingMs(ctx), signal: ctx.signal, cacheMode: "refresh" })).tools as McpTool[];
  } catch (err) {
    throw mapFailure(err, "list", config, ctx);
  }
  const tool = tools.find((t) => t.name === config.tool);
  if (!tool) {
    throw fail("tool_definition_changed", `${nameOf(ctx)}: the MCP server no longer offers the tool ${config.tool}; import the server again to review what it offers now`, {
      retryable: false,
      details: { tool: config.tool, expected: config.toolHash, actual: null },
    });
  }
  const actual = toolDefinitionHash(tool);
  if (actual !== config.toolHash) {
    throw fail(
      "tool_definition_changed",
      `${nameOf(ctx)}: the MCP tool ${config.tool} changed on the server since this node type was made from it (its definition hash is ${actual}, not ${config.toolHash}); ` +
        "it is not called. Import the server again to publish a new version after reviewing the change",
      { retryable: false, details: { tool: config.tool, expected: config.toolHash, actual } },
    );
  }
  return tool;
}

/** The text of a result's text blocks, for an error message. */
function textOf(result: CallToolResult): string {
  const texts = (result.content ?? []).flatMap((b) => (b.type === "text" && typeof b.text === "string" ? [b.text] : []));
  const joined = texts.join("\n").trim();
  return joined.length > 500 ? `${joined.slice(0, 500)}…` : joined;
}

/** Whether a POST carries only `notifications/cancelled` (the body the SDK sends when a request is aborted). */
function isCancelNotification(init: RequestInit | undefined): boolean {
  if ((init?.method ?? "GET").toUpperCase() !== "POST" || typeof init?.body !== "string" || init.body.length > 4096) return false;
  try {
    const msg = JSON.parse(init.body) as { method?: unknown; id?: unknown };
    return msg.method === "notifications/cancelled" && msg.id === undefined;
  } catch {
    return false;
  }
}

/** Passes an upstream progress notification on as the NodeRun's progress; one a server sends malformed is skipped. */
function reportUpstreamProgress(ctx: AtomicContext, p: { progress: number; total?: number; message?: string }): void {
  if (typeof p.progress !== "number" || !Number.isFinite(p.progress) || p.progress < 0) return;
  const total = typeof p.total === "number" && Number.isFinite(p.total) && p.total >= 0 ? p.total : undefined;
  const message = typeof p.message === "string" ? p.message : undefined;
  // Executors from before ctx.reportProgress have none: the progress is then only logged.
  if (typeof ctx.reportProgress === "function") ctx.reportProgress(p.progress, total, message);
  ctx.log.debug({ progress: p.progress, total, message }, "mcp progress");
}

/** Runs one execution: calls the tool `config` names with `inputs`. */
export async function callMcpTool(config: McpConfig, inputs: JsonObject, ctx: AtomicContext, pool?: StdioServerPool): Promise<JsonObject> {
  const connection = config.url ? await connectHttp(config, ctx) : await connectStdio(config, ctx, pool ?? operatorStdioServers());
  try {
    const tool = config.toolHash ? await checkPin(connection.client, config, ctx) : undefined;
    let result: CallToolResult;
    // A tool that requires or offers MCP tasks is called as one (and a task this NodeRun started earlier is resumed).
    const taskSupport = (tool as { execution?: { taskSupport?: unknown } } | undefined)?.execution?.taskSupport;
    if (connection.http && config.url && (taskSupport === "required" || taskSupport === "optional" || savedTask(ctx, config.url, config.tool))) {
      try {
        result = await callToolAsTask({ url: config.url, tool: config.tool, inputs, headers: connection.http.headers, egress: connection.http.egress, ctx, where: `${nameOf(ctx)}: MCP server ${config.url}` });
      } catch (err) {
        throw mapFailure(err, "call", config, ctx);
      }
      return outputsOf(result, config, ctx);
    }
    try {
      const timeout = remainingMs(ctx);
      result = (await connection.client.callTool(
        { name: config.tool, arguments: inputs },
        {
          timeout,
          maxTotalTimeout: timeout,
          signal: ctx.signal,
          // The server's progress notifications become the run's node_run_progress events (ctx.reportProgress
          // throttles them); the SDK also resets the request's time-out on each, bounded by maxTotalTimeout.
          onprogress: (p) => reportUpstreamProgress(ctx, p),
          ...(tool ? { toolDefinition: tool as never } : {}),
        },
      )) as CallToolResult;
    } catch (err) {
      throw mapFailure(err, "call", config, ctx);
    }
    return outputsOf(result, config, ctx);
  } finally {
    await connection.release();
  }
}

/** The outputs of a tool's result, or the HandlerError it stands for. */
function outputsOf(result: CallToolResult, config: McpConfig, ctx: AtomicContext): JsonObject {
  {
    if (result.isError) {
      const text = textOf(result);
      throw fail("tool_error", `${nameOf(ctx)}: the MCP tool ${config.tool} reported an error${text ? `: ${text}` : ""}`, {
        retryable: false,
        details: { tool: config.tool, content: result.content as unknown, ...(result.structuredContent === undefined ? {} : { structuredContent: result.structuredContent as unknown }) },
      });
    }
    if (config.output === "structured") {
      const sc = result.structuredContent;
      if (typeof sc !== "object" || sc === null || Array.isArray(sc)) {
        throw fail("upstream_protocol_error", `${nameOf(ctx)}: the MCP tool ${config.tool} declares an outputSchema but answered without a structuredContent object`, {
          retryable: false,
          details: { tool: config.tool, content: result.content as unknown },
        });
      }
      return sc as JsonObject;
    }
    const outputs: JsonObject = { content: (result.content ?? []) as unknown as JsonObject[] };
    if (result.structuredContent !== undefined) outputs.structuredContent = result.structuredContent as JsonObject;
    return outputs;
  }
}
