/**
 * /mcp on the Run Gateway: the route, its authentication (the gateway's own, as on every route), DNS-rebinding checks,
 * the RFC 9728 protected-resource metadata, and the hand-over to the SDK's `createMcpHandler`, which serves both
 * protocol eras. The SDK is loaded on the first request, so a fabric whose clients never use MCP does not pay for it.
 */
import { Readable } from "node:stream";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { FabricError, Catalogue, PolicyFilter, type PluginServiceContext } from "@nodefabric/core";
import type * as Sdk from "@modelcontextprotocol/server";
import { GatewayCalls, callerHeaders, callerDigest, type CallerInfo } from "@nodefabric/core";
import type { Exchange } from "./server-pool.js";
import type { ServerDeps } from "./server-deps.js";
import { mcpSettings, type McpSettings } from "./settings.js";

export interface McpRoutesOptions extends Partial<McpSettings> {
  fabric: PluginServiceContext;
  /** The version the server reports (the plugin's). */
  serverVersion?: string;
}

const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);

interface Served {
  sdk: typeof Sdk;
  handler: Sdk.McpHttpHandler;
  deps: ServerDeps;
}

function hostnameOf(url: string): string | undefined {
  try {
    return new URL(url).hostname;
  } catch {
    return undefined;
  }
}

/** Sends a web-standard Response through fastify (a streamed body, such as SSE, as a stream). */
async function sendWeb(reply: FastifyReply, res: Response): Promise<FastifyReply> {
  reply.code(res.status);
  res.headers.forEach((value, key) => {
    if (key !== "content-length" && key !== "transfer-encoding") reply.header(key, value);
  });
  if (!res.body) return reply.send();
  // A JSON answer is read whole (cheaper than piping a web stream); an event stream is piped as it comes.
  if (res.headers.get("content-type")?.startsWith("application/json")) return reply.send(await res.text());
  return reply.send(Readable.fromWeb(res.body as never));
}

export async function mcpRoutes(app: FastifyInstance, options: McpRoutesOptions): Promise<void> {
  const settings = mcpSettings(options);
  const fabric = options.fabric;
  const path = settings.path;
  const metadataPath = `/.well-known/oauth-protected-resource${path}`;
  const authOn = fabric.auth.mode !== "disabled";
  const gatewayUrl = () => fabric.serviceUrl("run-gateway");
  const calls = new GatewayCalls(app, fabric.runs);

  let served: Promise<Served> | undefined;
  let poll: NodeJS.Timeout | undefined;
  const serve = (): Promise<Served> =>
    (served ??= (async () => {
      // Everything that serves MCP loads here, on the first request to /mcp: a fabric nobody asks over MCP starts as
      // fast as one without this plugin.
      const sdk = await import("@modelcontextprotocol/server");
      const { AjvJsonSchemaValidator } = await import("@modelcontextprotocol/server/validators/ajv");
      const { serverFactory, serverPool } = await import("./mcp-server.js");
      const { runTasks } = await import("./tasks.js");
      const { selectionSearch } = await import("./search.js");
            const bus = new sdk.InMemoryServerEventBus();
      let handler: Sdk.McpHttpHandler | undefined;
      const catalogue = new Catalogue({
        registryUrl: () => fabric.serviceUrl("node-registry"),
        token: async () => fabric.serviceToken?.("node-registry"),
        include: settings.include,
        exclude: settings.exclude,
        versions: settings.versions,
        refreshMs: settings.refreshMs,
        onChange: () => handler?.notify.toolsChanged(),
      });
      const deps: ServerDeps = {
        sdk,
        validator: new AjvJsonSchemaValidator(),
        catalogue,
        calls,
        version: options.serverVersion ?? "0.0.0",
        pageSize: settings.pageSize,
        mode: settings.mode,
        waitSeconds: settings.waitSeconds,
        progressIntervalMs: settings.progressIntervalMs,
        taskAfterSeconds: settings.taskAfterSeconds,
        listTtlMs: settings.refreshMs,
        inflight: new Map(),
        tasks: undefined as never,
        search: undefined as never,
      };
      if (settings.policyFilter) {
        deps.policy = new PolicyFilter({ pdpUrl: () => fabric.serviceUrl("pdp"), token: async () => fabric.serviceToken?.("pdp"), ttlMs: Math.max(settings.refreshMs, 10_000) });
      }
      deps.tasks = runTasks(deps);
      deps.search = selectionSearch(deps, fabric);
      handler = sdk.createMcpHandler(serverFactory(serverPool(deps)), {
        legacy: "stateless",
        bus,
        onerror: (err) => app.log.debug({ err }, "mcp: a request was refused"),
      });
      // While clients listen for list changes (2026-07-28 subscriptions), the registry is read every refreshMs so a
      // change is noticed without anyone listing.
      poll = setInterval(() => {
        if (bus.listenerCount > 0) void catalogue.list().catch(() => undefined);
      }, Math.max(500, settings.refreshMs));
      poll.unref();
      return { sdk, handler, deps };
    })());

  app.addHook("onClose", async () => {
    if (poll) clearInterval(poll);
    if (served) await (await served).handler.close().catch(() => undefined);
  });

  // The SDK reads the body itself (and answers a wrong Content-Type with its own 415), so this context keeps it raw.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));

  const resourceMetadataUrl = () => `${gatewayUrl()}${metadataPath}`;
  // A 401 or 403 from the gateway's authentication names where the protected-resource metadata is (RFC 9728 §5.1).
  app.addHook("onSend", async (req, reply, payload) => {
    if (reply.statusCode !== 401 && reply.statusCode !== 403) return payload;
    if (req.routeOptions.url !== path) return payload;
    const h = reply.getHeader("www-authenticate");
    if (typeof h === "string" && !h.includes("resource_metadata=")) reply.header("www-authenticate", `${h}, resource_metadata="${resourceMetadataUrl()}"`);
    return payload;
  });

  app.get(metadataPath, { config: { access: "public" } }, async () => {
    const servers = settings.authorizationServers.length > 0 ? settings.authorizationServers : [fabric.auth.oidc?.issuer ?? fabric.auth.issuer].filter((s): s is string => typeof s === "string");
    return {
      resource: `${gatewayUrl()}${path}`,
      authorization_servers: servers,
      scopes_supported: ["runs:read", "runs:write"],
      bearer_methods_supported: ["header"],
      resource_name: "NodeFabric MCP server",
    };
  });

  // The names Host and Origin may give, worked out again only when the gateway's address changes (it is known once
  // the gateway listens).
  let names: { url: string; checkHost: boolean; hosts: string[]; origins: string[] } | undefined;
  const allowedNames = () => {
    const url = gatewayUrl();
    if (names?.url !== url) {
      const own = hostnameOf(url);
      const base = [...LOOPBACK, ...(own ? [own] : [])];
      names = {
        url,
        checkHost: settings.allowedHosts.length > 0 || (own !== undefined && LOOPBACK.has(own)),
        hosts: [...base, ...settings.allowedHosts],
        origins: [...base, ...settings.allowedOrigins],
      };
    }
    return names;
  };

  const handle = async (req: FastifyRequest, reply: FastifyReply) => {
    const { sdk, handler } = await serve();
    const ac = new AbortController();
    const exchange: Partial<Exchange> = {};
    // A client gone before its answer was sent aborts the exchange; not once its server instance was taken back for
    // another (server-pool.ts), which an abort of this request would otherwise reach.
    reply.raw.on("close", () => {
      if (!reply.raw.writableFinished && !exchange.ended) ac.abort();
    });
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
      if (v === undefined) continue;
      headers.set(k, Array.isArray(v) ? v.join(", ") : String(v));
    }
    const body = req.body as Buffer | undefined;
    const url = `${gatewayUrl()}${req.url}`;
    // A JSON body is parsed here and handed over parsed, so the SDK need not read it from a web stream; one that does
    // not parse goes to the SDK as it came, which answers the parse error.
    let parsedBody: unknown = undefined;
    let parsed = false;
    if (req.method === "POST" && body && body.length > 0 && /^application\/json\b/i.test(req.headers["content-type"] ?? "")) {
      try {
        parsedBody = JSON.parse(body.toString("utf8"));
        parsed = true;
      } catch {
        parsed = false;
      }
    }
    const web = new Request(url, { method: req.method, headers, ...(req.method === "POST" && body && !parsed ? { body } : {}), signal: ac.signal });

    // DNS rebinding: the Host must be this gateway (checked when it is on loopback or hosts are configured), and a
    // browser's Origin one we know.
    const allowed = allowedNames();
    const refused = (allowed.checkHost ? sdk.hostHeaderValidationResponse(web, allowed.hosts) : undefined) ?? (req.headers.origin ? sdk.originValidationResponse(web, allowed.origins) : undefined);
    if (refused) return sendWeb(reply, refused);

    const p = req.principal;
    const mayRun = !authOn || p === undefined || p.kind === "anonymous" || p.scopes.has("runs:write");
    const caller: CallerInfo = {
      headers: callerHeaders(req.headers),
      verified: p,
      principal: p && p.kind !== "anonymous" ? { sub: p.sub, iss: p.iss, tenant_id: p.tenant_id, scopes: p.scopes } : undefined,
      digest: callerDigest(p && p.kind !== "anonymous" ? p : undefined),
      mayRun,
    };
    exchange.caller = caller;
    if (!mayRun && req.method === "POST" && parsed && wantsToRun(parsedBody)) {
      throw new FabricError("permission_denied", "calling a tool starts a run, and the token lacks the scope runs:write", {
        headers: { "www-authenticate": `Bearer realm="nodefabric-run-gateway", error="insufficient_scope", scope="runs:write", resource_metadata="${resourceMetadataUrl()}"` },
        details: { required_scope: "runs:write" },
      });
    }
    const res = await handler.fetch(web, { authInfo: { token: "", clientId: caller.principal?.sub ?? "anonymous", scopes: [...(p?.scopes ?? [])], extra: exchange }, ...(parsed ? { parsedBody } : {}) });
    return sendWeb(reply, res);
  };

  const access = { method: "POST" as const, path, scope: "runs:read" as const };
  app.route({ method: ["POST", "GET", "DELETE"], url: path, config: { access }, handler: handle });
}

/** Whether a JSON-RPC body asks to run something (tools/call, or a task's result that would). */
function wantsToRun(msg: unknown): boolean {
  const msgs = Array.isArray(msg) ? msg : [msg];
  return msgs.some((m) => typeof m === "object" && m !== null && (m as { method?: unknown }).method === "tools/call");
}
