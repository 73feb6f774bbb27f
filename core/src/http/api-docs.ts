/**
 * Every service describes itself: its OpenAPI 3.1 document at GET /openapi.json and a docs page at GET /docs.
 *
 * @fastify/swagger collects the routes with the request schemas fastify validates them with. The table of
 * openapi-docs.ts adds summaries, tags and answers in swagger's `transform`, to the document only: no route gets a
 * response schema, so fastify serializes exactly as it did. The v1 schemas a document names are copied into
 * `components/schemas` (by title: Run, NodeRun, ErrorEnvelope, …), and every `$ref` points there.
 *
 * The docs page (@fastify/swagger-ui and the static file server under it) is loaded at its first request, not when
 * the service starts: most services never serve it. It then runs on a fastify instance of its own, which the
 * service's docs routes hand each request to (`docsPage`).
 */
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type RouteOptions } from "fastify";
import fp from "fastify-plugin";
import fastifySwagger from "@fastify/swagger";
import { SCHEMA_BASE, schemas, type SchemaName } from "@nodefabric/schemas";
import { ROUTE_DOCS, TAGS, type AnswerDoc } from "./openapi-docs.js";
import { PUBLIC_ROUTES, ROUTE_ACCESS, contractPath, type RouteAccess } from "./auth-scopes.js";
import type { ServiceName } from "../service-names.js";
import { SERVICE_VERSION } from "../version.js";

export const OPENAPI_PATH = "/openapi.json";
/** The docs page; every path under it belongs to the page (its assets, and the document again at /docs/json). */
export const DOCS_PATH = "/docs";

/**
 * The docs page runs only scripts and styles served by this service: no inline script, no other origin (the fabric
 * works offline), and no inline style either: the page renders without one (Swagger UI's bundle tries a single inline
 * style at load, which the policy blocks with no visible effect).
 */
export const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** The page's top bar says whose API it is (instead of the default logo). */
const LOGO = {
  type: "image/svg+xml",
  content: Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="150" height="40"><text x="0" y="28" font-family="sans-serif" font-size="24" font-weight="bold" fill="#ffffff">NodeFabric</text></svg>'),
};

/** Whether a route is the document or the docs page: public, and not in the document. */
export function isDocsRoute(url: string): boolean {
  return url === OPENAPI_PATH || url === DOCS_PATH || url.startsWith(`${DOCS_PATH}/`);
}

type Json = Record<string, unknown>;
const COMPONENTS = "#/components/schemas/";

/** The component name of each v1 schema file (`run.schema.json` → `Run`): its title, unless two share one. */
const componentOfFile = (() => {
  const names = Object.keys(schemas) as SchemaName[];
  const titles = names.map((n) => (schemas[n] as { title?: string }).title ?? n);
  const taken = new Map<string, number>();
  for (const t of titles) taken.set(t, (taken.get(t) ?? 0) + 1);
  return new Map(names.map((n, i) => [`${n}.schema.json`, taken.get(titles[i]!) === 1 ? titles[i]! : n]));
})();

/** The component name of a v1 schema. */
export function componentName(name: SchemaName): string {
  return componentOfFile.get(`${name}.schema.json`)!;
}

/** A `$ref` to a v1 schema (by `$id`, or relative to one) as a `$ref` into components; anything else unchanged. */
function componentRef(ref: string, relative: boolean): string {
  const hash = ref.indexOf("#");
  const uri = hash < 0 ? ref : ref.slice(0, hash);
  const fragment = hash < 0 ? "" : ref.slice(hash + 1);
  const file = uri.startsWith(SCHEMA_BASE) ? uri.slice(SCHEMA_BASE.length) : relative && !uri.includes(":") ? uri : undefined;
  const name = file === undefined ? undefined : componentOfFile.get(file);
  if (name === undefined) return ref;
  return `${COMPONENTS}${name}${fragment.startsWith("/") ? fragment : ""}`;
}

/** A copy of a schema whose `$ref`s to v1 schemas point into components. */
function withComponentRefs(schema: unknown, relative = false): unknown {
  if (Array.isArray(schema)) return schema.map((s) => withComponentRefs(s, relative));
  if (typeof schema !== "object" || schema === null) return schema;
  const out: Json = {};
  for (const [k, v] of Object.entries(schema)) out[k] = k === "$ref" && typeof v === "string" ? componentRef(v, relative) : withComponentRefs(v, relative);
  return out;
}

/** A v1 schema as a component: `$ref`s into components, and no `$id` (it would move the base of those `$ref`s). */
function component(name: SchemaName): Json {
  const { $id: _id, $schema: _dialect, ...rest } = schemas[name] as Json;
  return withComponentRefs(rest, true) as Json;
}

const fileOfComponent = new Map([...componentOfFile].map(([file, name]) => [name, file.slice(0, -".schema.json".length) as SchemaName]));

/**
 * A query string, params or headers schema given as a `$ref` to a v1 schema, inlined: the document lists its
 * properties one by one as parameters.
 */
function inlined(schema: unknown): unknown {
  const s = schema as Json;
  if (typeof s?.$ref !== "string" || !s.$ref.startsWith(COMPONENTS) || Object.keys(s).length !== 1) return schema;
  const name = fileOfComponent.get(s.$ref.slice(COMPONENTS.length));
  return name === undefined ? schema : component(name);
}

const mediaOf = (schema: unknown, ndjson?: true) => ({ [ndjson ? "application/x-ndjson" : "application/json"]: { schema } });
const refTo = (name: SchemaName) => ({ $ref: `${COMPONENTS}${componentName(name)}` });

/** Every 4xx and 5xx is an ErrorEnvelope. */
const ERROR_ANSWERS: Json = {
  "4XX": { description: "Refused: an ErrorEnvelope whose `error.code` says why.", content: mediaOf(refTo("error_envelope")) },
  "5XX": { description: "Failed: an ErrorEnvelope (`unavailable` with Retry-After when overloaded or shutting down).", content: mediaOf(refTo("error_envelope")) },
};

/** An answer of the table as swagger's `response` entry (`type: "null"`: no body). */
function answerOf(a: AnswerDoc): Json {
  const out: Json = { description: a.description };
  if (a.headers) out.headers = Object.fromEntries(Object.entries(a.headers).map(([h, d]) => [h, { type: "string", description: d }]));
  if (a.schema === undefined) return { ...out, type: "null" };
  const schema = typeof a.schema === "string" ? refTo(a.schema) : withComponentRefs(a.schema);
  return { ...out, content: mediaOf(schema, a.ndjson) };
}

/** The first method of a route other than HEAD (swagger leaves HEAD routes out). */
const methodOf = (route: RouteOptions) => (Array.isArray(route.method) ? route.method : [route.method]).find((m) => m !== "HEAD") ?? "GET";

export interface ApiDocsOptions {
  service: ServiceName;
  /** With authentication, the document names the bearer scheme and each operation's scope. */
  auth: "required" | "optional" | "disabled";
}

/**
 * Installs the document and the docs page on a service's instance. Call it before any route is added (createService
 * does, before authentication, so the docs routes are marked public before auth looks them up).
 */
export function installApiDocs(app: FastifyInstance, o: ApiDocsOptions): void {
  const withAuth = o.auth !== "disabled";
  const access = new Map(ROUTE_ACCESS[o.service].map((r) => [`${r.method} ${r.path}`, r]));

  app.addHook("onRoute", (route) => {
    if (isDocsRoute(route.url ?? route.path)) route.config = { ...(route.config as object), access: "public" };
  });

  const securityOf = (route: RouteOptions, key: string): unknown[] => {
    const stated = (route.config as { access?: RouteAccess | "public" } | undefined)?.access;
    const a = stated ?? (PUBLIC_ROUTES.has(key) ? "public" : access.get(key));
    if (a === undefined || a === "public") return [];
    return o.auth === "optional" ? [{ bearer: [a.scope] }, {}] : [{ bearer: [a.scope] }];
  };

  const transform = ({ schema, url, route }: { schema: unknown; url: string; route: RouteOptions }) => {
    const given = (schema ?? {}) as Json;
    if (given.hide === true) return { schema: given, url };
    const key = `${methodOf(route)} ${contractPath(url)}`;
    const out: Json = {};
    for (const [k, v] of Object.entries(given)) {
      if (k === "body") out.body = withComponentRefs(v);
      else if (k === "querystring" || k === "params" || k === "headers") out[k] = inlined(withComponentRefs(v));
      else if (k === "response") out.response = withComponentRefs(v);
      else out[k] = v;
    }
    const doc = ROUTE_DOCS[key];
    if (doc) {
      Object.assign(out, { operationId: doc.operationId, summary: doc.summary, tags: [...doc.tags] }, doc.description ? { description: doc.description } : {});
      out.response = Object.fromEntries(Object.entries(doc.answers).map(([status, a]) => [status, answerOf(a)]));
    } else if (out.response === undefined) {
      // A plugin's route that says nothing of its answers.
      out.response = { "2XX": { description: "Success.", content: mediaOf({}) } };
    }
    out.response = { ...ERROR_ANSWERS, ...(out.response as Json) };
    if (withAuth) out.security = securityOf(route, key);
    // Swagger marks every request body required; a route whose body may be left out says so in its config.
    if (route.config?.bodyOptional) optionalBodies.add(`${methodOf(route).toLowerCase()} ${contractPath(url)}`);
    return { schema: out, url };
  };
  const optionalBodies = new Set<string>();

  /** Copies into components the v1 schemas the document names, and those they name in turn. */
  const transformObject = ({ openapiObject }: { openapiObject: Json }) => {
    const doc = openapiObject as Json & { components?: { schemas?: Json }; tags?: unknown };
    const found = (doc.components ??= {}).schemas ?? {};
    const pending: string[] = [];
    const visit = (v: unknown) => {
      if (Array.isArray(v)) v.forEach(visit);
      else if (typeof v === "object" && v !== null) {
        for (const [k, x] of Object.entries(v)) {
          if (k === "$ref" && typeof x === "string" && x.startsWith(COMPONENTS)) pending.push(x.slice(COMPONENTS.length).split("/")[0]!);
          else visit(x);
        }
      }
    };
    for (const [url, ops] of Object.entries((doc.paths ?? {}) as Record<string, Record<string, { requestBody?: { required?: boolean } }>>)) {
      for (const [method, op] of Object.entries(ops)) if (op.requestBody && optionalBodies.has(`${method} ${url}`)) op.requestBody.required = false;
    }
    visit(doc.paths);
    while (pending.length > 0) {
      const name = pending.pop()!;
      const file = fileOfComponent.get(name);
      if (name in found || file === undefined) continue;
      found[name] = component(file);
      visit(found[name]);
    }
    doc.components.schemas = Object.fromEntries(Object.entries(found).sort(([a], [b]) => a.localeCompare(b)));
    const used = new Set(Object.values((doc.paths ?? {}) as Record<string, Record<string, { tags?: string[] }>>).flatMap((p) => Object.values(p).flatMap((op) => op.tags ?? [])));
    doc.tags = TAGS.filter((t) => used.has(t.name));
    return doc;
  };

  const title = `NodeFabric ${o.service}`;
  const description = withAuth
    ? `The HTTP API of the NodeFabric ${o.service} service. Every operation but health and version needs a bearer JWT for the audience \`nodefabric-${o.service}\` holding the scope it names${o.auth === "optional" ? " (or none at all: anonymous)" : ""}. Every non-2xx answer is an ErrorEnvelope.`
    : `The HTTP API of the NodeFabric ${o.service} service, running without authentication. Every non-2xx answer is an ErrorEnvelope.`;

  // Called, not registered: a registered plugin loads only at ready(), and its onRoute hook would miss every route
  // added before then, which is all of them.
  fastifySwagger(
    app,
    {
      openapi: {
        openapi: "3.1.0",
        info: { title, version: SERVICE_VERSION, description },
        ...(withAuth ? { components: { securitySchemes: { bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" } } } } : {}),
      },
      convertConstToEnum: false,
      transform,
      transformObject,
    } as never,
    (err?: Error) => {
      if (err) throw err;
    },
  );

  // Registered, so it loads at ready(): after every hook of createService is in place (405 detection included).
  void app.register(async (docs) => {
    docs.get(OPENAPI_PATH, { schema: { hide: true } }, async () => app.swagger());
    // The paths @fastify/swagger-ui serves under DOCS_PATH, so a wrong method or path answers as it did with the
    // plugin registered here (405, 404); each request is answered by the page's own instance.
    const page = docsPage(app, { routePrefix: DOCS_PATH, staticCSP: DOCS_CSP, theme: { title: `${title} API` }, logo: LOGO, uiConfig: { deepLinking: true } });
    for (const url of [DOCS_PATH, `${DOCS_PATH}/json`, `${DOCS_PATH}/yaml`, `${DOCS_PATH}/static/*`]) docs.get(url, { schema: { hide: true } }, page.answer);
    docs.addHook("onClose", page.close);
  });
}

/** Headers of the page's answers that belong to its own connection, not to the answer. */
const HOP_HEADERS = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "date"]);

/**
 * Answers the docs routes with @fastify/swagger-ui, loaded and started on an instance of its own at the first
 * request. The page reads this service's document (`app.swagger()`). A path the page does not have is this service's
 * 404, and any other error its ErrorEnvelope, as when the plugin was registered on the service itself.
 */
function docsPage(app: FastifyInstance, options: Record<string, unknown>): { answer: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>; close: () => Promise<void> } {
  let page: Promise<FastifyInstance> | undefined;
  const start = async (): Promise<FastifyInstance> => {
    const { default: fastifySwaggerUi } = await import("@fastify/swagger-ui");
    const ui = Fastify({ routerOptions: { ignoreTrailingSlash: true } });
    // swagger-ui reads the document through the `swagger()` of a plugin named @fastify/swagger: the service's own.
    await ui.register(fp(async (i: FastifyInstance) => void i.decorate("swagger", ((o?: { yaml?: boolean }) => app.swagger(o as never)) as never), { name: "@fastify/swagger" }));
    await ui.register(fastifySwaggerUi as never, options);
    await ui.ready();
    return ui;
  };
  const close = async () => {
    const started = page;
    page = undefined;
    await (await started?.catch(() => undefined))?.close();
  };
  const answer = async (req: FastifyRequest, reply: FastifyReply) => {
    page ??= start().catch((err: unknown) => {
      page = undefined;
      throw err;
    });
    const ui = await page;
    const res = await ui.inject({ method: "GET", url: req.url, headers: req.headers as Record<string, string> });
    if (res.statusCode === 404) return reply.callNotFound();
    if (res.statusCode >= 400) {
      let message = `the docs page could not be served (${res.statusCode})`;
      try {
        message = (JSON.parse(res.body) as { message?: string }).message ?? message;
      } catch {
        // not JSON: the status says enough
      }
      throw Object.assign(new Error(message), { statusCode: res.statusCode });
    }
    for (const [name, value] of Object.entries(res.headers)) if (!HOP_HEADERS.has(name) && value !== undefined) reply.header(name, value);
    return reply.code(res.statusCode).send(res.rawPayload);
  };
  return { answer, close };
}
