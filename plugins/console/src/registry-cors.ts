/**
 * CORS on the Node Registry for the console only: the page, served by the gateway, reads node types and executors
 * from the registry, another origin. Only the gateway's origin is allowed (and its loopback spellings, since a
 * browser on this machine may say localhost or 127.0.0.1), only to read (GET), and only with the Authorization
 * header. Any other origin gets no CORS headers, so its pages cannot read the registry's answers.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { FabricError, type PluginServiceContext } from "@nodefabric/core";
import { originOf } from "./security-headers.js";
import { HIDDEN } from "./hidden-schema.js";

export interface RegistryCorsOptions {
  fabric: PluginServiceContext;
}

const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "[::1]"];
const ALLOWED_METHODS = new Set(["GET", "HEAD"]);
const ALLOWED_HEADERS = new Set(["authorization", "accept"]);
/** Public (a preflight carries no token), and no part of the registry's OpenAPI document. */
const PREFLIGHT_ROUTE = { config: { access: "public" as const }, schema: HIDDEN };
/** The headers a page may read besides the simple ones: the next page of a list. */
const EXPOSED_HEADERS = "x-next-page-token";

/** The origins allowed to read: the gateway's, and its other loopback spellings when it is on loopback. */
export function allowedOrigins(gatewayUrl: string): Set<string> {
  const origin = originOf(gatewayUrl);
  const out = new Set<string>();
  if (!origin) return out;
  out.add(origin);
  const u = new URL(origin);
  if (LOOPBACK_NAMES.includes(u.hostname) || u.hostname.endsWith(".localhost")) {
    for (const name of LOOPBACK_NAMES) out.add(`${u.protocol}//${name}${u.port ? `:${u.port}` : ""}`);
  }
  return out;
}

async function registryCorsPlugin(app: FastifyInstance, options: RegistryCorsOptions): Promise<void> {
  const fabric = options.fabric;
  if (!fabric) throw new Error("@nodefabric/plugin-console: registered without the fabric's context (options.fabric); load it as a NodeFabric plugin");
  // Asked on each request: with ephemeral ports, the gateway listens after the registry started.
  let cached: { url: string; origins: Set<string> } | undefined;
  const isAllowed = (origin: string | undefined): origin is string => {
    if (!origin) return false;
    const url = fabric.serviceUrl("run-gateway");
    if (cached?.url !== url) cached = { url, origins: allowedOrigins(url) };
    return cached.origins.has(origin);
  };
  const originHeader = (req: FastifyRequest) => (typeof req.headers.origin === "string" ? req.headers.origin : undefined);

  // Preflights: no route of the contract answers OPTIONS, so this one takes them all.
  app.options("/v1/*", PREFLIGHT_ROUTE, async (req: FastifyRequest, reply: FastifyReply) => {
    const origin = originHeader(req);
    const method = String(req.headers["access-control-request-method"] ?? "").toUpperCase();
    const asked = String(req.headers["access-control-request-headers"] ?? "")
      .split(",")
      .map((h) => h.trim().toLowerCase())
      .filter((h) => h !== "");
    reply.header("vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
    if (!isAllowed(origin)) {
      throw new FabricError("permission_denied", `cross-origin requests to the node registry are allowed only from the console's gateway, not from ${JSON.stringify(origin ?? "")}`);
    }
    if (!ALLOWED_METHODS.has(method)) throw new FabricError("permission_denied", `the console may only read from the node registry (GET), not ${method || "(no method)"}`);
    const refused = asked.filter((h) => !ALLOWED_HEADERS.has(h));
    if (refused.length > 0) throw new FabricError("permission_denied", `cross-origin requests may not send the header${refused.length > 1 ? "s" : ""} ${refused.join(", ")}`);
    return reply
      .code(204)
      .header("access-control-allow-origin", origin)
      .header("access-control-allow-methods", "GET, HEAD")
      .header("access-control-allow-headers", "Authorization, Accept")
      .header("access-control-max-age", "600")
      .send();
  });

  // Every answer to the gateway's origin, errors included, may be read by the page (it shows the envelopes).
  app.addHook("onSend", async (req, reply, payload) => {
    const origin = originHeader(req);
    if (req.method !== "OPTIONS" && isAllowed(origin)) {
      reply.header("access-control-allow-origin", origin);
      reply.header("access-control-expose-headers", EXPOSED_HEADERS);
      const vary = reply.getHeader("vary");
      reply.header("vary", vary ? `${String(vary)}, Origin` : "Origin");
    }
    return payload;
  });
}

/** The registry's CORS for the console (wrapped so its hook reaches core's routes). */
export const registryCors = fp(registryCorsPlugin, { name: "nodefabric-console-registry-cors", fastify: "5.x" });
