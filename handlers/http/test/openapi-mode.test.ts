import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { buildAtomicExecutor, buildNodeRegistry, handlersFromDefinitions, newId } from "@nodefabric/core";
import type { HttpOperationDescriptor } from "@nodefabric/sdk";
import { httpRequest } from "../src/index.js";

// http.request running node types made from OpenAPI operations (extensions["nodefabric.openapi"]), published with no
// code: a real registry and atomic executor, and loopback upstreams that the executor's operator allows.

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

interface Upstream {
  url: string;
  host: string;
  seen: Seen[];
  close(): Promise<void>;
}

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

describe("http.request running OpenAPI operations", () => {
  let registry: FastifyInstance;
  let registryUrl: string;
  let executor: FastifyInstance;
  /** The API. */
  let pets: Upstream;
  /** Another host: the OAuth 2 token endpoint, and where no secret may go. */
  let other: Upstream;

  /** Petstore's getPetById on `pets`, changed by `over`. */
  const getPet = (over: Partial<HttpOperationDescriptor> = {}): HttpOperationDescriptor => ({
    api: { title: "Petstore", version: "1.0.0" },
    operation_id: "getPetById",
    method: "GET",
    path: "/pet/{petId}",
    server: { url: `${pets.url}/v3` },
    settings: { base_url: "PETSTORE_BASE_URL" },
    parameters: [
      { input: "petId", name: "petId", in: "path", style: "simple", explode: false },
      { input: "fields", name: "fields", in: "query", style: "form", explode: false },
      { input: "trace", name: "X-Trace", in: "header", style: "simple", explode: false },
    ],
    security_schemes: { api_key: { type: "apiKey", in: "header", name: "api_key", secret: "PETSTORE_API_KEY" } },
    security: [["api_key"]],
    response: { status: 200, outputs: "object", media_type: "application/json" },
    ...over,
  });

  const publish = async (nodeType: Json) => {
    const res = await fetch(`${registryUrl}/v1/node-types`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ node_type: nodeType }) });
    expect(res.status, await res.text()).toBe(200);
  };
  const execute = async (id: string, inputs: Record<string, unknown>) => {
    const res = await executor.inject({
      method: "POST",
      url: "/v1/atomic-node-runs:execute",
      payload: { run_id: "run_openapi", node_run_id: newId("nr"), node_type_ref: { node_type_id: id, version: "1.0.0" }, inputs },
    });
    expect(res.statusCode).toBe(200);
    return res.json() as Json;
  };
  /** Publishes a node type implemented by http.request with this descriptor (and `nodefabric.http`), and runs it once. */
  const run = async (id: string, op: HttpOperationDescriptor, inputs: Record<string, unknown>, http?: Record<string, unknown>) => {
    await publish({
      node_type_id: id,
      version: "1.0.0",
      kind: "atomic",
      description: `${op.operation_id} of ${op.api.title}`,
      input_schema: { type: "object" },
      output_schema: { type: "object" },
      constraints: { gates: { side_effect_class: op.method === "GET" ? "read" : "write" } },
      extensions: {
        "nodefabric.implementation": { node_type_id: "http.request", version: "1.0.0" },
        "nodefabric.openapi": op,
        ...(http ? { "nodefabric.http": http } : {}),
      },
    });
    return execute(id, inputs);
  };

  beforeAll(async () => {
    pets = await startUpstream((req, res, body) => {
      const url = new URL(req.url!, "http://upstream");
      if (url.pathname === "/v3/user/login") return sendJson(res, 200, "logged in user session: 1764");
      if (url.pathname === "/v3/pet" && req.method === "POST") return sendJson(res, 200, { id: 10, ...JSON.parse(body) });
      if (url.pathname === "/v3/busy") return sendJson(res, 429, { message: "slow down" }, { "retry-after": "3" });
      if (url.pathname === "/v3/big") return sendJson(res, 200, { pad: "z".repeat(10_000) });
      if (url.pathname.startsWith("/v3/pet/")) return sendJson(res, 200, { id: Number(url.pathname.slice("/v3/pet/".length)), name: "Rex" });
      sendJson(res, 404, { message: "no such route" });
    });
    other = await startUpstream((req, res) => {
      if (req.url === "/oauth/token") return sendJson(res, 200, { access_token: "tok-from-other", token_type: "bearer", expires_in: 3600 });
      sendJson(res, 200, { id: -1, name: "Impostor" });
    });

    registry = await buildNodeRegistry({ logger: false, dbPath: path.join(mkdtempSync(path.join(os.tmpdir(), "nf-openapi-")), "registry.db") });
    await registry.listen({ host: "127.0.0.1", port: 0 });
    registryUrl = `http://127.0.0.1:${(registry.server.address() as { port: number }).port}`;
    executor = await buildAtomicExecutor({
      logger: false,
      handlers: handlersFromDefinitions([httpRequest]),
      registryUrl,
      secrets: {
        PETSTORE_API_KEY: "k-123",
        PETSTORE_BASE_URL_BOUND: `${pets.url}/v3`,
        PETSTORE_BASE_URL_UNBOUND: `${pets.url}/v3`,
        OAUTH_CLIENT_ID: "client-1",
        OAUTH_CLIENT_SECRET: "s3cret",
        TOKEN_HOST_ONLY_ID: "client-2",
        TOKEN_HOST_ONLY_SECRET: "s3cret-2",
      },
      // The upstreams are loopback servers: the operator allows loopback, which egress refuses by default, and binds
      // each secret to the hosts it may be sent to.
      egress: { allowCidrs: ["127.0.0.1/32"] },
      secretHosts: {
        PETSTORE_API_KEY: [pets.host],
        PETSTORE_BASE_URL_BOUND: [pets.host],
        OAUTH_CLIENT_ID: [other.host, pets.host],
        OAUTH_CLIENT_SECRET: [other.host, pets.host],
        TOKEN_HOST_ONLY_ID: [other.host],
        TOKEN_HOST_ONLY_SECRET: [other.host],
      },
    });
    await executor.ready();
  });
  afterAll(async () => {
    await executor?.close();
    await registry?.close();
    await pets?.close();
    await other?.close();
  });

  it("calls the operation the descriptor describes, with its parameters and a secret bound to the API's host", async () => {
    const r = await run("petstore.get-pet", getPet(), { petId: 7, fields: ["id", "name"], trace: "t-1" });
    expect(r).toMatchObject({ state: "completed", outputs: { id: 7, name: "Rex" } });
    const req = pets.seen.at(-1)!;
    expect(req.method).toBe("GET");
    expect(req.url).toBe("/v3/pet/7?fields=id,name");
    expect(req.headers).toMatchObject({ api_key: "k-123", "x-trace": "t-1", accept: "application/json" });
  });

  it("refuses to send a secret to a host it is not bound to, before connecting", async () => {
    const before = other.seen.length;
    const r = await run("petstore.get-pet-elsewhere", getPet({ server: { url: `${other.url}/v3` } }), { petId: 7 });
    expect(r).toMatchObject({ state: "failed", error: { code: "egress_denied", retryable: false, details: { secret: "PETSTORE_API_KEY", host: other.host, field: "nodefabric.openapi" } } });
    expect(r.error.message).toContain("the secret PETSTORE_API_KEY");
    expect(other.seen.length).toBe(before);
  });

  it("reads settings from the executor's secrets, bound to the host they point at like any secret", async () => {
    const bound = await run("petstore.get-pet-setting", getPet({ server: { url: "" }, settings: { base_url: "PETSTORE_BASE_URL_BOUND" } }), { petId: 3 });
    expect(bound).toMatchObject({ state: "completed", outputs: { id: 3 } });
    const unbound = await run("petstore.get-pet-unbound", getPet({ server: { url: "" }, settings: { base_url: "PETSTORE_BASE_URL_UNBOUND" } }), { petId: 3 });
    expect(unbound).toMatchObject({ state: "failed", error: { code: "egress_denied", details: { secret: "PETSTORE_BASE_URL_UNBOUND" } } });
    // Never from the executor's environment: a published node type must not read it.
    process.env.PETSTORE_FROM_ENV = `${pets.url}/v3`;
    try {
      const env = await run("petstore.get-pet-env", getPet({ server: { url: "" }, settings: { base_url: "PETSTORE_FROM_ENV" } }), { petId: 3 });
      expect(env).toMatchObject({ state: "failed", error: { code: "invalid_configuration", details: { field: "nodefabric.openapi", setting: "PETSTORE_FROM_ENV" } } });
      expect(env.error.message).toContain("no base URL for getPetById: set PETSTORE_FROM_ENV");
    } finally {
      delete process.env.PETSTORE_FROM_ENV;
    }
  });

  it("fails with invalid_configuration naming the secrets when no security alternative is satisfied", async () => {
    const r = await run("petstore.get-pet-nokey", getPet({ security_schemes: { key: { type: "apiKey", in: "query", name: "key", secret: "NOT_SET" } }, security: [["key"]] }), { petId: 1 });
    expect(r).toMatchObject({ state: "failed", error: { code: "invalid_configuration", retryable: false, details: { secrets: ["NOT_SET"] } } });
    expect(r.error.message).toMatch(/^petstore\.get-pet-nokey@1\.0\.0: getPetById needs credentials: set NOT_SET \(apiKey key\)/);
  });

  it("posts a JSON body and reads a JSON string answer as { result }", async () => {
    const add = getPet({ operation_id: "addPet", method: "POST", path: "/pet", parameters: [], body: { input: "body", media_type: "application/json", encoding: "json", required: true } });
    expect(await run("petstore.add-pet", add, { body: { name: "Fido" } })).toMatchObject({ state: "completed", outputs: { id: 10, name: "Fido" } });
    expect(pets.seen.at(-1)).toMatchObject({ method: "POST", body: '{"name":"Fido"}', headers: { "content-type": "application/json" } });
    const login = getPet({ operation_id: "loginUser", path: "/user/login", parameters: [], security: [], response: { status: 200, outputs: "result", media_type: "application/json" } });
    expect(await run("petstore.login", login, {})).toMatchObject({ state: "completed", outputs: { result: "logged in user session: 1764" } });
  });

  it("fails a 429 as a retryable upstream_error with retry_after_ms", async () => {
    const r = await run("petstore.busy", getPet({ path: "/busy", parameters: [] }), {});
    expect(r).toMatchObject({ state: "failed", error: { code: "upstream_error", retryable: true, details: { status: 429, retry_after_ms: 3000, body: '{"message":"slow down"}' } } });
  });

  it("gets an OAuth 2 token from the token URL with client credentials bound to it and to the API's host", async () => {
    const oauth = (id: string, secret: string, scopes = ["read"]) =>
      getPet({
        security_schemes: {
          auth: { type: "oauth2", token_url: `${other.url}/oauth/token`, scopes, client_id_secret: id, client_secret_secret: secret, access_token_secret: "NO_ACCESS_TOKEN" },
        },
        security: [["auth"]],
      });
    const r = await run("petstore.oauth", oauth("OAUTH_CLIENT_ID", "OAUTH_CLIENT_SECRET"), { petId: 5 });
    expect(r).toMatchObject({ state: "completed", outputs: { id: 5 } });
    expect(other.seen.at(-1)).toMatchObject({ method: "POST", url: "/oauth/token", headers: { authorization: `Basic ${Buffer.from("client-1:s3cret").toString("base64")}` } });
    expect(pets.seen.at(-1)!.headers.authorization).toBe("Bearer tok-from-other");

    // Credentials bound to the token host only: the token they buy would go to the API's host, so they are refused.
    const tokens = other.seen.length;
    const refused = await run("petstore.oauth-token-host-only", oauth("TOKEN_HOST_ONLY_ID", "TOKEN_HOST_ONLY_SECRET"), { petId: 5 });
    expect(refused).toMatchObject({ state: "failed", error: { code: "egress_denied", details: { secret: "TOKEN_HOST_ONLY_ID", host: pets.host } } });
    expect(other.seen.length).toBe(tokens);

    // With allowed_hosts written out, the token URL's host must be among them (other scopes: a token not yet cached).
    const narrowed = await run("petstore.oauth-narrowed", oauth("OAUTH_CLIENT_ID", "OAUTH_CLIENT_SECRET", ["write"]), { petId: 5 }, { allowed_hosts: [pets.host] });
    expect(narrowed).toMatchObject({ state: "failed", error: { code: "egress_denied", details: { host: other.host } } });
    expect(narrowed.error.message).toContain("the OAuth 2 token URL goes to");
    expect(other.seen.length).toBe(tokens);
    const widened = await run("petstore.oauth-widened", oauth("OAUTH_CLIENT_ID", "OAUTH_CLIENT_SECRET", ["write"]), { petId: 5 }, { allowed_hosts: [pets.host, other.host] });
    expect(widened).toMatchObject({ state: "completed", outputs: { id: 5 } });
    expect(other.seen.length).toBe(tokens + 1);
  });

  it("applies nodefabric.http: base_url over the server, allowed_hosts, max_response_bytes", async () => {
    const moved = await run("petstore.moved", getPet({ server: { url: "https://petstore.invalid/v3" } }), { petId: 8 }, { base_url: `${pets.url}/v3` });
    expect(moved).toMatchObject({ state: "completed", outputs: { id: 8 } });
    const narrowed = await run("petstore.narrowed", getPet({ server: { url: `${other.url}/v3` }, security: [] }), { petId: 8 }, { allowed_hosts: [pets.host] });
    expect(narrowed).toMatchObject({ state: "failed", error: { code: "egress_denied", details: { host: other.host } } });
    const big = await run("petstore.big", getPet({ path: "/big", parameters: [] }), {}, { max_response_bytes: 1000 });
    expect(big).toMatchObject({ state: "failed", error: { code: "response_too_large", details: { max_response_bytes: 1000 } } });
  });

  it("refuses a nodefabric.http option that the descriptor replaces, and a bad descriptor, before any request", async () => {
    const before = pets.seen.length;
    const path = await run("petstore.with-path", getPet(), { petId: 1 }, { path: "/other/{petId}" });
    expect(path).toMatchObject({ state: "failed", error: { code: "invalid_configuration", retryable: false, details: { field: "nodefabric.http.path" } } });
    expect(path.error.message).toContain("is not an option of nodefabric.http for a node type with nodefabric.openapi");
    const headers = await run("petstore.with-secret-headers", getPet(), { petId: 1 }, { secret_headers: { authorization: { secret: "PETSTORE_API_KEY" } } });
    expect(headers).toMatchObject({ state: "failed", error: { code: "invalid_configuration", details: { field: "nodefabric.http.secret_headers" } } });
    const broken = await run("petstore.broken", { ...getPet(), response: undefined } as unknown as HttpOperationDescriptor, { petId: 1 });
    expect(broken).toMatchObject({ state: "failed", error: { code: "invalid_configuration", details: { field: "nodefabric.openapi" } } });
    expect(pets.seen.length).toBe(before);
  });
});
