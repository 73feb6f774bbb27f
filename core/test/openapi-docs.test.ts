import { describe, it, expect, beforeAll, afterAll, vi } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, RouteOptions } from "fastify";
import { request } from "undici";
import { Validator } from "@seriousme/openapi-schema-validator";
import { SCHEMA_BASE, schemaId, schemas, type SchemaName } from "@nodefabric/schemas";
import { SERVICE_NAMES, type ServiceName } from "../src/http/service.js";
import { contractPath } from "../src/http/auth-scopes.js";
import { DOCS_CSP, isDocsRoute } from "../src/http/api-docs.js";
import { ROUTE_DOCS } from "../src/http/openapi-docs.js";
import { loadConfig } from "../src/config.js";
import { startFabric, type RunningFabric } from "../src/fabric.js";
import { definePlugin } from "../src/plugin.js";
import { buildPdp } from "../src/services/pdp/index.js";
import { TokenVerifier } from "../src/http/token-verifier.js";
import { startTestIssuer, type TestIssuer } from "./support/test-issuer.js";

// Each service's OpenAPI document is checked against the routes the service really has. Those are seen here, not
// through the documentation code: every fastify instance gets a route collector the moment it is created, before
// createService adds anything.
const routesOf = vi.hoisted(() => new Map<object, RouteOptions[]>());
vi.mock("fastify", async (importOriginal) => {
  const actual = await importOriginal<typeof import("fastify")>();
  const create = ((opts: never) => {
    const app = actual.default(opts);
    const seen: RouteOptions[] = [];
    routesOf.set(app, seen);
    app.addHook("onRoute", (r) => void seen.push(r));
    return app;
  }) as unknown as typeof actual.default;
  return { ...actual, default: create, fastify: create };
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const repo = fileURLToPath(new URL("../..", import.meta.url));
const COMPONENTS = "#/components/schemas/";

/** v1 schema names by title: the document names components by title. */
const nameOfTitle = new Map((Object.keys(schemas) as SchemaName[]).map((n) => [(schemas[n] as Json).title as string, n]));

/** A copy whose `$ref`s are rewritten by `to` (undefined: unchanged). */
function mapRefs(v: unknown, to: (ref: string) => string | undefined): unknown {
  if (Array.isArray(v)) return v.map((x) => mapRefs(x, to));
  if (typeof v !== "object" || v === null) return v;
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, k === "$ref" && typeof x === "string" ? (to(x) ?? x) : mapRefs(x, to)]));
}

/** A schema of the document as fastify validates it: component `$ref`s back to the v1 `$id`s. */
const fromDoc = (s: unknown) =>
  mapRefs(s, (r) => {
    if (!r.startsWith(COMPONENTS)) return undefined;
    const [title, ...rest] = r.slice(COMPONENTS.length).split("/");
    const name = nameOfTitle.get(title!);
    return name && schemaId(name) + (rest.length ? `#/${rest.join("/")}` : "");
  });

/** A v1 schema with its relative `$ref`s made absolute, without `$id` and `$schema`. */
function v1(name: SchemaName): Json {
  const { $id: _id, $schema: _s, ...rest } = schemas[name] as Json;
  return mapRefs(rest, (r) => (r.includes(":") ? undefined : SCHEMA_BASE + r)) as Json;
}

/** A route's schema for one part as the validator sees it: a lone `$ref` to a v1 schema resolved, no `$schema`. */
function routePart(schema: unknown): Json | undefined {
  if (schema === undefined) return undefined;
  const s = schema as Json;
  if (typeof s.$ref === "string" && Object.keys(s).length === 1 && s.$ref.startsWith(SCHEMA_BASE)) return v1(s.$ref.slice(SCHEMA_BASE.length, -".schema.json".length) as SchemaName);
  const { $schema: _s, ...rest } = s;
  return rest;
}

function allRefs(v: unknown, out: string[] = []): string[] {
  if (Array.isArray(v)) v.forEach((x) => allRefs(x, out));
  else if (typeof v === "object" && v !== null) for (const [k, x] of Object.entries(v)) k === "$ref" && typeof x === "string" ? out.push(x) : allRefs(x, out);
  return out;
}

const HTTP = ["get", "put", "post", "delete", "patch", "head", "options", "trace"];

/** The routes of an instance a document must list: all but HEAD and the docs' own. */
function documentedRoutes(app: FastifyInstance): Map<string, RouteOptions> {
  const out = new Map<string, RouteOptions>();
  for (const r of routesOf.get(app) ?? []) {
    if (isDocsRoute(r.url ?? "")) continue;
    for (const m of Array.isArray(r.method) ? r.method : [r.method]) if (m !== "HEAD") out.set(`${m} ${contractPath(r.url!)}`, r);
  }
  return out;
}

async function get(base: string, p: string, headers: Record<string, string> = {}) {
  const res = await request(base + p, { headers });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text };
}

/** Checks one service's document against its routes; `core` says the routes must all be in ROUTE_DOCS. */
async function checkDocument(base: string, app: FastifyInstance, core: (key: string) => boolean): Promise<{ doc: Json; keys: string[] }> {
  const res = await get(base, "/openapi.json");
  expect(res.status).toBe(200);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  const doc = JSON.parse(res.text) as Json;

  const verdict = await new Validator().validate(doc);
  expect(verdict.errors ?? [], `${base}: not a valid OpenAPI document`).toEqual([]);
  expect(verdict.valid).toBe(true);
  expect(doc.openapi).toBe("3.1.0");

  // No dangling $ref: every one points at a component the document holds, and each component is the v1 schema.
  for (const ref of allRefs(doc)) {
    expect(ref.startsWith(COMPONENTS), ref).toBe(true);
    expect(doc.components.schemas, ref).toHaveProperty([ref.slice(COMPONENTS.length).split("/")[0]!]);
  }
  for (const [title, schema] of Object.entries(doc.components?.schemas ?? {})) {
    const name = nameOfTitle.get(title);
    expect(name, `component ${title} is not a v1 schema`).toBeDefined();
    expect(fromDoc(schema), `component ${title}`).toEqual(v1(name!));
  }

  // The same routes, each method once, and nothing else.
  const routes = documentedRoutes(app);
  const listed: string[] = [];
  for (const [p, item] of Object.entries(doc.paths as Record<string, Json>)) for (const m of Object.keys(item)) if (HTTP.includes(m)) listed.push(`${m.toUpperCase()} ${p}`);
  expect(listed.sort()).toEqual([...routes.keys()].sort());

  for (const [key, route] of routes) {
    const [method, p] = key.split(" ") as [string, string];
    const op = doc.paths[p][method.toLowerCase()] as Json;
    const schema = (route.schema ?? {}) as Json;

    // The request body, as validated.
    if (schema.body === undefined) expect(op.requestBody, key).toBeUndefined();
    else {
      const { $schema: _s, ...body } = schema.body as Json;
      expect(fromDoc(op.requestBody.content["application/json"].schema), key).toEqual(body);
      // Required unless the route takes none as well (an approval's decision may come without a reason).
      expect(op.requestBody.required, key).toBe(!(route.config as { bodyOptional?: boolean } | undefined)?.bodyOptional);
    }

    // Query string and path parameters: one each per property, with its schema and whether it is required.
    const params = (op.parameters ?? []) as Json[];
    for (const [part, where] of [["querystring", "query"], ["params", "path"]] as const) {
      const given = routePart(schema[part]);
      const docParams = params.filter((x) => x.in === where);
      if (given === undefined) {
        const names = [...p.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
        expect(docParams.map((x) => x.name), key).toEqual(where === "path" ? names : []);
        for (const x of docParams) expect(x.schema, key).toEqual({ type: "string" });
        continue;
      }
      expect(docParams.map((x) => x.name).sort(), `${key} ${where}`).toEqual(Object.keys(given.properties).sort());
      for (const x of docParams) {
        const asValidated = fromDoc({ ...x.schema, ...(x.description ? { description: x.description } : {}) });
        expect(asValidated, `${key} ${where} ${x.name}`).toEqual(given.properties[x.name]);
        expect(x.required, `${key} ${where} ${x.name} required`).toBe(where === "path" || (given.required ?? []).includes(x.name));
      }
    }
    expect(params.filter((x) => x.in !== "query" && x.in !== "path"), key).toEqual([]);

    // Every error is an ErrorEnvelope; core routes carry the table's words.
    for (const range of ["4XX", "5XX"]) expect(op.responses[range].content["application/json"].schema, key).toEqual({ $ref: `${COMPONENTS}ErrorEnvelope` });
    if (core(key)) {
      const entry = ROUTE_DOCS[key];
      expect(entry, `${key} has no entry in ROUTE_DOCS (core/src/http/openapi-docs.ts)`).toBeDefined();
      expect(op.summary).toBe(entry!.summary);
      expect(op.operationId).toBe(entry!.operationId);
      expect(Object.keys(op.responses).sort()).toEqual([...Object.keys(entry!.answers), "4XX", "5XX"].sort());
    }
  }
  return { doc, keys: [...routes.keys()] };
}

const PLUGIN_QUERY = { type: "object", properties: { colour: { type: "string", enum: ["red", "blue"] }, n: { type: "integer", minimum: 1 } }, required: ["colour"], additionalProperties: false };

/** A plugin's routes on the gateway, added after core's: they belong in the document too. */
const docsTestPlugin = definePlugin({
  name: "docs-test",
  services: [
    {
      service: "run-gateway",
      plugin: async (app: FastifyInstance) => {
        app.get("/extra/items", { config: { access: "public" }, schema: { querystring: PLUGIN_QUERY } }, async () => []);
        app.post("/extra/items", { config: { access: "public" }, schema: { body: { $ref: schemaId("node_type_ref") }, summary: "Add an item" } }, async () => ({ ok: true }));
      },
    },
  ],
});

describe("every service serves its OpenAPI 3.1 document and a docs page, true to its routes", () => {
  let fabric: RunningFabric;
  const service = (name: ServiceName) => fabric.services.find((x) => x.name === name)!;
  const docOf = async (name: ServiceName) => JSON.parse((await get(service(name).url, "/openapi.json")).text) as Json;

  beforeAll(async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-openapi-docs-"));
    const config = loadConfig({ cwd: repo, env: {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"] } as never });
    fabric = await startFabric(config, SERVICE_NAMES, { plugins: [{ definition: docsTestPlugin, source: "docs-test", file: "docs-test", discovered: false }] });
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  for (const name of SERVICE_NAMES) {
    it(`${name}: GET /openapi.json is a valid OpenAPI 3.1 document listing exactly its routes, with the schemas they validate with`, async () => {
      const s = service(name);
      const { doc, keys } = await checkDocument(s.url, s.app, (key) => !key.includes("/extra/"));
      expect(doc.info).toMatchObject({ title: `NodeFabric ${name}` });
      expect(doc.info.version).toMatch(/^\d+\.\d+\.\d+/);
      // Without authentication, nothing speaks of tokens.
      expect(doc.components?.securitySchemes).toBeUndefined();
      expect(keys).toContain("GET /v1/health");
    });
  }

  it("ROUTE_DOCS holds no entry for a route no service has", () => {
    const covered = new Set(fabric.services.flatMap((s) => [...documentedRoutes(s.app).keys()]));
    expect(covered.size).toBeGreaterThan(30);
    expect(Object.keys(ROUTE_DOCS).filter((k) => !covered.has(k))).toEqual([]);
  });

  it("a plugin's routes are in the gateway's document, with their own schemas", async () => {
    const gw = await docOf("run-gateway");
    expect(gw.paths["/extra/items"].get.parameters.map((p: Json) => [p.name, p.required])).toEqual([["colour", true], ["n", false]]);
    expect(gw.paths["/extra/items"].post).toMatchObject({ summary: "Add an item", requestBody: { content: { "application/json": { schema: { $ref: `${COMPONENTS}NodeTypeRef` } } } } });
    expect((await docOf("run-coordinator")).paths["/extra/items"]).toBeUndefined();
  });

  it("shares the v1 schemas as components: the gateway's answers name Run, NodeRun and ErrorEnvelope", async () => {
    const gw = await docOf("run-gateway");
    expect(gw.paths["/v1/runs"].post.responses["200"].content["application/json"].schema).toEqual({ $ref: `${COMPONENTS}Run` });
    expect(gw.paths["/v1/runs/{run_id}/events"].get.responses["200"].content["application/x-ndjson"].schema).toEqual({ $ref: `${COMPONENTS}RunEvent` });
    expect(gw.paths["/v1/node-runs/{node_run_id}"].get.responses["200"].content["application/json"].schema).toEqual({ $ref: `${COMPONENTS}NodeRun` });
    expect(gw.paths["/v1/runs/{run_id}:cancel"].post.responses["404"].description).toMatch(/run_not_found/);
    expect(Object.keys(gw.components.schemas)).toEqual(expect.arrayContaining(["Run", "NodeRun", "RunEvent", "ErrorEnvelope", "Error", "NodeTypeRef"]));
    const registry = await docOf("node-registry");
    expect(registry.paths["/v1/node-types/{node_type_id}"].get.responses["200"].content["application/json"].schema).toEqual({ $ref: `${COMPONENTS}NodeType` });
  });

  it("GET /docs answers a page that needs nothing but this service, under a strict Content-Security-Policy", async () => {
    const base = fabric.urls["node-registry"]!;
    const page = await get(base, "/docs");
    expect(page.status).toBe(200);
    expect(page.headers["content-type"]).toMatch(/^text\/html/);
    expect(page.headers["content-security-policy"]).toBe(DOCS_CSP);
    expect(page.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/); // no inline script
    const assets = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThanOrEqual(4);
    for (const a of assets) {
      expect(a, "an asset from elsewhere").toMatch(/^\/docs\//);
      const res = await get(base, a);
      expect(res.status, a).toBe(200);
      // The UI loads the document from the page's own service, and asks no validator elsewhere.
      if (a.endsWith("swagger-initializer.js")) expect(res.text).toMatch(/validatorUrl: null/);
    }
    expect(JSON.parse((await get(base, "/docs/json")).text)).toEqual(JSON.parse((await get(base, "/openapi.json")).text));
  });

  it("serves the rest of the page's paths as the docs plugin does, and answers what it has not with an ErrorEnvelope", async () => {
    const base = fabric.urls.pdp!;
    const head = await request(`${base}/docs`, { method: "HEAD" });
    await head.body.text();
    expect(head.statusCode).toBe(200);
    expect(head.headers["content-type"]).toMatch(/^text\/html/);
    const yaml = await get(base, "/docs/yaml");
    expect(yaml.status).toBe(200);
    expect(yaml.headers["content-type"]).toMatch(/yaml/);
    expect(yaml.text).toMatch(/^openapi: 3\.1\.0/m);
    // A file the page does not have: this service's own 404.
    const missing = await get(base, "/docs/static/no-such-file.js");
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.text)).toMatchObject({ error: { code: "route_not_found" } });
    // A conditional request for an asset it served: 304, as a browser's cache expects.
    const asset = await get(base, "/docs/static/swagger-ui.css");
    expect(asset.status).toBe(200);
    const again = await request(`${base}/docs/static/swagger-ui.css`, { headers: { "if-none-match": String(asset.headers.etag) } });
    await again.body.text();
    expect(again.statusCode).toBe(304);
    for (const p of ["/docs", "/docs/static/swagger-ui.css"]) {
      const res = await request(`${base}${p}`, { method: "POST" });
      expect(res.statusCode, p).toBe(405);
      expect(await res.body.json()).toMatchObject({ error: { code: "method_not_allowed" } });
    }
  });

  it("keeps the docs routes out of the document, and answers 405 for another method on them", async () => {
    for (const name of SERVICE_NAMES) expect(Object.keys((await docOf(name)).paths).filter((p) => isDocsRoute(p))).toEqual([]);
    const res = await request(`${fabric.urls.pdp}/openapi.json`, { method: "POST" });
    expect(res.statusCode).toBe(405);
    expect(await res.body.json()).toMatchObject({ error: { code: "method_not_allowed" } });
  });
});

describe("with authentication required", () => {
  let idp: TestIssuer;
  let app: FastifyInstance;
  let base: string;

  beforeAll(async () => {
    idp = await startTestIssuer();
    app = await buildPdp({ logger: false, auth: { mode: "required", verifier: new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer }) } });
    await app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await app?.close();
    await idp?.close();
  });

  it("serves the document and the docs page without a token, while a /v1 route still answers 401", async () => {
    const decide = await request(`${base}/v1/policy:decide`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ action: "run.start" }) });
    expect(decide.statusCode).toBe(401);
    expect(await decide.body.json()).toMatchObject({ error: { code: "unauthenticated" } });

    const { doc } = await checkDocument(base, app, () => true);
    for (const p of ["/docs", "/docs/static/swagger-ui-bundle.js", "/docs/static/swagger-initializer.js", "/docs/json"]) expect((await get(base, p)).status, p).toBe(200);

    // The document says how to call: a bearer JWT with the scope of each operation, none for health.
    expect(doc.components.securitySchemes).toEqual({ bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" } });
    expect(doc.paths["/v1/policy:decide"].post.security).toEqual([{ bearer: ["policy:decide"] }]);
    expect(doc.paths["/v1/health"].get.security).toEqual([]);
  });

  it("with authentication optional, says an operation may also be called without a token", async () => {
    const optional = await buildPdp({ logger: false, auth: { mode: "optional", verifier: new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer }) } });
    try {
      const res = await optional.inject({ url: "/openapi.json" });
      expect(res.statusCode).toBe(200);
      expect(res.json().paths["/v1/policy:decide"].post.security).toEqual([{ bearer: ["policy:decide"] }, {}]);
    } finally {
      await optional.close();
    }
  });
});
