/**
 * A2A on the Run Gateway: the Agent Card at /.well-known/agent-card.json (and under the JSON-RPC endpoint's path),
 * the JSON-RPC binding at `path` and the HTTP+JSON binding under `path`/rest, all behind the gateway's own
 * authentication. The SDK (and what serves with it) is loaded on the first request, so a fabric nobody asks over
 * A2A starts as fast as one without this plugin.
 *
 * Protocol versions: a request's A2A-Version header says which it speaks; without one, a JSON-RPC method name does
 * (0.3's are `message/send`, `tasks/get`…, 1.0's `SendMessage`, `GetTask`…), so a 1.0 client that sends no header
 * (the official TCK) is served as 1.0, and a 0.3 client through the SDK's compat layer (docs/a2a.md).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Catalogue, FabricError, GatewayCalls, PolicyFilter, callerDigest, searchCatalogue, callerHeaders, type CallerInfo, type PluginServiceContext } from "@nodefabric/core";
import { a2aSettings, modelConfigured, type A2aSettings } from "./settings.js";

export interface A2aRoutesOptions extends Partial<A2aSettings> {
  fabric: PluginServiceContext;
  /** The version the card reports (the plugin's). */
  serverVersion?: string;
}

type Served = Awaited<ReturnType<typeof loadServing>>;

/** Everything that serves A2A, loaded on the first request. */
async function loadServing(app: FastifyInstance, options: A2aRoutesOptions, settings: A2aSettings) {
  const fabric = options.fabric;
  const sdk = await import("@a2a-js/sdk");
  const server = await import("@a2a-js/sdk/server");
  const errors = await import("@a2a-js/sdk/errors");
  const legacy = await import("@a2a-js/sdk/compat/v0_3/server");
  const { FabricRequestHandler, CALLER_KEY } = await import("./request-handler.js");
  const { agentCard } = await import("./card.js");
  const { PushConfigs } = await import("./push.js");
  const { AskTasks } = await import("./ask-tasks.js");
  const authOn = fabric.auth.mode !== "disabled";
  const catalogue = new Catalogue({
    registryUrl: () => fabric.serviceUrl("node-registry"),
    token: async () => fabric.serviceToken?.("node-registry"),
    include: settings.include,
    exclude: settings.exclude,
    versions: {},
    refreshMs: settings.refreshMs,
  });
  const policy = settings.policyFilter
    ? new PolicyFilter({ pdpUrl: () => fabric.serviceUrl("pdp"), token: async () => fabric.serviceToken?.("pdp"), ttlMs: Math.max(settings.refreshMs, 10_000), cacheName: "a2a.policy_decisions" })
    : undefined;
  const push = new PushConfigs({ egress: fabric.egress, dataDir: fabric.dataDir, log: app.log });
  // The card's URLs come from the request being answered; the handler's own getAgentCard (used by the transports for
  // capability checks) answers the card at the gateway's address.
  let base = fabric.serviceUrl("run-gateway");
  const cardFor = async (caller?: CallerInfo, at = base) => {
    const all = await catalogue.list();
    const skills = caller && policy ? await policy.filter(caller, all) : all;
    const search = settings.mode === "search" || (settings.mode === "auto" && skills.length > settings.maxSkills);
    return agentCard({ base: at, path: settings.path, version: options.serverVersion ?? "0.0.0", skills, maxSkills: settings.maxSkills, search, auth: { on: authOn, oidcIssuer: fabric.auth.oidc?.issuer }, extended: caller !== undefined, legacy: true });
  };
  // What the transports ask of the card on every request (versions, capabilities) needs no skills: that card is made
  // once per address, not from the catalogue each time.
  let light: { at: string; card: Awaited<ReturnType<typeof agentCard>> } | undefined;
  const lightCard = () => {
    if (light?.at !== base) light = { at: base, card: agentCard({ base, path: settings.path, version: options.serverVersion ?? "0.0.0", skills: [], maxSkills: settings.maxSkills, search: false, auth: { on: authOn, oidcIssuer: fabric.auth.oidc?.issuer }, extended: false, legacy: true }) };
    return light.card;
  };
  const handler = new FabricRequestHandler({ calls: new GatewayCalls(app, fabric.runs), catalogue, ...(policy ? { policy } : {}), push, asks: new AskTasks(fabric.dataDir), card: async (caller) => (caller ? cardFor(caller, base) : lightCard()), waitSeconds: settings.waitSeconds,
    planner: settings.planner === "on" || (settings.planner === "auto" && modelConfigured()),
    search: async (caller, query, limit) =>
      searchCatalogue({ selectionUrl: fabric.serviceUrl("selection"), token: await fabric.serviceToken?.("selection"), catalogue, goal: query, limit, subtaskId: "a2a-search", ...(policy ? { keep: (types) => policy.filter(caller, types) } : {}) }),
  });
  push.attach(handler);
  return {
    sdk,
    server,
    errors,
    legacy,
    handler,
    push,
    jsonRpc: new server.JsonRpcTransportHandler(handler),
    legacyJsonRpc: new legacy.LegacyJsonRpcTransportHandler(handler),
    CALLER_KEY,
    card: (caller: CallerInfo | undefined, at: string) => {
      base = at;
      return cardFor(caller, at);
    },
  };
}

/** The scheme and host a request came to, for the card's URLs (never a hard-coded address). */
function baseOf(req: FastifyRequest): string {
  const host = req.headers["x-forwarded-host"] ?? req.headers.host ?? req.hostname;
  const proto = req.headers["x-forwarded-proto"] ?? req.protocol;
  return `${String(proto).split(",")[0]!.trim()}://${String(host).split(",")[0]!.trim()}`;
}

const LEGACY_METHOD = /^(message|tasks|agent)\//;

export async function a2aRoutes(app: FastifyInstance, options: A2aRoutesOptions): Promise<void> {
  const settings = a2aSettings(options);
  const fabric = options.fabric;
  const path = settings.path;
  const authOn = fabric.auth.mode !== "disabled";

  let served: Promise<Served> | undefined;
  const serve = (): Promise<Served> => (served ??= loadServing(app, options, settings));
  app.addHook("onClose", async () => {
    if (served) await (await served).push.close().catch(() => undefined);
  });

  // Bodies are read as bytes here and parsed by the route, so a body that is not JSON is A2A's parse error.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: settings.maxMessageBytes }, (_req, body, done) => done(null, body));

  const callerOf = (req: FastifyRequest): CallerInfo => {
    const p = req.principal;
    return {
      headers: callerHeaders(req.headers),
      verified: p,
      principal: p && p.kind !== "anonymous" ? { sub: p.sub, iss: p.iss, tenant_id: p.tenant_id, scopes: p.scopes } : undefined,
      digest: callerDigest(p && p.kind !== "anonymous" ? p : undefined),
      mayRun: !authOn || p === undefined || p.kind === "anonymous" || p.scopes.has("runs:write"),
    };
  };

  const contextOf = (s: Served, req: FastifyRequest, caller: CallerInfo, version: string) => {
    const authenticated = caller.principal !== undefined;
    const user = { isAuthenticated: authenticated, userName: caller.principal?.sub ?? "" };
    return new s.server.ServerCallContext({ user, requestedVersion: version, state: new Map<string, unknown>([[s.CALLER_KEY, caller], ["headers", req.headers]]) });
  };

  const refuseWithoutRunsWrite = (caller: CallerInfo) => {
    if (caller.mayRun) return;
    throw new FabricError("permission_denied", "sending a message starts a run, and the token lacks the scope runs:write", {
      headers: { "www-authenticate": `Bearer realm="nodefabric-run-gateway", error="insufficient_scope", scope="runs:write"` },
      details: { required_scope: "runs:write" },
    });
  };

  // ---- The Agent Card ----
  const card = async (req: FastifyRequest, reply: FastifyReply) => {
    const s = await serve();
    const c = await s.card(undefined, baseOf(req));
    return reply.header("cache-control", "public, max-age=60").type("application/json").send(JSON.stringify(s.sdk.AgentCard.toJSON(c)));
  };
  app.get("/.well-known/agent-card.json", { config: { access: "public" } }, card);
  app.get(`${path}/.well-known/agent-card.json`, { config: { access: "public" } }, card);

  // ---- JSON-RPC ----
  const sendSse = async (reply: FastifyReply, first: IteratorResult<unknown>, rest: AsyncIterator<unknown>, s: Served, errorOf: (e: unknown) => unknown) => {
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, { ...s.sdk.SSE_HEADERS });
    let closed = false;
    raw.on("close", () => {
      closed = true;
      void rest.return?.(undefined);
    });
    try {
      if (!first.done) raw.write(s.sdk.formatSSEEvent(first.value));
      for (;;) {
        const next = await rest.next();
        if (next.done || closed) break;
        raw.write(s.sdk.formatSSEEvent(next.value));
      }
    } catch (err) {
      if (!closed) raw.write(s.sdk.formatSSEErrorEvent(errorOf(err)));
    } finally {
      if (!raw.writableEnded) raw.end();
    }
  };

  app.post(path, { config: { access: { method: "POST" as const, path, scope: "runs:read" as const } } }, async (req, reply) => {
    const s = await serve();
    const caller = callerOf(req);
    const body = req.body as Buffer | undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse((body ?? Buffer.alloc(0)).toString("utf8"));
    } catch {
      return reply.send({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error: the body is not JSON" } });
    }
    const method = typeof parsed === "object" && parsed !== null ? (parsed as { method?: unknown }).method : undefined;
    const id = typeof parsed === "object" && parsed !== null ? ((parsed as { id?: unknown }).id ?? null) : null;
    // What is not a JSON-RPC 2.0 request at all is -32600 (JSON-RPC 2.0 §5.1), before any method is looked at.
    const idOk = id === null || typeof id === "string" || typeof id === "number";
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed) || (parsed as { jsonrpc?: unknown }).jsonrpc !== "2.0" || typeof method !== "string" || !idOk) {
      return reply.send({ jsonrpc: "2.0", id: typeof id === "string" || typeof id === "number" ? id : null, error: { code: -32600, message: "Invalid Request: a JSON-RPC 2.0 request object with a method is required" } });
    }
    const header = req.headers["a2a-version"];
    const version = typeof header === "string" && header !== "" ? header.trim() : typeof method === "string" && LEGACY_METHOD.test(method) ? "0.3" : "1.0";
    const useLegacy = version === "0.3";
    const mapError = (e: unknown) => ({ jsonrpc: "2.0", id, error: useLegacy ? s.legacy.LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError(e) : s.server.JsonRpcTransportHandler.mapToJSONRPCError(e) });
    try {
      s.server.validateVersion(version, await s.handler.getAgentCard(), "JSONRPC");
    } catch (e) {
      return reply.send(mapError(e));
    }
    if (method === "SendMessage" || method === "SendStreamingMessage" || method === "message/send" || method === "message/stream") refuseWithoutRunsWrite(caller);
    // An earlier 1.0 draft (and the TCK) named SendMessage's config pushNotificationConfig.
    const conf = (parsed as { params?: { configuration?: Record<string, unknown> } }).params?.configuration;
    if (conf && typeof conf === "object" && conf.pushNotificationConfig !== undefined && conf.taskPushNotificationConfig === undefined) conf.taskPushNotificationConfig = conf.pushNotificationConfig;
    const ctx = contextOf(s, req, caller, version);
    const answer = await (useLegacy ? s.legacyJsonRpc : s.jsonRpc).handle(parsed as Record<string, unknown>, ctx);
    if (answer && typeof (answer as AsyncGenerator)[Symbol.asyncIterator] === "function") {
      const it = (answer as AsyncGenerator<unknown>)[Symbol.asyncIterator]();
      let first: IteratorResult<unknown>;
      try {
        first = await it.next();
      } catch (e) {
        // A stream that fails before its first event is still a stream: the error is its one event.
        reply.hijack();
        reply.raw.writeHead(200, { ...s.sdk.SSE_HEADERS });
        reply.raw.end(s.sdk.formatSSEEvent(mapError(e)));
        return;
      }
      return sendSse(reply, first, it, s, mapError);
    }
    return reply.send(answer);
  });

  // ---- HTTP+JSON (REST) ----
  const rest = async (req: FastifyRequest, reply: FastifyReply) => {
    const s = await serve();
    const caller = callerOf(req);
    const header = req.headers["a2a-version"];
    const version = typeof header === "string" && header !== "" ? header.trim() : "1.0";
    const fail = (e: unknown) => {
      const status = s.errors.restStatusFor(e);
      return reply.code(status).type("application/json").send(s.errors.toRestErrorBody(e, status));
    };
    try {
      if (version !== "1.0") throw new s.errors.VersionNotSupportedError(`A2A-Version ${version} is not served on HTTP+JSON (1.0 is; 0.3 on JSON-RPC)`);
      const url = new URL(req.url, "http://x");
      const prefix = `${path}/rest`;
      let rel = decodeURIComponent(url.pathname.startsWith(`${prefix}/`) ? url.pathname.slice(prefix.length) : url.pathname) || "/";
      // A tenant may prefix the path (A2A 1.0 §11); the fabric's tenants come from the caller's token, so it is dropped.
      rel = rel.replace(/^\/v1(?=\/)/, "");
      const q = url.searchParams;
      const bodyOf = () => {
        const b = req.body as Buffer | undefined;
        if (!b || b.length === 0) return {};
        try {
          return JSON.parse(b.toString("utf8")) as Record<string, unknown>;
        } catch {
          throw new s.errors.RequestMalformedError("the body is not JSON");
        }
      };
      const ctx = contextOf(s, req, caller, version);
      const h = s.handler;
      const send = (status: number, value: unknown) => reply.code(status).type("application/json").send(JSON.stringify(value));
      const stream = async (gen: AsyncGenerator<unknown>) => {
        const it = gen[Symbol.asyncIterator]();
        const first = await it.next();
        const mapped = (async function* () {
          for (;;) {
            const n = await it.next();
            if (n.done) return;
            yield s.sdk.StreamResponse.toJSON(n.value as never);
          }
        })();
        return sendSse(reply, first.done ? first : { done: false, value: s.sdk.StreamResponse.toJSON(first.value as never) }, mapped, s, (e) => s.errors.toRestErrorBody(e, s.errors.restStatusFor(e)));
      };
      let m: RegExpExecArray | null;
      if (req.method === "GET" && rel === "/extendedAgentCard") return send(200, s.sdk.AgentCard.toJSON(await h.getAuthenticatedExtendedAgentCard({ tenant: "" }, ctx)));
      if (req.method === "POST" && (rel === "/message:send" || rel === "/message:stream")) {
        refuseWithoutRunsWrite(caller);
        const params = s.sdk.SendMessageRequest.fromJSON(bodyOf());
        if (rel === "/message:send") {
          const result = await h.sendMessage(params, ctx);
          return send(200, s.sdk.SendMessageResponse.toJSON("messageId" in result ? { payload: { $case: "message", value: result } } : { payload: { $case: "task", value: result } }));
        }
        return stream(h.sendMessageStream(params, ctx));
      }
      if (req.method === "GET" && rel === "/tasks") {
        const params = s.sdk.ListTasksRequest.fromJSON(Object.fromEntries(q.entries()));
        return send(200, s.sdk.ListTasksResponse.toJSON(await h.listTasks(params, ctx)));
      }
      if ((m = /^\/tasks\/([^/]+):cancel$/.exec(rel)) && req.method === "POST") return send(200, s.sdk.Task.toJSON(await h.cancelTask({ id: m[1]! }, ctx)));
      if ((m = /^\/tasks\/([^/]+):subscribe$/.exec(rel)) && (req.method === "POST" || req.method === "GET")) return stream(h.resubscribe({ id: m[1]! }, ctx));
      if ((m = /^\/tasks\/([^/:]+)$/.exec(rel)) && req.method === "GET") {
        const hl = q.get("historyLength");
        if (hl !== null && !/^\d+$/.test(hl)) throw new s.errors.RequestMalformedError("historyLength must be a non-negative integer");
        return send(200, s.sdk.Task.toJSON(await h.getTask({ id: m[1]!, ...(hl !== null ? { historyLength: Number(hl) } : {}) }, ctx)));
      }
      if ((m = /^\/tasks\/([^/]+)\/pushNotificationConfigs$/.exec(rel))) {
        if (req.method === "POST") {
          const cfg = s.sdk.TaskPushNotificationConfig.fromJSON({ ...bodyOf(), taskId: m[1] });
          return send(200, s.sdk.TaskPushNotificationConfig.toJSON(await h.createTaskPushNotificationConfig(cfg, ctx)));
        }
        if (req.method === "GET") return send(200, s.sdk.ListTaskPushNotificationConfigsResponse.toJSON(await h.listTaskPushNotificationConfigs({ taskId: m[1]! }, ctx)));
      }
      if ((m = /^\/tasks\/([^/]+)\/pushNotificationConfigs\/([^/]+)$/.exec(rel))) {
        if (req.method === "GET") return send(200, s.sdk.TaskPushNotificationConfig.toJSON(await h.getTaskPushNotificationConfig({ taskId: m[1]!, id: m[2]! }, ctx)));
        if (req.method === "DELETE") {
          await h.deleteTaskPushNotificationConfig({ taskId: m[1]!, id: m[2]! }, ctx);
          return reply.code(204).send();
        }
      }
      throw new s.errors.UnsupportedOperationError(`no A2A operation at ${req.method} ${rel}`);
    } catch (e) {
      if (e instanceof FabricError) throw e;
      return fail(e);
    }
  };
  // Reading and acting on one's own tasks needs runs:read; what starts a run also runs:write (checked above).
  const restAccess = (method: "GET" | "POST") => ({ access: { method, path: `${path}/rest/*`, scope: "runs:read" as const } });
  app.get(`${path}/rest/*`, { config: restAccess("GET") }, rest);
  app.post(`${path}/rest/*`, { config: restAccess("POST") }, rest);
  app.delete(`${path}/rest/*`, { config: restAccess("POST") }, rest);
  // Some clients (the TCK's) join the binding's paths to the host, not to the interface URL: the same operations
  // answer at the gateway's root too.
  const rootAccess = (method: "GET" | "POST", p: string) => ({ access: { method, path: p, scope: "runs:read" as const } });
  app.post("/message::send", { config: rootAccess("POST", "/message:send") }, rest);
  app.post("/message::stream", { config: rootAccess("POST", "/message:stream") }, rest);
  app.get("/extendedAgentCard", { config: rootAccess("GET", "/extendedAgentCard") }, rest);
  app.get("/tasks", { config: rootAccess("GET", "/tasks") }, rest);
  app.get("/tasks/*", { config: rootAccess("GET", "/tasks/*") }, rest);
  app.post("/tasks/*", { config: rootAccess("POST", "/tasks/*") }, rest);
  app.delete("/tasks/*", { config: rootAccess("POST", "/tasks/*") }, rest);
}
