/**
 * Inbound authentication and authorization, the same for every service: bearer JWTs verified against the JWKS for
 * this service's audience, the scope each route needs (ROUTE_ACCESS), assignment tokens at the coordinator, and the
 * caller identity a gateway passes on, and, at an executor, the executor a token is bound to. The verified principal
 * is `req.principal`.
 */
import fp from "fastify-plugin";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { FabricError } from "./errors.js";
import { PUBLIC_ROUTES, ROUTE_ACCESS, audienceOf, contractPath, grants, type RouteAccess } from "./auth-scopes.js";
import { unauthenticated, type TokenVerifier } from "./token-verifier.js";
import type { ServiceName } from "../service-names.js";
import type { ServiceLimits } from "./edge.js";
import { EXECUTOR_BINDING_CLAIM, executorBinding, type ServiceTokens } from "./outbound-tokens.js";

export const AUTH_MODES = ["required", "optional", "disabled"] as const;
/** `required`: every request needs a valid token. `optional`: a request without one is anonymous. `disabled`: none checked. */
export type AuthMode = (typeof AUTH_MODES)[number];

/** The header in which a service acting for a caller (the gateway) passes on the caller's verified identity. */
export const CALLER_HEADER = "x-nodefabric-caller";

/** What an assignment token is bound to. */
export interface AssignmentBinding {
  run_id: string;
  node_run_id: string;
}

/** Who made a request, once authenticated. */
export interface Principal {
  kind: "token" | "assignment" | "anonymous";
  sub?: string;
  iss?: string;
  tenant_id?: string;
  scopes: ReadonlySet<string>;
  /** The NodeRun an assignment token acts for. */
  assignment?: AssignmentBinding;
  /** The `sub` of the service that passed this identity on. */
  via?: string;
}

export interface AssignmentVerifier {
  /** Whether a token is an assignment token (by its header), before it is verified. */
  recognizes(token: string): boolean;
  /** The binding of a valid assignment token; throws a 401 FabricError otherwise. */
  verify(token: string): Promise<AssignmentBinding>;
}

/** How a service authenticates its callers. */
export interface InboundAuthOptions {
  mode: AuthMode;
  /** Required unless the mode is `disabled`. */
  verifier?: TokenVerifier;
  /** Assignment tokens this service accepts (the coordinator's). */
  assignments?: AssignmentVerifier;
  /** Accept a caller identity in CALLER_HEADER from tokens holding `identity:delegate` (the coordinator). */
  delegation?: boolean;
  /**
   * At an executor, the base URLs it is known at (besides the address it listens on, and the endpoint it registers):
   * a token bound to an executor (EXECUTOR_BINDING_CLAIM) is accepted only when it names one of them.
   */
  executorEndpoints?: readonly string[];
}

declare module "fastify" {
  interface FastifyRequest {
    /** The authenticated caller; undefined when authentication is disabled. */
    principal?: Principal;
  }
  interface FastifyContextConfig {
    /** Filled in from ROUTE_ACCESS when the route is added. */
    access?: RouteAccess | "public";
    /** The request body may be left out (the API documents then say it is not required). */
    bodyOptional?: boolean;
  }
}

const ANONYMOUS: Principal = { kind: "anonymous", scopes: new Set() };

/** Encodes a principal for CALLER_HEADER. */
export function encodeCaller(p: Principal): string {
  const c = p.kind === "anonymous" ? { anonymous: true } : { sub: p.sub, iss: p.iss, tenant_id: p.tenant_id, scope: [...p.scopes].join(" ") };
  return Buffer.from(JSON.stringify(c)).toString("base64url");
}

function decodeCaller(value: string, via: string | undefined): Principal {
  let c: { anonymous?: unknown; sub?: unknown; iss?: unknown; tenant_id?: unknown; scope?: unknown };
  try {
    c = JSON.parse(Buffer.from(value, "base64url").toString("utf8")) as typeof c;
    if (typeof c !== "object" || c === null) throw new Error("not an object");
  } catch {
    throw new FabricError("invalid_request", `the ${CALLER_HEADER} header is not a caller this fabric encoded`);
  }
  if (c.anonymous === true) return { ...ANONYMOUS, via };
  // As for a token's claims: what is present must be readable, or the caller is refused rather than read as "none".
  for (const k of ["sub", "iss", "tenant_id"] as const) {
    if (c[k] !== undefined && (typeof c[k] !== "string" || c[k] === "")) throw new FabricError("invalid_request", `the ${CALLER_HEADER} header names a caller whose ${k} is not a non-empty string`);
  }
  if (c.scope !== undefined && typeof c.scope !== "string") throw new FabricError("invalid_request", `the ${CALLER_HEADER} header names a caller whose scope is not a string`);
  const p: Principal = { kind: "token", scopes: new Set(typeof c.scope === "string" ? c.scope.split(" ").filter(Boolean) : []), via };
  if (typeof c.sub === "string") p.sub = c.sub;
  if (typeof c.iss === "string") p.iss = c.iss;
  if (typeof c.tenant_id === "string") p.tenant_id = c.tenant_id;
  return p;
}

/** The executor endpoints each executor's instance answers at (see bindExecutorEndpoint). */
const executorEndpoints = new WeakMap<FastifyInstance, Set<string>>();

const isExecutor = (service: ServiceName) => service === "atomic-executor" || service === "composite-executor";

/**
 * Tells an executor's auth one more base URL it is reached at (the endpoint it registers in the directory), so it
 * accepts tokens bound to it there. Call it with the instance authentication was installed on.
 */
export function bindExecutorEndpoint(app: FastifyInstance, endpoint: string): void {
  executorEndpoints.get(app)?.add(executorBinding(endpoint));
}

function forbidden(message: string, realm: string, scope?: string): FabricError {
  const challenge = scope
    ? `Bearer realm="${realm}", error="insufficient_scope", scope="${scope}"`
    : `Bearer realm="${realm}", error="insufficient_scope"`;
  return new FabricError("permission_denied", message, { headers: { "www-authenticate": challenge }, details: scope ? { required_scope: scope } : undefined });
}

function bearerOf(req: FastifyRequest, realm: string): string | undefined {
  const h = req.headers.authorization;
  if (h === undefined || h === "") return undefined;
  const m = /^Bearer[ ]+([A-Za-z0-9._~+/-]+=*)[ ]*$/i.exec(h);
  if (!m) throw unauthenticated("the Authorization header is not a Bearer token", realm);
  return m[1];
}

function accessFor(service: ServiceName): (method: string, url: string) => RouteAccess | "public" {
  const table = new Map(ROUTE_ACCESS[service].map((r) => [`${r.method} ${r.path}`, r]));
  return (method, url) => {
    const key = `${method === "HEAD" ? "GET" : method} ${contractPath(url)}`;
    if (PUBLIC_ROUTES.has(key)) return "public";
    const access = table.get(key);
    if (!access) throw new Error(`${service}: the route ${key} has no entry in ROUTE_ACCESS (core/src/http/auth-scopes.ts)`);
    return access;
  };
}

/**
 * Installs authentication on a service's instance. It runs before any route is added (createService calls it),
 * because fastify tells `onRoute` hooks only about routes added after them.
 */
export function installAuth(app: FastifyInstance, o: InboundAuthOptions & { service: ServiceName }): void {
  const audience = audienceOf(o.service);
  const realm = audience;
  const lookup = accessFor(o.service);
  if (o.mode !== "disabled" && !o.verifier) throw new Error(`${o.service}: authentication is ${o.mode} but no token verifier is configured`);

  app.decorateRequest("principal", undefined);
  if (o.mode === "disabled") return;
  // An executor knows where it is reached: the configured endpoints, the address it listens on, and the endpoint it
  // registers (bindExecutorEndpoint). A token bound to any other executor was stolen from it.
  const ownEndpoints = new Set((o.executorEndpoints ?? []).map(executorBinding));
  if (isExecutor(o.service)) {
    executorEndpoints.set(app, ownEndpoints);
    app.addHook("onListen", async () => {
      const addr = app.server.address();
      if (typeof addr !== "object" || addr === null) return;
      const host = addr.address === "0.0.0.0" || addr.address === "::" ? "127.0.0.1" : addr.address;
      ownEndpoints.add(executorBinding(`http://${host.includes(":") ? `[${host}]` : host}:${addr.port}`));
    });
  }
  // Every route states its scope in the one table; a route missing there stops the start instead of going unguarded.
  app.addHook("onRoute", (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const m = methods.find((x) => x !== "OPTIONS");
    if (m === undefined) return;
    // A route a plugin adds is not in the table: it states its own access (`config: { access: "public" | { scope } }`).
    const stated = (route.config as { access?: RouteAccess | "public" } | undefined)?.access;
    route.config = { ...(route.config as object), access: stated ?? lookup(m, route.url ?? route.path) };
  });

  const authenticate = async (token: string): Promise<Principal> => {
    if (o.assignments?.recognizes(token)) {
      const assignment = await o.assignments.verify(token);
      return { kind: "assignment", sub: `node-run:${assignment.node_run_id}`, scopes: new Set(), assignment };
    }
    const v = await o.verifier!.verify(token, audience);
    if (v.executor_endpoint !== undefined) {
      if (!isExecutor(o.service)) throw unauthenticated(`the token is bound to the executor at ${v.executor_endpoint} (${EXECUTOR_BINDING_CLAIM}), and this service is not an executor`, realm);
      if (!ownEndpoints.has(executorBinding(v.executor_endpoint))) {
        throw unauthenticated(`the token is bound to another executor (${EXECUTOR_BINDING_CLAIM} ${v.executor_endpoint}), not to this one`, realm);
      }
    }
    const p: Principal = { kind: "token", iss: v.iss, scopes: v.scopes };
    if (v.sub !== undefined) p.sub = v.sub;
    if (v.tenant_id !== undefined) p.tenant_id = v.tenant_id;
    return p;
  };

  // Routes added before this hook existed (fabricAuth registered as a plugin loads late) are looked up on their first
  // request instead; a route the table does not cover is refused, never let through.
  const late = new Map<string, RouteAccess | "public" | undefined>();
  const accessOf = (req: FastifyRequest): RouteAccess | "public" | undefined => {
    const annotated = req.routeOptions.config.access;
    const url = req.routeOptions.url;
    if (annotated !== undefined || url === undefined) return annotated;
    const key = `${req.method} ${url}`;
    if (!late.has(key)) {
      try {
        late.set(key, lookup(req.method, url));
      } catch {
        late.set(key, undefined);
      }
    }
    const found = late.get(key);
    if (found === undefined) throw forbidden(`${req.method} ${contractPath(url)} has no scope in this service's table, so nobody may call it`, realm);
    return found;
  };

  app.addHook("onRequest", async (req) => {
    const access = accessOf(req);
    // Unknown routes answer 404/405 as usual: the routes of the contract are no secret.
    if (access === undefined || access === "public") return;
    const token = bearerOf(req, realm);
    if (token === undefined) {
      if (o.mode === "optional") {
        req.principal = ANONYMOUS;
        return;
      }
      throw unauthenticated("no bearer token was sent (Authorization: Bearer <JWT>)", realm);
    }
    let principal = await authenticate(token);
    if (principal.kind === "assignment") {
      if (!access.assignment) throw forbidden(`an assignment token may not call ${access.method} ${access.path}`, realm);
      req.principal = principal;
      return;
    }
    const carried = req.headers[CALLER_HEADER];
    if (o.delegation && typeof carried === "string") {
      if (!principal.scopes.has("identity:delegate")) throw forbidden(`this token may not act for another caller (it lacks identity:delegate)`, realm, "identity:delegate");
      if (!grants(principal.scopes, access.scope)) throw lacksScope(access, realm);
      principal = decodeCaller(carried, principal.sub);
      if (principal.kind === "anonymous") {
        req.principal = principal;
        return;
      }
    }
    if (!grants(principal.scopes, access.scope)) throw lacksScope(access, realm);
    req.principal = principal;
  });
}

function lacksScope(access: RouteAccess, realm: string): FabricError {
  return forbidden(`the token lacks the scope ${access.scope}`, realm, access.scope);
}

/**
 * Checks a caller that another route of this service has already authenticated (a plugin's route, such as the MCP
 * server's, that then calls a Run API operation in process) against the access of the operation, with the same
 * answers the operation's own route would give: anonymous passes only where authentication is optional, an
 * assignment token only where `access.assignment` allows it, and a token needs the operation's scope.
 */
export function assertAccess(principal: Principal | undefined, access: RouteAccess, service: ServiceName, mode: AuthMode): void {
  if (mode === "disabled") return;
  const realm = audienceOf(service);
  if (principal === undefined) throw unauthenticated("no bearer token was sent (Authorization: Bearer <JWT>)", realm);
  if (principal.kind === "anonymous") {
    if (mode === "optional") return;
    throw unauthenticated("no bearer token was sent (Authorization: Bearer <JWT>)", realm);
  }
  if (principal.kind === "assignment") {
    if (!access.assignment) throw forbidden(`an assignment token may not call ${access.method} ${access.path}`, realm);
    return;
  }
  if (!grants(principal.scopes, access.scope)) throw lacksScope(access, realm);
}

/** The same as a fastify plugin, for an instance of one's own (register it before adding routes). */
export const fabricAuth = fp(async (app: FastifyInstance, o: InboundAuthOptions & { service: ServiceName }) => installAuth(app, o), { name: "nodefabric-auth", fastify: "5.x" });

/** What every service builder takes for security: how it checks callers, and its own tokens for calling others. */
export interface ServiceSecurityOptions {
  /** How callers are authenticated (default: disabled). */
  auth?: InboundAuthOptions;
  /** This service's tokens for the services it calls (none: calls carry no token). */
  tokens?: ServiceTokens;
  /** The limits of its HTTP edge (each left out has its default). */
  limits?: ServiceLimits;
}
