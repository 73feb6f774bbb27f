import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { request } from "undici";
import type { FastifyInstance } from "fastify";
import { validatorFor } from "@nodefabric/schemas";
import { createService } from "../src/http/service.js";
import { FabricError } from "../src/http/errors.js";
import { ref } from "../src/http/validation.js";

const isEnvelope = validatorFor("error_envelope");

async function call(base: string, method: string, path: string, body?: string, headers: Record<string, string> = {}) {
  const res = await request(base + path, { method: method as "GET", body, headers });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

describe("the shared HTTP layer", () => {
  let app: FastifyInstance;
  let base: string;
  const waiting: Array<() => void> = [];
  const release = () => waiting.splice(0).forEach((r) => r());

  beforeAll(async () => {
    app = createService({ name: "node-registry", bodyLimit: 2048, maxInFlight: 2, health: () => [{ name: "store", status: "ok" }] });
    app.post("/v1/node-types", { schema: { body: ref("node_type_publish_request") } }, async (req) => req.body);
    app.post("/v1/things/:id(.+)::cancel", async (req) => ({ action: "cancel", id: (req.params as { id: string }).id }));
    app.post("/v1/things/:id(.+)::complete", async (req) => ({ action: "complete", id: (req.params as { id: string }).id }));
    app.get("/v1/boom", async () => {
      throw new Error("secret internals /etc/passwd");
    });
    app.get("/v1/teapot", async () => {
      throw new FabricError("node_type_not_found", "no node type x", { details: { node_type_id: "x" } });
    });
    app.get("/v1/slow", async () => {
      await new Promise<void>((resolve) => waiting.push(resolve));
      return { ok: true };
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    const addr = app.server.address();
    base = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
  });
  afterAll(async () => {
    release();
    await app.close();
  });

  it("answers health with its checks and version with v1", async () => {
    const h = await call(base, "GET", "/v1/health");
    expect(h.status).toBe(200);
    expect(h.body).toMatchObject({ status: "ok", checks: [{ name: "store", status: "ok" }] });
    expect(validatorFor("health")(h.body)).toBe(true);
    const v = await call(base, "GET", "/v1/version");
    expect(v.status).toBe(200);
    expect(v.body.service_name).toBe("node-registry");
    expect(v.body.supported_api_versions).toContain("v1");
    expect(validatorFor("version_info")(v.body)).toBe(true);
  });

  it("answers an unknown route with 404 route_not_found in an ErrorEnvelope", async () => {
    const r = await call(base, "GET", "/v1/nothing-here");
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe("route_not_found");
    expect(isEnvelope(r.body)).toBe(true);
  });

  it("answers a known path with the wrong method with 405 and Allow", async () => {
    const r = await call(base, "DELETE", "/v1/node-types");
    expect(r.status).toBe(405);
    expect(r.body.error.code).toBe("method_not_allowed");
    expect(r.headers.allow).toBe("POST");
    expect(isEnvelope(r.body)).toBe(true);
  });

  it("routes colon actions on an id, ids with colons included", async () => {
    expect((await call(base, "POST", "/v1/things/t1:cancel")).body).toEqual({ action: "cancel", id: "t1" });
    expect((await call(base, "POST", "/v1/things/t1:complete")).body).toEqual({ action: "complete", id: "t1" });
    expect((await call(base, "POST", "/v1/things/order:42:cancel")).body).toEqual({ action: "cancel", id: "order:42" });
    const unknown = await call(base, "POST", "/v1/things/t1:explode");
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("route_not_found");
  });

  it("refuses malformed JSON with 400 invalid_request", async () => {
    const r = await call(base, "POST", "/v1/node-types", "{not json", { "content-type": "application/json" });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("invalid_request");
    expect(r.body.error.message).toMatch(/not valid JSON/);
  });

  it("refuses prototype poisoning with 400", async () => {
    const r = await call(base, "POST", "/v1/node-types", '{"__proto__": {"x": 1}}', { "content-type": "application/json" });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("invalid_request");
  });

  it("refuses a body that breaks the schema with details.errors naming each path", async () => {
    const r = await call(base, "POST", "/v1/node-types", JSON.stringify({ node_type: { node_type_id: "a", kind: "atomic", surprise: 1 } }), {
      "content-type": "application/json",
    });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("invalid_request");
    const paths = r.body.error.details.errors.map((e: { path: string }) => e.path);
    expect(paths).toContain("/node_type/version");
    expect(paths).toContain("/node_type/surprise");
    expect(isEnvelope(r.body)).toBe(true);
  });

  it("treats an empty JSON body as no body (and the schema then refuses it)", async () => {
    const r = await call(base, "POST", "/v1/node-types", "", { "content-type": "application/json" });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("invalid_request");
  });

  it("refuses a body over the limit with 413 payload_too_large", async () => {
    const big = JSON.stringify({ node_type: { node_type_id: "a", version: "1.0.0", kind: "atomic", description: "x".repeat(5000) } });
    const r = await call(base, "POST", "/v1/node-types", big, { "content-type": "application/json" });
    expect(r.status).toBe(413);
    expect(r.body.error.code).toBe("payload_too_large");
  });

  it("refuses a body that is not JSON with 415 unsupported_media_type", async () => {
    const r = await call(base, "POST", "/v1/node-types", "hello", { "content-type": "text/plain" });
    expect(r.status).toBe(415);
    expect(r.body.error.code).toBe("unsupported_media_type");
  });

  it("turns a FabricError into its status and envelope", async () => {
    const r = await call(base, "GET", "/v1/teapot");
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ error: { code: "node_type_not_found", message: "no node type x", details: { node_type_id: "x" } } });
  });

  it("answers an unexpected failure with 500 internal_error and no internals", async () => {
    const r = await call(base, "GET", "/v1/boom");
    expect(r.status).toBe(500);
    expect(r.body.error.code).toBe("internal_error");
    expect(JSON.stringify(r.body)).not.toMatch(/passwd|stack|at /);
  });

  it("sheds load past maxInFlight with 503 and Retry-After, but still answers health", async () => {
    const first = call(base, "GET", "/v1/slow");
    const second = call(base, "GET", "/v1/slow");
    await new Promise((r) => setTimeout(r, 100));
    const shed = await call(base, "GET", "/v1/teapot");
    expect(shed.status).toBe(503);
    expect(shed.body.error.code).toBe("unavailable");
    expect(shed.headers["retry-after"]).toBe("1");
    expect((await call(base, "GET", "/v1/health")).status).toBe(200);
    release();
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    expect((await call(base, "GET", "/v1/teapot")).status).toBe(404);
  });
});
