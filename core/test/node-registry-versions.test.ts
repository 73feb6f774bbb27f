import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { validatorFor, type NodeType } from "@nodefabric/schemas";
import { buildNodeRegistry } from "../src/services/node-registry/index.js";
import { buildSelection } from "../src/services/selection/index.js";
import { latestVersions } from "../src/services/selection/catalogue.js";
import { RegistryClient } from "../src/clients/registry-client.js";
import { checkedCall as call, type Res } from "./support/checked-call.js";

// Any version string (issue 10, invariant 7): the registry takes versions that are not semver, and "latest" orders
// semver by semver and the others by publication, each just above the highest semver published before it.
const isNodeType = validatorFor("node_type");
const isVersions = validatorFor("node_type_versions");
const isNodeTypeList = validatorFor("node_type_list");

function tmpDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "nf-versions-"));
}

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: "127.0.0.1", port: 0 });
  const addr = app.server.address();
  return `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
}

function simple(node_type_id: string, version: string, kind: "atomic" | "composite" = "atomic"): NodeType {
  return { node_type_id, version, kind, description: `${node_type_id} at ${version}`, input_schema: { type: "object" } };
}

describe("node registry: any version string", () => {
  let dir: string;
  let app: FastifyInstance;
  let base: string;
  const publish = async (id: string, ...versions: string[]) => {
    for (const v of versions) {
      const r = await call(base, "POST", "/v1/node-types", { node_type: simple(id, v) });
      expect(r.status, `${id}@${v}: ${JSON.stringify(r.body)}`).toBe(200);
      expect(r.body).toEqual(simple(id, v));
      expect(isNodeType(r.body)).toBe(true);
    }
  };
  const latest = async (id: string) => {
    const r = await call(base, "GET", `/v1/node-types/${id}`);
    expect(r.status).toBe(200);
    return r.body.version as string;
  };
  const versions = async (id: string) => {
    const r = await call(base, "GET", `/v1/node-types/${id}/versions`);
    expect(r.status).toBe(200);
    expect(isVersions(r.body)).toBe(true);
    return r.body as string[];
  };

  beforeAll(async () => {
    dir = tmpDir();
    app = await buildNodeRegistry({ logger: false, dbPath: path.join(dir, "registry.db") });
    base = await listen(app);
  });
  afterAll(async () => {
    await app?.close();
  });

  it("publishes v1, 2024-01, latest-beta and 1.0, and gets each back by id and version", async () => {
    await publish("any.version", "v1", "2024-01", "latest-beta", "1.0");
    for (const v of ["v1", "2024-01", "latest-beta", "1.0"]) {
      const g = await call(base, "GET", `/v1/node-types/any.version?version=${encodeURIComponent(v)}`);
      expect(g.status, v).toBe(200);
      expect(g.body).toEqual(simple("any.version", v));
    }
    expect(await versions("any.version")).toEqual(["v1", "2024-01", "latest-beta", "1.0"]);
    expect(await latest("any.version")).toBe("1.0");
    // Publishing the same content again is still a no-op, different content still a conflict.
    expect((await call(base, "POST", "/v1/node-types", { node_type: simple("any.version", "v1") })).status).toBe(200);
    const clash = await call(base, "POST", "/v1/node-types", { node_type: { ...simple("any.version", "v1"), description: "other" } });
    expect(clash.status).toBe(409);
    expect(clash.body.error.code).toBe("node_type_version_conflict");
    expect(await versions("any.version")).toEqual(["v1", "2024-01", "latest-beta", "1.0"]);
  });

  it("takes '+' and ':' in a version, percent-encoded or not in the query", async () => {
    await publish("any.plus", "rev:7+build.1");
    expect((await call(base, "GET", "/v1/node-types/any.plus?version=rev%3A7%2Bbuild.1")).body.version).toBe("rev:7+build.1");
    expect((await call(base, "GET", "/v1/node-types/any.plus?version=rev:7%2Bbuild.1")).status).toBe(200);
  });

  it("refuses with 400 a version that is not safe as an id", async () => {
    for (const version of [" 1.0.0", "1.0.0 ", "v 1", "a/b", "x@y", ".1", "-1", "é", "1?2", "a".repeat(65)]) {
      const r = await call(base, "POST", "/v1/node-types", { node_type: simple("bad.version", version) });
      expect(r.status, JSON.stringify(version)).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
      expect(r.body.error.details.errors).toContainEqual(expect.objectContaining({ path: "/node_type/version" }));
    }
    expect((await call(base, "GET", "/v1/node-types/bad.version")).status).toBe(404);
  });

  it("answers the highest semver while only semver versions are published", async () => {
    await publish("any.semver", "1.10.0", "1.9.0", "1.10.0-rc.1", "2.0.0-beta");
    expect(await latest("any.semver")).toBe("2.0.0-beta");
    expect(await versions("any.semver")).toEqual(["1.9.0", "1.10.0-rc.1", "1.10.0", "2.0.0-beta"]);
  });

  it("ranks a non-semver version above the semver versions published before it; a later higher semver wins again", async () => {
    await publish("any.mixed", "2.0.0", "v1");
    expect(await latest("any.mixed")).toBe("v1");
    await publish("any.mixed", "1.0.1");
    expect(await latest("any.mixed")).toBe("v1");
    expect(await versions("any.mixed")).toEqual(["1.0.1", "2.0.0", "v1"]);
    await publish("any.mixed", "3.0.0");
    expect(await latest("any.mixed")).toBe("3.0.0");
    await publish("any.mixed", "2024-01");
    expect(await latest("any.mixed")).toBe("2024-01");
    expect(await versions("any.mixed")).toEqual(["1.0.1", "2.0.0", "v1", "3.0.0", "2024-01"]);

    await publish("any.early", "2024-01", "1.0.0");
    expect(await latest("any.early")).toBe("1.0.0");
    expect(await versions("any.early")).toEqual(["2024-01", "1.0.0"]);
  });

  it("lists available versions in that order for an unknown version", async () => {
    const r = await call(base, "GET", "/v1/node-types/any.mixed?version=v9");
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe("node_type_not_found");
    expect(r.body.error.details.available_versions).toEqual(["1.0.1", "2.0.0", "v1", "3.0.0", "2024-01"]);
  });

  it("lists and pages through non-semver versions in the same order", async () => {
    const expected = ["1.0.1", "2.0.0", "v1", "3.0.0", "2024-01"].map((v) => `any.mixed@${v}`);
    const seen: string[] = [];
    let token: string | undefined;
    do {
      const r: Res = await call(base, "GET", `/v1/node-types?q=any.mixed&limit=1${token ? `&page_token=${token}` : ""}`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(isNodeTypeList(r.body)).toBe(true);
      seen.push(...r.body.map((t: NodeType) => `${t.node_type_id}@${t.version}`));
      const next = r.headers["x-next-page-token"];
      token = typeof next === "string" ? next : undefined;
    } while (token);
    expect(seen).toEqual(expected);
  });

  it("refuses a page token naming a version that is not safe as an id", async () => {
    const forged = Buffer.from(JSON.stringify(["any.mixed", "not a version"])).toString("base64url");
    const r = await call(base, "GET", `/v1/node-types?page_token=${forged}`);
    expect(r.status).toBe(400);
    expect(r.body.error.details.errors[0].path).toBe("/page_token");
  });

  it("gives RegistryClient the same latest and versions", async () => {
    const client = new RegistryClient(base);
    try {
      expect((await client.get("any.mixed")).version).toBe("2024-01");
      expect((await client.get("any.mixed", "v1")).version).toBe("v1");
      expect(await client.versions("any.mixed")).toEqual(["1.0.1", "2.0.0", "v1", "3.0.0", "2024-01"]);
    } finally {
      await client.close();
    }
  });

  it("keeps the order after a restart on the same file", async () => {
    await app.close();
    app = await buildNodeRegistry({ logger: false, dbPath: path.join(dir, "registry.db") });
    base = await listen(app);
    expect(await versions("any.mixed")).toEqual(["1.0.1", "2.0.0", "v1", "3.0.0", "2024-01"]);
    expect(await latest("any.mixed")).toBe("2024-01");
    await publish("any.mixed", "1.5.0");
    expect(await latest("any.mixed")).toBe("2024-01");
  });
});

describe("selection: the latest version of each node type, under the same rule", () => {
  it("keeps the latest of each id from a list in version order or in publication order", () => {
    const nt = (v: string) => simple("sel.t", v);
    // The registry's listing: version order.
    expect(latestVersions(["1.0.1", "2.0.0", "v1"].map(nt)).map((t) => t.version)).toEqual(["v1"]);
    // An in-process source: publication order.
    expect(latestVersions(["2.0.0", "v1", "1.0.1"].map(nt)).map((t) => t.version)).toEqual(["v1"]);
    expect(latestVersions(["v1", "2.0.0", "1.0.1"].map(nt)).map((t) => t.version)).toEqual(["2.0.0"]);
    expect(latestVersions(["2024-01", "2024-02"].map(nt)).map((t) => t.version)).toEqual(["2024-02"]);
    expect(latestVersions(["1.2.0", "1.10.0", "1.9.0"].map(nt)).map((t) => t.version)).toEqual(["1.10.0"]);
  });

  it("offers the registry's latest version as the candidate, a non-semver one included", async () => {
    const dir = tmpDir();
    const registry = await buildNodeRegistry({ logger: false, dbPath: path.join(dir, "registry.db") });
    const registryBase = await listen(registry);
    const selection = await buildSelection({ logger: false, dbPath: path.join(dir, "selection.db"), registryUrl: registryBase, cacheTtlMs: 60_000 });
    const base = await listen(selection);
    try {
      const weather = (v: string): NodeType => ({ ...simple("weather.now", v), description: "Current weather conditions for a city" });
      for (const v of ["2.0.0", "v1", "1.0.1"]) expect((await call(registryBase, "POST", "/v1/node-types", { node_type: weather(v) })).status).toBe(200);
      const r = await call(base, "POST", "/v1/candidate-sets", { subtask_spec: { subtask_id: "st-1", goal: "current weather in Paris" } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.candidates[0].node_type_ref).toEqual({ node_type_id: "weather.now", version: "v1" });
    } finally {
      await selection.close();
      await registry.close();
    }
  });
});
