/**
 * The console on the Run Gateway: the built page under /console/ (index.html for the page's own paths, hashed assets
 * cached for good) and /console/config.json, which tells the page where the registry is and how to authenticate.
 * Every route here is public: the page holds no data; the API it calls checks the caller's token.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { HIDDEN } from "./hidden-schema.js";
import fastifyStatic from "@fastify/static";
import { FabricError, type PluginServiceContext } from "@nodefabric/core";
import { findPublicDir } from "./public-dir.js";
import { OidcOrigins } from "./oidc-origins.js";
import { STATIC_SECURITY_HEADERS, contentSecurityPolicy, originOf } from "./security-headers.js";
import { redactRules, traceUrlTemplate } from "./settings.js";

export interface ConsoleRoutesOptions {
  /** Given by the fabric (see docs/plugins.md). */
  fabric: PluginServiceContext;
  /** The built page (default: the package's dist/public). */
  publicDir?: string;
}

/** What GET /console/config.json answers. */
export interface ConsoleConfigBody {
  registry_url: string;
  auth: { required: boolean; mode: string; oidc: null | { issuer: string; client_id: string; scope: string } };
  /** Where a run's trace is shown: a URL template holding `{trace_id}` (FABRIC_CONSOLE_TRACE_URL), or null. */
  trace_url: string | null;
  /** What the node panel hides: regular expressions whose matches become "[redacted]" (FABRIC_CONSOLE_REDACT). */
  redact: string[];
}

/** The console's configuration as the page reads it; the trace URL template defaults to FABRIC_CONSOLE_TRACE_URL's. */
export function consoleConfig(fabric: PluginServiceContext, traceUrl: string | null = traceUrlTemplate(process.env), redact: string[] = redactRules(process.env)): ConsoleConfigBody {
  const oidc = fabric.auth.oidc;
  return {
    registry_url: fabric.serviceUrl("node-registry"),
    auth: {
      required: fabric.auth.mode === "required",
      mode: fabric.auth.mode,
      oidc: oidc ? { issuer: oidc.issuer, client_id: oidc.client_id, scope: oidc.scope ?? "openid" } : null,
    },
    trace_url: traceUrl,
    redact,
  };
}

/** The page's routes: public (they hold no data), and no part of the API's OpenAPI document. */
const PUBLIC = { config: { access: "public" as const }, schema: HIDDEN };
/** A path with a file extension names a file; anything else is one of the page's own paths. */
const HAS_EXTENSION = /\.[A-Za-z0-9]+$/;

/** Registers the console's routes on the gateway. */
export async function consoleRoutes(app: FastifyInstance, options: ConsoleRoutesOptions): Promise<void> {
  const fabric = options.fabric;
  if (!fabric) throw new Error("@nodefabric/plugin-console: registered without the fabric's context (options.fabric); load it as a NodeFabric plugin");
  // Read once, here: a bad value stops the start rather than a page linking nowhere.
  let traceUrl: string | null;
  let redact: string[];
  try {
    traceUrl = traceUrlTemplate(process.env);
    redact = redactRules(process.env);
  } catch (err) {
    throw new Error(`@nodefabric/plugin-console: ${(err as Error).message}`);
  }
  const root = options.publicDir ?? findPublicDir();
  if (!root) {
    // A package found by discovery in a checkout whose page is not built yet must not stop the fabric: say so instead.
    app.log.warn("@nodefabric/plugin-console: the page is not built (no dist/public/index.html); /console answers 503");
    const unbuilt = async () => {
      throw new FabricError("unavailable", "the console page is not built: run `npm run build -w @nodefabric/plugin-console`");
    };
    app.get("/console", PUBLIC, unbuilt);
    app.get("/console/*", PUBLIC, unbuilt);
    return;
  }

  // Only reply.sendFile: the routes are ours, so each states its access and headers.
  await app.register(fastifyStatic, { root, serve: false, decorateReply: true });

  const oidc = fabric.auth.oidc ? new OidcOrigins(fabric.auth.oidc.issuer) : undefined;
  app.addHook("onSend", async (_req, reply, payload) => {
    reply.header("content-security-policy", contentSecurityPolicy([originOf(fabric.serviceUrl("node-registry")), ...((await oidc?.get()) ?? [])]));
    for (const [k, v] of Object.entries(STATIC_SECURITY_HEADERS)) reply.header(k, v);
    return payload;
  });

  const sendIndex = (reply: FastifyReply) => {
    // The page itself is never cached: a new build must reach the browser at once (its assets are hashed).
    return reply.header("cache-control", "no-cache").sendFile("index.html", root, { cacheControl: false });
  };

  app.get("/console/config.json", PUBLIC, async (_req, reply) => {
    reply.header("cache-control", "no-store");
    return consoleConfig(fabric, traceUrl, redact);
  });

  const serve = async (req: FastifyRequest, reply: FastifyReply) => {
    const path = req.url.split("?")[0]!;
    // The router ignores a trailing slash, so /console and /console/ both come here; the page's relative links need
    // the slash.
    if (path === "/console") return reply.redirect(`/console/${req.url.slice(path.length)}`, 302);
    const file = (req.params as { "*"?: string })["*"] ?? "";
    if (file === "" || file === "index.html" || !HAS_EXTENSION.test(file)) return sendIndex(reply);
    if (file.startsWith("assets/")) return reply.sendFile(file, root, { maxAge: 365 * 24 * 3600 * 1000, immutable: true });
    return reply.sendFile(file, root, { maxAge: 0 });
  };
  app.get("/console", PUBLIC, serve);
  app.get("/console/*", PUBLIC, serve);
}
