import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import { buildAtomicExecutor, buildNodeRegistry, handlersFromDefinitions, loadConfig, newId, setClock, startFabric, type RunningFabric } from "@nodefabric/core";
import { hostAllowed, httpRequest } from "../src/index.js";

const repo = fileURLToPath(new URL("../../..", import.meta.url));
const HTTP_REQUEST = { node_type_id: "http.request", version: "1.0.0" };

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

interface Upstream {
  /** Base URL, e.g. http://127.0.0.1:PORT */
  url: string;
  /** host:port, as an allow-list entry. */
  host: string;
  seen: Seen[];
  close(): Promise<void>;
}

/** A loopback HTTP server that records every request and answers with `route`. */
async function startUpstream(route: (req: IncomingMessage, res: ServerResponse, body: string) => void): Promise<Upstream> {
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      route(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    seen,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

async function call(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Json }> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

const WEATHER_INPUT = {
  type: "object",
  properties: { city: { type: "string", minLength: 1 }, units: { enum: ["metric", "imperial"] } },
  required: ["city"],
  additionalProperties: false,
};
const WEATHER_OUTPUT = {
  type: "object",
  properties: { temperature_c: { type: "number" }, city: { type: "string" } },
  required: ["temperature_c"],
};

/** A NodeType implemented by http.request@1.0.0, configured by `http`. */
function httpBacked(id: string, http: Record<string, unknown>, extra: Record<string, unknown> = {}): Json {
  return {
    node_type_id: id,
    version: "1.0.0",
    kind: "atomic",
    description: `${id}, backed by an HTTP API`,
    input_schema: WEATHER_INPUT,
    output_schema: WEATHER_OUTPUT,
    constraints: { gates: { side_effect_class: "read" } },
    extensions: { "nodefabric.implementation": HTTP_REQUEST, "nodefabric.http": http },
    ...extra,
  };
}

describe("allowed_hosts", () => {
  it("matches host[:port] exactly, and subdomains for *.domain", () => {
    const allowed = (url: string, hosts: string[]) => hostAllowed(new URL(url), hosts);
    expect(allowed("https://api.example.com/x", ["api.example.com"])).toBe(true);
    expect(allowed("https://api.example.com:8443/x", ["api.example.com"])).toBe(false);
    expect(allowed("https://api.example.com:8443/x", ["api.example.com:8443"])).toBe(true);
    expect(allowed("https://eu.api.example.com/x", ["*.example.com"])).toBe(true);
    expect(allowed("https://example.com/x", ["*.example.com"])).toBe(false);
    expect(allowed("https://api.example.com.evil.test/x", ["*.example.com", "api.example.com"])).toBe(false);
    expect(allowed("file:///etc/passwd", ["api.example.com"])).toBe(false);
  });
});

describe("http.request through an atomic executor and a registry", () => {
  let registry: FastifyInstance;
  let registryUrl: string;
  let executor: FastifyInstance;
  let weather: Upstream;
  let other: Upstream;
  /** The node type lookups the registry answered, by id. */
  const lookups = new Map<string, number>();

  const publish = async (nodeType: Json) => {
    const r = await call("POST", `${registryUrl}/v1/node-types`, { node_type: nodeType });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
  };
  const execute = async (id: string, inputs: Record<string, unknown>) => {
    const res = await executor.inject({
      method: "POST",
      url: "/v1/atomic-node-runs:execute",
      payload: { run_id: "run_http", node_run_id: newId("nr"), node_type_ref: { node_type_id: id, version: "1.0.0" }, inputs },
    });
    return { status: res.statusCode, body: res.json() as Json };
  };
  /** Publishes a node type configured by `http` and executes it once. */
  const publishAndExecute = async (id: string, http: Record<string, unknown>, inputs: Record<string, unknown> = { city: "Oslo" }, extra: Record<string, unknown> = {}) => {
    await publish(httpBacked(id, http, extra));
    return execute(id, inputs);
  };

  beforeAll(async () => {
    weather = await startUpstream((req, res, body) => {
      const url = new URL(req.url!, "http://upstream");
      if (url.pathname.startsWith("/v1/weather/")) return sendJson(res, 200, { temp: 21.5, place: decodeURIComponent(url.pathname.slice(12)) });
      if (url.pathname === "/v1/observations") return sendJson(res, 201, { id: "obs-1", received: JSON.parse(body) });
      if (url.pathname === "/status") return sendJson(res, Number(url.searchParams.get("code")), { error: "as asked" }, { "retry-after": "3" });
      if (url.pathname === "/redirect-here") return void res.writeHead(302, { location: "/v1/weather/Bergen" }).end();
      if (url.pathname === "/redirect-away") return void res.writeHead(307, { location: `${url.searchParams.get("to")}/v1/weather/Away` }).end();
      if (url.pathname === "/big") {
        // Chunked, no content-length: the limit must hold while streaming.
        res.writeHead(200, { "content-type": "application/json" });
        res.write(`{"pad":"${"x".repeat(4096)}`);
        res.end(`${"y".repeat(4096)}"}`);
        return;
      }
      if (url.pathname === "/big-declared") return sendJson(res, 200, { pad: "z".repeat(10_000) });
      if (url.pathname === "/slow") return void setTimeout(() => sendJson(res, 200, { temp: 1 }), 3_000);
      if (url.pathname === "/v1/forecast") {
        const [lat, lon] = [Number(url.searchParams.get("latitude")), Number(url.searchParams.get("longitude"))];
        return sendJson(res, 200, { latitude: lat, longitude: lon, current: { time: "2026-11-22T20:00", temperature_2m: lat > 60 ? -3.5 : 4.2, wind_speed_10m: 11.9 } });
      }
      if (url.pathname === "/html") return void res.writeHead(200, { "content-type": "text/html" }).end("<p>21.5 °C</p>");
      sendJson(res, 404, { error: "no such route" });
    });
    other = await startUpstream((_req, res) => sendJson(res, 200, { temp: -40 }));

    registry = await buildNodeRegistry({ logger: false, dbPath: path.join(mkdtempSync(path.join(os.tmpdir(), "nf-http-")), "registry.db") });
    registry.addHook("onRequest", async (req) => {
      const m = /^\/v1\/node-types\/([^/?]+)\?/.exec(req.url);
      if (req.method === "GET" && m) lookups.set(decodeURIComponent(m[1]!), (lookups.get(decodeURIComponent(m[1]!)) ?? 0) + 1);
    });
    await registry.listen({ host: "127.0.0.1", port: 0 });
    registryUrl = `http://127.0.0.1:${(registry.server.address() as { port: number }).port}`;
    executor = await buildAtomicExecutor({
      logger: false,
      handlers: handlersFromDefinitions([httpRequest]),
      registryUrl,
      secrets: { WEATHER_API_KEY: "k-123" },
      // The upstreams are loopback servers: the operator allows loopback, which egress refuses by default
      // (see egress.test.ts), and binds the secret to the weather upstream.
      egress: { allowCidrs: ["127.0.0.1/32"] },
      secretHosts: { WEATHER_API_KEY: [weather.host] },
    });
    await executor.ready();
  });
  afterAll(async () => {
    await executor?.close();
    await registry?.close();
    await weather?.close();
    await other?.close();
  });

  it("GETs with path and query templates and a secret header, and answers the JSON body mapped by response", async () => {
    const r = await publishAndExecute(
      "t.weather-get",
      {
        base_url: `${weather.url}/`,
        method: "GET",
        path: "/v1/weather/{city}",
        query: { units: "{units}", lang: "en", days: 1 },
        headers: { "x-client": "nodefabric-{units}" },
        secret_headers: { authorization: { secret: "WEATHER_API_KEY", prefix: "Bearer " } },
        response: "{ 'temperature_c': body.temp, 'city': body.place }",
      },
      { city: "São Paulo/Centro", units: "metric" },
    );
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ state: "completed", outputs: { temperature_c: 21.5, city: "São Paulo/Centro" } });
    const req = weather.seen.at(-1)!;
    expect(req.method).toBe("GET");
    const sent = new URL(req.url, "http://upstream");
    expect(sent.pathname).toBe("/v1/weather/S%C3%A3o%20Paulo%2FCentro");
    expect(Object.fromEntries(sent.searchParams)).toEqual({ units: "metric", lang: "en", days: "1" });
    expect(req.headers.authorization).toBe("Bearer k-123");
    expect(req.headers["x-client"]).toBe("nodefabric-metric");
  });

  it("leaves out a query parameter whose input is absent, and answers the JSON body itself by default", async () => {
    const r = await publishAndExecute("t.weather-default", { base_url: weather.url, path: "/v1/weather/{city}", query: { units: "{units}" } }, { city: "Oslo" }, {
      output_schema: { type: "object", required: ["temp"] },
    });
    expect(r.body).toMatchObject({ state: "completed", outputs: { temp: 21.5, place: "Oslo" } });
    expect(weather.seen.at(-1)!.url).toBe("/v1/weather/Oslo");
  });

  it("POSTs a body built by JSONata and maps the answer, status included", async () => {
    const r = await publishAndExecute(
      "t.observe",
      {
        base_url: weather.url,
        method: "POST",
        path: "/v1/observations",
        body: "{ 'station': inputs.city, 'readings': [inputs.readings.($ * 10)] }",
        response: "{ 'id': body.id, 'status': status, 'count': $count(body.received.readings) }",
      },
      { city: "Oslo", readings: [1, 2.5] },
      {
        input_schema: { type: "object", required: ["city", "readings"] },
        output_schema: { type: "object", required: ["id", "status", "count"], properties: { status: { const: 201 } } },
      },
    );
    expect(r.body).toMatchObject({ state: "completed", outputs: { id: "obs-1", status: 201, count: 2 } });
    const req = weather.seen.at(-1)!;
    expect(req.method).toBe("POST");
    expect(req.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(req.body)).toEqual({ station: "Oslo", readings: [10, 25] });
  });

  it("sends all inputs as the body with body: \"inputs\"", async () => {
    const r = await publishAndExecute("t.observe-all", { base_url: weather.url, method: "PUT", path: "/v1/observations", body: "inputs", response: "{ 'temperature_c': 0 }" }, { city: "Oslo", units: "metric" });
    expect(r.body.state).toBe("completed");
    expect(JSON.parse(weather.seen.at(-1)!.body)).toEqual({ city: "Oslo", units: "metric" });
  });

  it("fails 5xx and 429 answers as retryable upstream_error, and a 404 as not retryable", async () => {
    const http = (code: number) => ({ base_url: weather.url, path: "/status", query: { code: String(code) } });
    const r503 = await publishAndExecute("t.status-503", http(503));
    expect(r503.body).toMatchObject({ state: "failed", error: { code: "upstream_error", retryable: true, details: { status: 503 } } });
    const r429 = await publishAndExecute("t.status-429", http(429));
    expect(r429.body).toMatchObject({ state: "failed", error: { code: "upstream_error", retryable: true, details: { status: 429, retry_after: "3", retry_after_ms: 3000 } } });
    const r404 = await publishAndExecute("t.status-404", http(404));
    expect(r404.body).toMatchObject({ state: "failed", error: { code: "upstream_error", retryable: false, details: { status: 404 } } });
    expect(r404.body.error.details.body).toContain("as asked");
  });

  it("refuses a redirect by default, follows it when enabled, and refuses one that leaves allowed_hosts", async () => {
    const before = weather.seen.length;
    const refused = await publishAndExecute("t.redirect-refused", { base_url: weather.url, path: "/redirect-here" });
    expect(refused.body).toMatchObject({ state: "failed", error: { code: "egress_denied", retryable: false, details: { status: 302 } } });
    expect(weather.seen.slice(before).map((s) => s.url)).toEqual(["/redirect-here"]);

    const followed = await publishAndExecute("t.redirect-followed", { base_url: weather.url, path: "/redirect-here", follow_redirects: true, response: "{ 'temperature_c': body.temp, 'city': body.place }" });
    expect(followed.body).toMatchObject({ state: "completed", outputs: { temperature_c: 21.5, city: "Bergen" } });

    const away = await publishAndExecute("t.redirect-away", { base_url: weather.url, path: "/redirect-away", query: { to: other.url }, follow_redirects: true });
    expect(away.body).toMatchObject({ state: "failed", error: { code: "egress_denied", retryable: false, details: { host: other.host } } });
    expect(other.seen).toEqual([]);
  });

  it("refuses a URL outside allowed_hosts before connecting, and calls one inside", async () => {
    const direct = {
      input_schema: httpRequest.nodeType.input_schema,
      output_schema: httpRequest.nodeType.output_schema,
    };
    await publish(httpBacked("t.direct", { allowed_hosts: [weather.host] }, direct));
    const outside = await execute("t.direct", { url: `${other.url}/v1/weather/Oslo` });
    expect(outside.body).toMatchObject({ state: "failed", error: { code: "egress_denied", retryable: false, details: { host: other.host } } });
    expect(other.seen).toEqual([]);

    const inside = await execute("t.direct", { url: `${weather.url}/v1/weather/Oslo`, headers: { "x-trace": "t1" } });
    expect(inside.body).toMatchObject({ state: "completed", outputs: { status: 200, body: { temp: 21.5, place: "Oslo" } } });
    expect(inside.body.outputs.headers["content-type"]).toBe("application/json");
    expect(weather.seen.at(-1)!.headers["x-trace"]).toBe("t1");

    const scheme = await execute("t.direct", { url: "ftp://127.0.0.1/file" });
    expect(scheme.body.state).toBe("failed");
    expect(other.seen).toEqual([]);
  });

  it("refuses a direct call of http.request itself: it allows no hosts", async () => {
    const r = await execute("http.request", { url: `${other.url}/anything` });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ state: "failed", error: { code: "egress_denied", retryable: false, details: { field: "nodefabric.http.allowed_hosts" } } });
    expect(other.seen).toEqual([]);
  });

  it("stops reading past max_response_bytes, with or without a content-length", async () => {
    const streamed = await publishAndExecute("t.big", { base_url: weather.url, path: "/big", max_response_bytes: 4096 });
    expect(streamed.body).toMatchObject({ state: "failed", error: { code: "response_too_large", retryable: false, details: { max_response_bytes: 4096 } } });
    const declared = await publishAndExecute("t.big-declared", { base_url: weather.url, path: "/big-declared", max_response_bytes: 1000 });
    expect(declared.body).toMatchObject({ state: "failed", error: { code: "response_too_large" } });
  });

  it("gives up after timeout_ms with a retryable upstream_unavailable", async () => {
    const started = Date.now();
    const r = await publishAndExecute("t.slow", { base_url: weather.url, path: "/slow", timeout_ms: 200 });
    expect(r.body).toMatchObject({ state: "failed", error: { code: "upstream_unavailable", retryable: true, details: { reason: "timeout", code: "ETIMEDOUT", timeout_ms: 200 }, cause: { code: "ETIMEDOUT" } } });
    expect(Date.now() - started).toBeLessThan(2_500);
  });

  it("validates the upstream's answer against the published output_schema", async () => {
    const r = await publishAndExecute("t.wrong-shape", { base_url: weather.url, path: "/v1/weather/{city}", response: "{ 'temperature_c': 'warm' }" });
    expect(r.body).toMatchObject({ state: "failed", error: { code: "invalid_outputs" } });
    const bad = await execute("t.wrong-shape", { town: "Oslo" });
    expect(bad.body).toMatchObject({ state: "failed", error: { code: "invalid_inputs" } });
  });

  it("explains a text answer that no response mapping turns into outputs", async () => {
    const r = await publishAndExecute("t.html", { base_url: weather.url, path: "/html" });
    expect(r.body).toMatchObject({ state: "failed", error: { code: "upstream_error", retryable: false, details: { field: "nodefabric.http.response" } } });
    expect(r.body.error.message).toContain("text/html");
  });

  it("fails a bad configuration with invalid_configuration naming the field, before any request", async () => {
    const before = weather.seen.length;
    const jsonata = await publishAndExecute("t.bad-jsonata", { base_url: weather.url, response: "{ 'a': " });
    expect(jsonata.body).toMatchObject({ state: "failed", error: { code: "invalid_configuration", retryable: false, details: { field: "nodefabric.http.response" } } });
    const noBase = await publishAndExecute("t.no-base", { path: "/v1/weather/{city}" });
    expect(noBase.body).toMatchObject({ state: "failed", error: { code: "invalid_configuration", details: { field: "nodefabric.http.path" } } });
    const missing = await publishAndExecute("t.missing", { method: "GET" });
    expect(missing.body).toMatchObject({ state: "failed", error: { code: "invalid_configuration", details: { field: "nodefabric.http.base_url" } } });
    const typo = await publishAndExecute("t.typo", { base_url: weather.url, allowed_host: ["x"] });
    expect(typo.body).toMatchObject({ state: "failed", error: { code: "invalid_configuration", details: { field: "nodefabric.http.allowed_host" } } });
    const secret = await publishAndExecute("t.no-secret", { base_url: weather.url, secret_headers: { "x-api-key": { secret: "NOT_SET" } } });
    expect(secret.body).toMatchObject({ state: "failed", error: { code: "invalid_configuration", details: { field: "nodefabric.http.secret_headers.x-api-key", secret: "NOT_SET" } } });
    expect(weather.seen.length).toBe(before);
  });

  it("answers 404 unknown_node_type for a node type nothing here implements", async () => {
    const unknown = await execute("t.never-published", { city: "Oslo" });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("unknown_node_type");

    await publish({ ...httpBacked("t.other-impl", {}), extensions: { "nodefabric.implementation": { node_type_id: "acme.soap", version: "1.0.0" } } });
    const other = await execute("t.other-impl", { city: "Oslo" });
    expect(other.status).toBe(404);
    expect(other.body.error).toMatchObject({ code: "unknown_node_type", details: { implementation: { node_type_id: "acme.soap", version: "1.0.0" } } });
    expect(other.body.error.message).toContain("does not hold");

    await publish({ node_type_id: "t.plain", version: "1.0.0", kind: "atomic" });
    const plain = await execute("t.plain", {});
    expect(plain.status).toBe(404);
    expect(plain.body.error.code).toBe("unknown_node_type");
  });

  it("asks the registry once for a node type it found, and remembers one it did not find for 30 s", async () => {
    await publish(httpBacked("t.cached", { base_url: weather.url, path: "/v1/weather/{city}", response: "{ 'temperature_c': body.temp }" }));
    expect((await execute("t.cached", { city: "Oslo" })).body.state).toBe("completed");
    expect((await execute("t.cached", { city: "Bergen" })).body.state).toBe("completed");
    expect(lookups.get("t.cached")).toBe(1);

    expect((await execute("t.late", { city: "Oslo" })).status).toBe(404);
    expect((await execute("t.late", { city: "Oslo" })).status).toBe(404);
    expect(lookups.get("t.late")).toBe(1);
    await publish(httpBacked("t.late", { base_url: weather.url, path: "/v1/weather/{city}", response: "{ 'temperature_c': body.temp }" }));
    expect((await execute("t.late", { city: "Oslo" })).status).toBe(404);
    setClock({ now: () => Date.now() + 31_000, isoNow: () => new Date(Date.now() + 31_000).toISOString() });
    try {
      const later = await execute("t.late", { city: "Oslo" });
      expect(later.body).toMatchObject({ state: "completed", outputs: { temperature_c: 21.5 } });
    } finally {
      setClock();
    }
    expect(lookups.get("t.late")).toBe(2);
  });

  it("runs the example node type of node-types/ against an upstream that answers as Open-Meteo does", async () => {
    const example = JSON.parse(readFileSync(new URL("../node-types/weather-current.json", import.meta.url), "utf8"));
    example.extensions["nodefabric.http"].base_url = weather.url;
    await publish(example);
    const r = await execute("weather.current", { latitude: 69.65, longitude: 18.96 });
    expect(r.body).toMatchObject({ state: "completed", outputs: { temperature_c: -3.5, wind_speed_kmh: 11.9, observed_at: "2026-11-22T20:00" } });
    const sent = new URL(weather.seen.at(-1)!.url, "http://upstream");
    expect(Object.fromEntries(sent.searchParams)).toEqual({ latitude: "69.65", longitude: "18.96", current: "temperature_2m,wind_speed_10m" });
  });

  it("answers 503 unavailable, retryable, when the registry cannot be asked", async () => {
    const gone = await startUpstream((_req, res) => sendJson(res, 200, {}));
    await gone.close();
    const lonely = await buildAtomicExecutor({ logger: false, handlers: handlersFromDefinitions([httpRequest]), registryUrl: gone.url });
    try {
      const res = await lonely.inject({
        method: "POST",
        url: "/v1/atomic-node-runs:execute",
        payload: { run_id: "run_http", node_run_id: newId("nr"), node_type_ref: { node_type_id: "t.anything", version: "1.0.0" }, inputs: {} },
      });
      expect(res.statusCode).toBe(503);
      expect(res.headers["retry-after"]).toBe("1");
      expect(res.json().error).toMatchObject({ code: "unavailable", retryable: true });
    } finally {
      await lonely.close();
    }
  });
});

describe("an HTTP-backed node type published at run time, run through the gateway", () => {
  let fabric: RunningFabric;
  let upstream: Upstream;
  let gateway: string;
  let registryUrl: string;

  beforeAll(async () => {
    upstream = await startUpstream((req, res) => {
      const url = new URL(req.url!, "http://upstream");
      sendJson(res, 200, { current: { temp_c: 12.5, condition: "Rain" }, location: { name: decodeURIComponent(url.pathname.split("/").at(-1)!) } });
    });
    const config = loadConfig({
      cwd: repo,
      env: {},
      flags: {
        port_base: 0,
        data_dir: mkdtempSync(path.join(os.tmpdir(), "nf-http-fabric-")),
        log_level: "silent",
        handlers: ["@nodefabric/handler-http", "@nodefabric/handler-demo"],
        // The upstream is a loopback server: the operator allows loopback, which egress refuses by default.
        executor: { egress: { allow_cidrs: ["127.0.0.1/32"] } },
      } as never,
    });
    fabric = await startFabric(config);
    gateway = fabric.urls["run-gateway"]!;
    registryUrl = fabric.urls["node-registry"]!;
    // The executor publishes http.request and registers itself shortly after it listens.
    const end = Date.now() + 15_000;
    for (;;) {
      const r = await call("GET", `${registryUrl}/v1/executors?node_type_id=http.request`);
      if (r.status === 200 && r.body.length > 0) break;
      if (Date.now() > end) throw new Error("the executor did not register http.request");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
    await upstream?.close();
  });

  const weatherCurrent = (version: string, outputSchema: Json): Json => ({
    ...httpBacked(
      "weather.current",
      {
        base_url: upstream.url,
        path: "/v1/weather/{city}",
        headers: { "x-units": "metric" },
        response: "{ 'temperature_c': body.current.temp_c, 'conditions': body.current.condition, 'city': body.location.name }",
      },
      { output_schema: outputSchema },
    ),
    version,
  });

  it("completes with the mapped outputs", async () => {
    const published = await call("POST", `${registryUrl}/v1/node-types`, {
      node_type: weatherCurrent("1.0.0", { type: "object", required: ["temperature_c", "conditions"], properties: { temperature_c: { type: "number" }, conditions: { type: "string" } } }),
    });
    expect(published.status).toBe(200);
    const r = await call("POST", `${gateway}/v1/runs`, { root_node_type_ref: { node_type_id: "weather.current", version: "1.0.0" }, input: { city: "Tromsø" } }, { prefer: "wait=10" });
    expect(r.status).toBe(200);
    expect(r.body.state).toBe("completed");
    expect(r.body.extensions["nodefabric.outputs"]).toEqual({ temperature_c: 12.5, conditions: "Rain", city: "Tromsø" });
    expect(upstream.seen.at(-1)).toMatchObject({ method: "GET", url: "/v1/weather/Troms%C3%B8", headers: { "x-units": "metric" } });
  });

  it("fails with invalid_outputs when the upstream's answer breaks the published output_schema", async () => {
    const published = await call("POST", `${registryUrl}/v1/node-types`, {
      node_type: weatherCurrent("2.0.0", { type: "object", required: ["temperature_c"], properties: { temperature_c: { type: "string" } } }),
    });
    expect(published.status).toBe(200);
    const r = await call("POST", `${gateway}/v1/runs`, { root_node_type_ref: { node_type_id: "weather.current", version: "2.0.0" }, input: { city: "Oslo" } }, { prefer: "wait=10" });
    expect(r.status).toBe(200);
    expect(r.body.state).toBe("failed");
    expect(r.body.extensions["nodefabric.error"]).toMatchObject({ code: "invalid_outputs" });
  });
});
