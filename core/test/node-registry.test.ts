import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { validatorFor } from "@nodefabric/schemas";
import { buildNodeRegistry } from "../src/services/node-registry/index.js";
import { RegistryClient } from "../src/clients/registry-client.js";
import { FabricError } from "../src/http/errors.js";
import { checkedCall } from "./support/checked-call.js";

const isNodeType = validatorFor("node_type");
const isNodeTypeList = validatorFor("node_type_list");
const isVersions = validatorFor("node_type_versions");
const isHealth = validatorFor("health");

const call = checkedCall;

function tmpDb(): string {
  return path.join(fs.mkdtempSync(path.join(os.tmpdir(), "nf-")), "registry.db");
}

async function start(dbPath: string): Promise<{ app: FastifyInstance; base: string }> {
  const app = await buildNodeRegistry({ logger: false, dbPath });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const addr = app.server.address();
  return { app, base: `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}` };
}

function weather(version = "1.0.0", extra: Record<string, unknown> = {}) {
  return {
    node_type_id: "weather.current",
    version,
    kind: "atomic",
    description: "Current weather conditions for a city",
    input_schema: {
      type: "object",
      properties: { city: { type: "string", minLength: 1 }, units: { enum: ["metric", "imperial"] } },
      required: ["city"],
      additionalProperties: false,
    },
    output_schema: {
      type: "object",
      properties: { temperature_c: { type: "number" }, observed_at: { type: "string", format: "date-time" } },
      required: ["temperature_c"],
    },
    constraints: { gates: { side_effect_class: "read" } },
    metadata: { labels: { domain: "weather" } },
    ...extra,
  };
}

function simple(node_type_id: string, version: string, kind: "atomic" | "composite" = "atomic") {
  return { node_type_id, version, kind, description: `${node_type_id} ${version}` };
}

describe("node registry: publishing", () => {
  let app: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    ({ app, base } = await start(tmpDb()));
  });
  afterAll(async () => {
    await app.close();
  });

  it("publishes a node type and answers 200 with the NodeType", async () => {
    const nt = weather();
    const r = await call(base, "POST", "/v1/node-types", { node_type: nt });
    expect(r.status).toBe(200);
    expect(r.body).toEqual(nt);
    expect(isNodeType(r.body)).toBe(true);
    expect(r.headers["content-type"]).toMatch(/^application\/json/);

    const g = await call(base, "GET", "/v1/node-types/weather.current");
    expect(g.status).toBe(200);
    expect(g.body).toEqual(nt);
    expect(isNodeType(g.body)).toBe(true);
  });

  it("answers 200 with the stored version when identical content is published again, whatever the key order", async () => {
    const nt = weather();
    const reordered = Object.fromEntries(Object.entries(nt).reverse());
    (reordered as Record<string, unknown>).input_schema = Object.fromEntries(Object.entries(nt.input_schema).reverse());
    const r = await call(base, "POST", "/v1/node-types", { node_type: reordered, extensions: { "acme.source": "ci" } });
    expect(r.status).toBe(200);
    expect(r.body).toEqual(nt);
  });

  it("refuses different content under a published version with 409 node_type_version_conflict and keeps the original", async () => {
    const changed = weather("1.0.0", { description: "something else" });
    const r = await call(base, "POST", "/v1/node-types", { node_type: changed });
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe("node_type_version_conflict");
    expect(r.body.error.details).toEqual({ node_type_id: "weather.current", version: "1.0.0" });
    const g = await call(base, "GET", "/v1/node-types/weather.current?version=1.0.0");
    expect(g.body.description).toBe("Current weather conditions for a city");
  });

  it("refuses bodies that break the schema with 400 invalid_request listing each violation", async () => {
    const unknownField = await call(base, "POST", "/v1/node-types", { node_type: { ...simple("a.b", "1.0.0"), colour: "red" } });
    expect(unknownField.status).toBe(400);
    expect(unknownField.body.error.code).toBe("invalid_request");
    expect(unknownField.body.error.details.errors).toContainEqual(expect.objectContaining({ path: "/node_type/colour", message: "is not a known field" }));

    const missing = await call(base, "POST", "/v1/node-types", { extensions: {} });
    expect(missing.status).toBe(400);
    expect(missing.body.error.details.errors).toContainEqual(expect.objectContaining({ path: "/node_type", message: "is required" }));

    const badKind = await call(base, "POST", "/v1/node-types", { node_type: { ...simple("a.b", "1.0.0"), kind: "molecular" } });
    expect(badKind.status).toBe(400);
    expect(badKind.body.error.details.errors).toContainEqual(expect.objectContaining({ path: "/node_type/kind" }));

    const badId = await call(base, "POST", "/v1/node-types", { node_type: simple(" spaced id", "1.0.0") });
    expect(badId.status).toBe(400);
    expect(badId.body.error.details.errors).toContainEqual(expect.objectContaining({ path: "/node_type/node_type_id" }));

    const notJson = await call(base, "POST", "/v1/node-types", "{ not json");
    expect(notJson.status).toBe(400);
    expect(notJson.body.error.code).toBe("invalid_request");

    expect((await call(base, "GET", "/v1/node-types/a.b")).status).toBe(404);
  });

  it("refuses an input or output schema that does not compile with 400 naming the schema", async () => {
    const badInput = await call(base, "POST", "/v1/node-types", {
      node_type: { ...simple("broken.input", "1.0.0"), input_schema: { type: "objekt" } },
    });
    expect(badInput.status).toBe(400);
    expect(badInput.body.error.code).toBe("invalid_request");
    expect(badInput.body.error.details.errors).toHaveLength(1);
    expect(badInput.body.error.details.errors[0].path).toBe("/node_type/input_schema");
    expect(badInput.body.error.details.errors[0].message).toMatch(/not a compilable JSON Schema.*type/);

    const badOutput = await call(base, "POST", "/v1/node-types", {
      node_type: { ...simple("broken.output", "1.0.0"), output_schema: { properties: { x: { minimum: "ten" } } } },
    });
    expect(badOutput.status).toBe(400);
    expect(badOutput.body.error.details.errors[0].path).toBe("/node_type/output_schema");

    const badRef = await call(base, "POST", "/v1/node-types", {
      node_type: { ...simple("broken.ref", "1.0.0"), input_schema: { $ref: "https://elsewhere.example/x.json" } },
    });
    expect(badRef.status).toBe(400);
    expect(badRef.body.error.details.errors[0].path).toBe("/node_type/input_schema");

    for (const id of ["broken.input", "broken.output", "broken.ref"]) {
      const g = await call(base, "GET", `/v1/node-types/${id}`);
      expect(g.status).toBe(404);
      expect(g.body.error.code).toBe("node_type_not_found");
    }
  });

  it("accepts schemas with an $id twice (schemas are compiled in isolation)", async () => {
    const withId = { $id: "https://acme.example/in.json", type: "object", properties: { q: { type: "string" } } };
    const a = await call(base, "POST", "/v1/node-types", { node_type: { ...simple("acme.one", "1.0.0"), input_schema: withId } });
    const b = await call(base, "POST", "/v1/node-types", { node_type: { ...simple("acme.two", "1.0.0"), input_schema: withId } });
    expect([a.status, b.status]).toEqual([200, 200]);
  });

  it("refuses a version that is not safe as an id with 400, and takes any other (semver or not)", async () => {
    for (const version of ["1.0.0 ", "v 1", "a/b", "x@y", ".1", "a".repeat(65)]) {
      const r = await call(base, "POST", "/v1/node-types", { node_type: simple("semver.check", version) });
      expect(r.status, version).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
      expect(r.body.error.details.errors).toContainEqual(expect.objectContaining({ path: "/node_type/version" }));
    }
    expect((await call(base, "GET", "/v1/node-types/semver.check")).status).toBe(404);
    for (const version of ["2.0.0-rc.1+build.7", "1.0", "v1.0.0", "latest", "01.0.0"]) {
      const ok = await call(base, "POST", "/v1/node-types", { node_type: simple("semver.check", version) });
      expect(ok.status, version).toBe(200);
    }
  });

  it("answers 413 payload_too_large for a body over 1 MiB and 415 unsupported_media_type for text/plain", async () => {
    const big = { node_type: { ...simple("big.one", "1.0.0"), description: "x".repeat(1024 * 1024 + 10) } };
    const r = await call(base, "POST", "/v1/node-types", big);
    expect(r.status).toBe(413);
    expect(r.body.error.code).toBe("payload_too_large");

    const t = await call(base, "POST", "/v1/node-types", JSON.stringify({ node_type: simple("text.one", "1.0.0") }), { "content-type": "text/plain" });
    expect(t.status).toBe(415);
    expect(t.body.error.code).toBe("unsupported_media_type");
    expect((await call(base, "GET", "/v1/node-types/big.one")).status).toBe(404);
    expect((await call(base, "GET", "/v1/node-types/text.one")).status).toBe(404);
  });

  it("answers 404 route_not_found for an unknown route and 405 method_not_allowed for a wrong method", async () => {
    const r = await call(base, "GET", "/v1/node-kinds");
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe("route_not_found");
    const m = await call(base, "DELETE", "/v1/node-types/weather.current");
    expect(m.status).toBe(405);
    expect(m.body.error.code).toBe("method_not_allowed");
    expect(String(m.headers.allow)).toContain("GET");
    const p = await call(base, "PATCH", "/v1/node-types");
    expect(p.status).toBe(405);
  });

  it("serves ids holding ':' whether or not it is percent-encoded in the path", async () => {
    const nt = simple("acme:billing.invoice-create", "1.0.0");
    expect((await call(base, "POST", "/v1/node-types", { node_type: nt })).status).toBe(200);
    const g = await call(base, "GET", `/v1/node-types/${encodeURIComponent(nt.node_type_id)}`);
    expect(g.status).toBe(200);
    expect(g.body).toEqual(nt);
    const plain = await call(base, "GET", `/v1/node-types/${nt.node_type_id}/versions`);
    expect(plain.status).toBe(200);
    expect(plain.body).toEqual(["1.0.0"]);
  });
});

describe("node registry: versions", () => {
  let app: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    ({ app, base } = await start(tmpDb()));
    // Published out of order on purpose.
    for (const v of ["1.10.0", "1.9.0-beta", "1.2.3", "1.10.0-rc.1", "1.9.0", "1.9.0-beta.2", "1.9.0-alpha"]) {
      const r = await call(base, "POST", "/v1/node-types", { node_type: simple("fx.rate", v) });
      expect(r.status).toBe(200);
    }
  });
  afterAll(async () => {
    await app.close();
  });

  it("returns the highest version by semver when no version is asked for (1.10.0 > 1.10.0-rc.1 > 1.9.0 > 1.9.0-beta)", async () => {
    const r = await call(base, "GET", "/v1/node-types/fx.rate");
    expect(r.status).toBe(200);
    expect(r.body.version).toBe("1.10.0");
    expect(isNodeType(r.body)).toBe(true);
  });

  it("returns an exact version with ?version=", async () => {
    const r = await call(base, "GET", "/v1/node-types/fx.rate?version=1.9.0-beta");
    expect(r.status).toBe(200);
    expect(r.body).toEqual(simple("fx.rate", "1.9.0-beta"));
  });

  it("lists the versions in semver order", async () => {
    const r = await call(base, "GET", "/v1/node-types/fx.rate/versions");
    expect(r.status).toBe(200);
    expect(r.body).toEqual(["1.2.3", "1.9.0-alpha", "1.9.0-beta", "1.9.0-beta.2", "1.9.0", "1.10.0-rc.1", "1.10.0"]);
    expect(isVersions(r.body)).toBe(true);
  });

  it("answers 404 node_type_not_found for an unknown id, and lists available versions for an unknown version", async () => {
    const unknown = await call(base, "GET", "/v1/node-types/fx.nothing");
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("node_type_not_found");
    expect(unknown.body.error.details).toEqual({ node_type_id: "fx.nothing" });

    const v = await call(base, "GET", "/v1/node-types/fx.rate?version=2.0.0");
    expect(v.status).toBe(404);
    expect(v.body.error.code).toBe("node_type_not_found");
    expect(v.body.error.details.available_versions).toEqual(["1.2.3", "1.9.0-alpha", "1.9.0-beta", "1.9.0-beta.2", "1.9.0", "1.10.0-rc.1", "1.10.0"]);

    const versions = await call(base, "GET", "/v1/node-types/fx.nothing/versions");
    expect(versions.status).toBe(404);
    expect(versions.body.error.code).toBe("node_type_not_found");
  });

  it("reaches the same answers through the RegistryClient", async () => {
    const client = new RegistryClient(base);
    try {
      expect((await client.get("fx.rate")).version).toBe("1.10.0");
      expect(await client.versions("fx.rate")).toHaveLength(7);
      const err = await client.get("fx.rate", "9.9.9").catch((e: unknown) => e);
      expect(FabricError.is(err) && err.code).toBe("node_type_not_found");
    } finally {
      await client.close();
    }
  });
});

describe("node registry: listing", () => {
  let app: FastifyInstance;
  let base: string;
  const ids = ["hotel.book", "fx.rate", "weather.current", "Weather.Forecast", "trip.plan", "payments.charge"];
  beforeAll(async () => {
    ({ app, base } = await start(tmpDb()));
    for (const id of ids) {
      const kind = id === "trip.plan" ? "composite" : "atomic";
      for (const v of ["1.0.0", "1.10.0", "1.2.0"]) {
        expect((await call(base, "POST", "/v1/node-types", { node_type: simple(id, v, kind) })).status).toBe(200);
      }
    }
  });
  afterAll(async () => {
    await app.close();
  });

  const expectedOrder = [...ids].sort().flatMap((id) => ["1.0.0", "1.2.0", "1.10.0"].map((v) => `${id}@${v}`));
  const keys = (items: Array<{ node_type_id: string; version: string }>) => items.map((t) => `${t.node_type_id}@${t.version}`);

  it("lists every published version, ordered by id and then semver, as a plain array", async () => {
    const r = await call(base, "GET", "/v1/node-types");
    expect(r.status).toBe(200);
    expect(Array.isArray(r.body)).toBe(true);
    expect(isNodeTypeList(r.body)).toBe(true);
    expect(keys(r.body)).toEqual(expectedOrder);
    expect(r.headers["x-next-page-token"]).toBeUndefined();
  });

  it("filters by q, a case-insensitive substring of the id", async () => {
    const r = await call(base, "GET", "/v1/node-types?q=WEATHER");
    expect(r.status).toBe(200);
    expect(isNodeTypeList(r.body)).toBe(true);
    expect(new Set(r.body.map((t: { node_type_id: string }) => t.node_type_id))).toEqual(new Set(["weather.current", "Weather.Forecast"]));
    expect(r.body).toHaveLength(6);
    const none = await call(base, "GET", "/v1/node-types?q=zzz");
    expect(none.status).toBe(200);
    expect(none.body).toEqual([]);
    // "%" and "_" are plain characters here, not wildcards.
    expect((await call(base, "GET", "/v1/node-types?q=%25")).body).toEqual([]);
    expect((await call(base, "GET", "/v1/node-types?q=_")).body).toEqual([]);
  });

  it("filters by kind, and refuses an unknown kind with 400", async () => {
    const c = await call(base, "GET", "/v1/node-types?kind=composite");
    expect(c.status).toBe(200);
    expect(keys(c.body)).toEqual(["trip.plan@1.0.0", "trip.plan@1.2.0", "trip.plan@1.10.0"]);
    const a = await call(base, "GET", "/v1/node-types?kind=atomic&q=hotel");
    expect(keys(a.body)).toEqual(["hotel.book@1.0.0", "hotel.book@1.2.0", "hotel.book@1.10.0"]);
    const bad = await call(base, "GET", "/v1/node-types?kind=molecular");
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_request");
    expect(bad.body.error.details.errors[0].path).toContain("kind");
  });

  it("refuses a limit outside 1..1000 and unknown query parameters with 400", async () => {
    for (const q of ["limit=0", "limit=1001", "limit=abc", "limit=-5", "limit=2.5", "colour=red"]) {
      const r = await call(base, "GET", `/v1/node-types?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
    }
  });

  it("refuses a page token it did not issue with 400", async () => {
    const forged = Buffer.from(JSON.stringify(["x", "not a version"])).toString("base64url");
    for (const token of ["!!!", "bm90IGpzb24", forged, Buffer.from("{}").toString("base64url")]) {
      const r = await call(base, "GET", `/v1/node-types?page_token=${encodeURIComponent(token)}`);
      expect(r.status, token).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
      expect(r.body.error.details.errors[0].path).toBe("/page_token");
    }
  });

  it("pages with limit and X-Next-Page-Token until the last page, which has no token", async () => {
    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const r: Res = await call(base, "GET", `/v1/node-types?limit=4${token ? `&page_token=${token}` : ""}`);
      expect(r.status).toBe(200);
      expect(isNodeTypeList(r.body)).toBe(true);
      expect(r.body.length).toBeLessThanOrEqual(4);
      seen.push(...keys(r.body));
      const next = r.headers["x-next-page-token"];
      token = typeof next === "string" ? next : undefined;
      pages++;
    } while (token);
    expect(pages).toBe(Math.ceil(expectedOrder.length / 4));
    expect(seen).toEqual(expectedOrder);
  });

  it("keeps pages stable when versions are published between two pages", async () => {
    const first = await call(base, "GET", "/v1/node-types?limit=5&q=o");
    const token = first.headers["x-next-page-token"] as string;
    expect(token).toBeTruthy();
    const lastOfFirst = first.body[first.body.length - 1];
    // One version sorting before the cursor, one after it.
    await call(base, "POST", "/v1/node-types", { node_type: simple("aaa.early.o", "1.0.0") });
    await call(base, "POST", "/v1/node-types", { node_type: simple("zzz.late.o", "1.0.0") });
    const rest: string[] = [];
    let next: string | undefined = token;
    while (next) {
      const r: Res = await call(base, "GET", `/v1/node-types?limit=5&q=o&page_token=${next}`);
      rest.push(...keys(r.body));
      next = r.headers["x-next-page-token"] as string | undefined;
    }
    const firstKeys = keys(first.body);
    expect(rest.some((k) => firstKeys.includes(k))).toBe(false);
    expect(rest).not.toContain("aaa.early.o@1.0.0");
    expect(rest[rest.length - 1]).toBe("zzz.late.o@1.0.0");
    expect(rest[0] > `${lastOfFirst.node_type_id}@`).toBe(true);
  });

  it("follows pages through RegistryClient.listAll", async () => {
    const client = new RegistryClient(base);
    try {
      const all = await client.listAll({ kind: "atomic", limit: 2 });
      expect(all.every((t) => t.kind === "atomic")).toBe(true);
      expect(all.length).toBe(5 * 3 + 2);
    } finally {
      await client.close();
    }
  });
});

describe("node registry: executor directory and health", () => {
  let app: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    ({ app, base } = await start(tmpDb()));
    await call(base, "POST", "/v1/node-types", { node_type: weather() });
    await call(base, "POST", "/v1/node-types", { node_type: simple("fx.rate", "2.1.0") });
    await call(base, "POST", "/v1/node-types", { node_type: simple("trip.plan", "1.0.0", "composite") });
  });
  afterAll(async () => {
    await app.close();
  });

  it("answers /v1/version as the node-registry", async () => {
    const v = await call(base, "GET", "/v1/version");
    expect(v.status).toBe(200);
    expect(v.body.service_name).toBe("node-registry");
    expect(validatorFor("version_info")(v.body)).toBe(true);
  });

  it("reports the store and the atomic node types no executor serves", async () => {
    const r = await call(base, "GET", "/v1/health");
    expect(r.status).toBe(200);
    expect(isHealth(r.body)).toBe(true);
    expect(r.body.status).toBe("degraded");
    expect(r.body.checks).toContainEqual({ name: "store", status: "ok" });
    const unserved = r.body.checks.find((c: { name: string }) => c.name === "unserved_node_types");
    expect(unserved.status).toBe("degraded");
    expect(unserved.details.node_types).toEqual([
      { node_type_id: "fx.rate", version: "2.1.0" },
      { node_type_id: "weather.current", version: "1.0.0" },
    ]);
  });

  it("registers an executor, answers the record with registered_at, and health turns ok once everything is served", async () => {
    const body = {
      endpoint: "http://127.0.0.1:8083",
      kind: "atomic",
      node_types: [{ node_type_id: "weather.current", version: "1.0.0" }],
      extensions: { "nodefabric.handlers": "weather-pkg" },
    };
    const r = await call(base, "PUT", "/v1/executors/ae-1", body);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ executor_instance_id: "ae-1", ...body });
    expect(Date.parse(r.body.registered_at)).not.toBeNaN();

    let h = await call(base, "GET", "/v1/health");
    expect(h.body.checks.find((c: { name: string }) => c.name === "unserved_node_types").details.node_types).toEqual([{ node_type_id: "fx.rate", version: "2.1.0" }]);

    // Re-registering replaces the whole entry (a heartbeat that also changes what it serves).
    const again = await call(base, "PUT", "/v1/executors/ae-1", {
      ...body,
      node_types: [...body.node_types, { node_type_id: "fx.rate", version: "2.1.0" }],
    });
    expect(again.status).toBe(200);
    expect(again.body.node_types).toHaveLength(2);
    h = await call(base, "GET", "/v1/health");
    expect(h.body.status).toBe("ok");
    expect(h.body.checks.find((c: { name: string }) => c.name === "unserved_node_types")).toMatchObject({ status: "ok", details: { node_types: [] } });
  });

  it("lists executors, filtered by the node type (and version) they serve", async () => {
    await call(base, "PUT", "/v1/executors/ce-1", {
      endpoint: "http://127.0.0.1:8085",
      kind: "composite",
      node_types: [{ node_type_id: "trip.plan", version: "1.0.0" }],
    });
    const all = await call(base, "GET", "/v1/executors");
    expect(all.status).toBe(200);
    expect(all.body.map((e: { executor_instance_id: string }) => e.executor_instance_id)).toEqual(["ae-1", "ce-1"]);
    const trip = await call(base, "GET", "/v1/executors?node_type_id=trip.plan");
    expect(trip.body.map((e: { executor_instance_id: string }) => e.executor_instance_id)).toEqual(["ce-1"]);
    expect((await call(base, "GET", "/v1/executors?node_type_id=fx.rate&version=2.1.0")).body).toHaveLength(1);
    expect((await call(base, "GET", "/v1/executors?node_type_id=fx.rate&version=9.0.0")).body).toEqual([]);
    const noId = await call(base, "GET", "/v1/executors?version=2.1.0");
    expect(noId.status).toBe(400);
    expect(noId.body.error.code).toBe("invalid_request");
  });

  it("refuses bad registrations with 400 and changes nothing", async () => {
    const good = { endpoint: "http://127.0.0.1:9999", kind: "atomic", node_types: [] };
    const cases: Array<[string, unknown]> = [
      ["/v1/executors/ae-2", { ...good, endpoint: "not a uri" }],
      ["/v1/executors/ae-2", { ...good, kind: "quantum" }],
      ["/v1/executors/ae-2", { ...good, colour: "red" }],
      ["/v1/executors/ae-2", { kind: "atomic", node_types: [] }],
      ["/v1/executors/ae-2", { ...good, node_types: [{ node_type_id: "x" }] }],
      ["/v1/executors/ae-2", { ...good, extensions: { nonamespace: 1 } }],
      [`/v1/executors/${encodeURIComponent("bad id!")}`, good],
    ];
    for (const [url, body] of cases) {
      const r = await call(base, "PUT", url, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
    }
    const all = await call(base, "GET", "/v1/executors");
    expect(all.body.map((e: { executor_instance_id: string }) => e.executor_instance_id)).toEqual(["ae-1", "ce-1"]);
  });
});

describe("node registry: restart", () => {
  it("reads back node types and executors from the same file after a restart", async () => {
    // The directory of the file does not exist yet: the registry creates it.
    const dbPath = path.join(path.dirname(tmpDb()), "nested", "data", "registry.db");
    const first = await start(dbPath);
    await call(first.base, "POST", "/v1/node-types", { node_type: weather("1.0.0") });
    await call(first.base, "POST", "/v1/node-types", { node_type: weather("1.1.0") });
    await call(first.base, "PUT", "/v1/executors/ae-1", { endpoint: "http://127.0.0.1:8083", kind: "atomic", node_types: [{ node_type_id: "weather.current", version: "1.1.0" }] });
    await first.app.close();

    const second = await start(dbPath);
    try {
      const g = await call(second.base, "GET", "/v1/node-types/weather.current");
      expect(g.status).toBe(200);
      expect(g.body).toEqual(weather("1.1.0"));
      expect((await call(second.base, "GET", "/v1/node-types/weather.current/versions")).body).toEqual(["1.0.0", "1.1.0"]);
      const list = await call(second.base, "GET", "/v1/node-types");
      expect(list.body).toHaveLength(2);
      expect(isNodeTypeList(list.body)).toBe(true);
      // Immutability survives the restart too.
      const conflict = await call(second.base, "POST", "/v1/node-types", { node_type: weather("1.0.0", { description: "changed" }) });
      expect(conflict.status).toBe(409);
      const ex = await call(second.base, "GET", "/v1/executors?node_type_id=weather.current");
      expect(ex.body).toHaveLength(1);
      expect((await call(second.base, "GET", "/v1/health")).body.status).toBe("ok");
    } finally {
      await second.app.close();
    }
  });
});
