/**
 * The gateway's POST /v1/runs as a function (RUN_GATEWAY_API, given to the gateway's plugins as
 * `options.fabric.runs`), which the MCP server calls for every tool call instead of a second pass through HTTP: for
 * the same request and the same caller it answers what the route answers, status, document or ErrorEnvelope, and the
 * headers a client relies on. Checked with authentication on and the coordinator in process, and on a gateway that
 * forwards to a coordinator elsewhere.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { loadConfig } from "../src/config.js";
import { startFabric, type RunningFabric } from "../src/fabric.js";
import { definePlugin, type PluginServiceContext } from "../src/plugin.js";
import type { LoadedPlugin } from "../src/plugin-loader.js";
import { buildRunGateway } from "../src/services/run-gateway/index.js";
import { RUN_GATEWAY_API, type GatewayAnswer, type RunGatewayApi } from "../src/services/run-gateway/gateway-api.js";
import { inProcessApi } from "../src/in-process.js";
import { startTestIssuer, type TestIssuer } from "./support/test-issuer.js";
import { call, expectValid, until, type Answer } from "./support/gateway-http.js";

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const echoRef = { node_type_id: "demo.echo", version: "1.0.0" };

/** Nests `{}` so that the whole body is `depth` levels deep (the body itself is level 1, `input` level 2). */
function nested(depth: number): Record<string, unknown> {
  let v: Record<string, unknown> = {};
  for (let i = 2; i < depth; i++) v = { d: v };
  return v;
}

/** What a request body becomes: the input nested, or holding a prototype key, built where it is used. */
interface Shape {
  request: Record<string, unknown>;
  /** Replace the input by one nested this deep in all. */
  deep?: number;
  /** Replace the input by `{"__proto__": {...}}`, as JSON.parse makes it. */
  proto?: boolean;
  wait?: number;
}

function bodyOf(s: Shape): Record<string, unknown> {
  if (s.deep !== undefined) return { ...s.request, input: nested(s.deep) };
  if (s.proto) return { ...s.request, input: JSON.parse('{"__proto__": {"polluted": true}}') };
  return s.request;
}

/** The same body as JSON text, for the route. */
function textOf(s: Shape): string {
  if (s.proto) return JSON.stringify({ ...s.request, input: {} }).replace('"input":{}', '"input":{"__proto__":{"polluted":true}}');
  return JSON.stringify(bodyOf(s));
}

/** A plugin on the gateway whose route hands its caller and body to options.fabric.runs, as the MCP server does. */
const viaApi = definePlugin({
  name: "via-api",
  services: [
    {
      service: "run-gateway",
      plugin: async (app: FastifyInstance, opts: { fabric: PluginServiceContext }) => {
        app.post("/via-api", { config: { access: { method: "POST", path: "/via-api", scope: "runs:read" } } }, async (req: FastifyRequest) => {
          const s = req.body as Shape;
          const headers: Record<string, string> = {};
          if (typeof req.headers.authorization === "string") headers.authorization = req.headers.authorization;
          return opts.fabric.runs!.startRun(bodyOf(s) as never, { principal: req.principal, headers }, s.wait);
        });
      },
    },
  ],
});
const loaded: LoadedPlugin = { definition: viaApi, source: "via-api", file: "via-api.js", discovered: false };

/**
 * The route's answer and the function's agree on everything a client sees; for a run not held to its end, all but its
 * state, which depends on how far it got.
 */
function expectSame(api: GatewayAnswer<unknown>, route: Answer, held = true): void {
  expect(api.status, route.text).toBe(route.status);
  if (route.status >= 300) {
    expectValid("error_envelope", api.body);
    expect(api.body).toEqual(route.body);
    expect(api.headers["www-authenticate"]).toEqual(route.headers["www-authenticate"]);
    expect(api.headers["retry-after"]).toEqual(route.headers["retry-after"]);
    return;
  }
  expectValid("run", api.body);
  expect(api.headers["preference-applied"]).toEqual(route.headers["preference-applied"]);
  if (!held) return;
  const a = api.body as { state: string; extensions?: Record<string, unknown> };
  expect(a.state).toBe("completed");
  expect(a.state).toBe(route.body.state);
  expect(a.extensions?.["nodefabric.outputs"]).toEqual(route.body.extensions?.["nodefabric.outputs"]);
}

/** Each case, sent to the route over HTTP and to the function; the answers compared. */
const CASES: Array<[string, (n: number) => Shape]> = [
  ["a run held to its end", (n) => ({ request: { root_node_type_ref: echoRef, input: { n } }, wait: 10 })],
  ["a run not held", (n) => ({ request: { root_node_type_ref: echoRef, input: { n } } })],
  ["a body that breaks the schema", () => ({ request: { root_node_type_ref: { node_type_id: "demo.echo" }, input: {}, surplus: 1 } })],
  ["a body nested deeper than limits.max_json_depth", () => ({ request: { root_node_type_ref: echoRef }, deep: 129 })],
  ["a body nested exactly as deep as allowed", () => ({ request: { root_node_type_ref: echoRef }, deep: 128, wait: 10 })],
  ["a prototype key in the input", () => ({ request: { root_node_type_ref: echoRef }, proto: true })],
  ["a node type the registry lacks", () => ({ request: { root_node_type_ref: { node_type_id: "demo.nothing", version: "1.0.0" }, input: {} } })],
];

describe("the gateway's POST /v1/runs as a function, with authentication on", () => {
  let idp: TestIssuer;
  let fabric: RunningFabric;
  let gw: string;
  const tokens: Record<string, string> = {};
  const bearer = (who: string) => ({ authorization: `Bearer ${tokens[who]}` });

  beforeAll(async () => {
    idp = await startTestIssuer();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-gateway-api-"));
    const keyFile = path.join(dataDir, "signing-key.json");
    fs.writeFileSync(keyFile, JSON.stringify(idp.keys[0]!.privateJwk));
    const auth = { mode: "required", issuer: idp.issuer, jwks_url: idp.jwksUrl, signing_key_file: keyFile };
    const config = loadConfig({ cwd: repoRoot, env: {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"], auth } as never });
    fabric = await startFabric(config, undefined, { plugins: [loaded] });
    gw = fabric.urls["run-gateway"]!;
    const aud = "nodefabric-run-gateway";
    tokens.writer = await idp.mint({ aud, scope: "runs:write", tenant_id: "acme", sub: "writer", expiresIn: 600 });
    tokens.reader = await idp.mint({ aud, scope: "runs:read", tenant_id: "acme", sub: "reader", expiresIn: 600 });
    await until("demo.echo can be started", async () => {
      const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: echoRef, input: {} }, bearer("writer"));
      return r.status === 200 ? true : undefined;
    });
  }, 60_000);

  afterAll(async () => {
    await fabric?.close();
    await idp?.close();
  });

  /** The function's answer, through the plugin's route, and the route's, for the same shape and token. */
  async function both(s: Shape, who: string): Promise<[GatewayAnswer<unknown>, Answer]> {
    const api = await call("POST", `${gw}/via-api`, s, bearer(who));
    expect(api.status, api.text).toBe(200);
    const route = await call("POST", `${gw}/v1/runs`, textOf(s), { ...bearer(who), ...(s.wait !== undefined ? { prefer: `wait=${s.wait}` } : {}) });
    return [api.body as GatewayAnswer<unknown>, route];
  }

  for (const [what, shape] of CASES) {
    it(`answers as the route: ${what}`, async () => {
      const s = shape(1);
      const [api, route] = await both(s, "writer");
      expectSame(api, route, s.wait !== undefined);
    });
  }

  it("refuses a token without runs:write as the route does (403, the scope named in WWW-Authenticate)", async () => {
    const [api, route] = await both({ request: { root_node_type_ref: echoRef, input: {} } }, "reader");
    expect(route.status).toBe(403);
    expectSame(api, route);
  });

  it("starts the run for the caller's tenant, as the route does", async () => {
    const [api] = await both({ request: { root_node_type_ref: echoRef, input: { n: 2 } }, wait: 10 }, "writer");
    const runId = (api.body as { run_id: string }).run_id;
    const mine = await call("GET", `${gw}/v1/runs/${runId}`, undefined, bearer("writer"));
    expect(mine.status).toBe(200);
    const other = await idp.mint({ aud: "nodefabric-run-gateway", scope: "runs:read", tenant_id: "globex", sub: "other", expiresIn: 600 });
    const theirs = await call("GET", `${gw}/v1/runs/${runId}`, undefined, { authorization: `Bearer ${other}` });
    expect(theirs.status).toBe(404);
  });
});

describe("the gateway's POST /v1/runs as a function, on a gateway forwarding to its coordinator", () => {
  let fabric: RunningFabric;
  let forwarding: FastifyInstance;
  let api: RunGatewayApi;
  let gw: string;

  beforeAll(async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-gateway-api-fwd-"));
    const config = loadConfig({ cwd: repoRoot, env: {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"] } });
    fabric = await startFabric(config, ["node-registry", "pdp", "selection", "atomic-executor", "run-coordinator"]);
    forwarding = await buildRunGateway({ logger: false, coordinatorUrl: fabric.urls["run-coordinator"]! });
    await forwarding.listen({ host: "127.0.0.1", port: 0 });
    const addr = forwarding.server.address() as { port: number };
    gw = `http://127.0.0.1:${addr.port}`;
    api = inProcessApi(forwarding, RUN_GATEWAY_API)!;
    await until("demo.echo can be started", async () => {
      const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: echoRef, input: {} });
      return r.status === 200 ? true : undefined;
    });
  }, 60_000);

  afterAll(async () => {
    await forwarding?.close();
    await fabric?.close();
  });

  for (const [what, shape] of CASES) {
    it(`answers as the route: ${what}`, async () => {
      const s = shape(3);
      const viaApi = await api.startRun(bodyOf(s) as never, { headers: {} }, s.wait);
      const route = await call("POST", `${gw}/v1/runs`, textOf(s), s.wait !== undefined ? { prefer: `wait=${s.wait}` } : {});
      expectSame(viaApi, route, s.wait !== undefined);
    });
  }

  it("relays the coordinator's refusal of a run_id taken by another request (409) as the route does", async () => {
    await api.startRun({ run_id: "run_gateway_api_taken", root_node_type_ref: echoRef, input: { a: 1 } }, { headers: {} }, 10);
    const viaApi = await api.startRun({ run_id: "run_gateway_api_taken", root_node_type_ref: echoRef, input: { a: 2 } }, { headers: {} });
    const route = await call("POST", `${gw}/v1/runs`, { run_id: "run_gateway_api_taken", root_node_type_ref: echoRef, input: { a: 2 } });
    expect(route.status).toBe(409);
    expectSame(viaApi, route);
  });
});
