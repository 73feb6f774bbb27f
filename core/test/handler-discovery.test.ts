import { describe, it, expect, beforeAll, afterAll } from "vitest";
import path from "node:path";
import { Writable } from "node:stream";
import type { FastifyInstance } from "fastify";
import { validatorFor } from "@nodefabric/schemas";
import { SDK_VERSION } from "@nodefabric/core/sdk";
import { HandlerLoadError, loadHandlers, type FailedHandlerLoad, type LoadedHandlers } from "../src/services/atomic-executor/handler-loader.js";
import { buildAtomicExecutor } from "../src/services/atomic-executor/index.js";
import { fixture, ids, projectWith, quietLogger } from "./support/handler-fixtures.js";


/** Where a linked package of `project` lives, as discovery reports it. */
const linked = (project: string, name: string) => path.join(project, "node_modules", name);

/** One good package among broken ones, as a node_modules folder with a few bad installs looks. */
const MIXED = {
  "@fixture/good-handlers": "good",
  "@fixture/throws-on-import": "throws-on-import",
  "@fixture/bad-schema": "bad-schema",
  "@fixture/bad-handlers-field": "bad-handlers-field",
  "@fixture/old-sdk": "old-sdk",
  "@fixture/half-broken": "half-broken",
  "@fixture/unbuilt": "unbuilt",
  "@fixture/dup-within": "dup-within",
  "fixture-keyword-only": "keyword-only",
  "left-pad-ish": "not-a-handler",
};

describe("discovery skips broken packages and reports each with its reason", () => {
  let project: string;
  let loaded: LoadedHandlers;
  let failedBy: Map<string, FailedHandlerLoad>;

  beforeAll(async () => {
    project = projectWith(MIXED);
    loaded = await loadHandlers({ discover: [project], logger: quietLogger().logger });
    failedBy = new Map(loaded.failed.map((f) => [f.package, f]));
  });

  it("serves the good package, and nothing of the broken ones", () => {
    expect(ids(loaded)).toEqual(["fixture.count@0.1.0", "fixture.greet@1.0.0", "fixture.greet@2.0.0"]);
    // The good module of a package with a broken one is not served either: a package loads whole or not at all.
    expect(loaded.find("fixture.half", "1.0.0")).toBeUndefined();
  });

  it("lists every broken package once, in discovery order, and never the packages that are no handler packages", () => {
    expect(loaded.failed.map((f) => f.package)).toEqual([
      "@fixture/bad-handlers-field",
      "@fixture/bad-schema",
      "@fixture/dup-within",
      "@fixture/half-broken",
      "@fixture/old-sdk",
      "@fixture/throws-on-import",
      "@fixture/unbuilt",
      "fixture-keyword-only",
    ]);
    expect(loaded.warnings).toEqual([]);
  });

  it("a module that throws on import: the module and the error", () => {
    const dir = linked(project, "@fixture/throws-on-import");
    expect(failedBy.get("@fixture/throws-on-import")).toEqual({
      package: "@fixture/throws-on-import",
      version: "1.0.0",
      dir,
      module: path.join(dir, "index.js"),
      reason: `cannot import ${path.join(dir, "index.js")}: WEATHER_API_KEY is not set`,
    });
  });

  it("a schema that does not compile: the node type, the schema and Ajv's reason", () => {
    const f = failedBy.get("@fixture/bad-schema")!;
    expect(f).toMatchObject({
      version: "1.0.0",
      dir: linked(project, "@fixture/bad-schema"),
      module: path.join(linked(project, "@fixture/bad-schema"), "index.js"),
      // Only that node type is skipped; the package would serve any other.
      node_type_id: "fixture.badschema",
      node_type_version: "1.0.0",
    });
    expect(f.reason).toMatch(/^node type fixture\.badschema@1\.0\.0: its input_schema does not compile: schema is invalid: .*type/);
  });

  it("a bad nodefabric.handlers field: what it must be and what it is, without importing anything", () => {
    expect(failedBy.get("@fixture/bad-handlers-field")).toEqual({
      package: "@fixture/bad-handlers-field",
      version: "0.3.0",
      dir: linked(project, "@fixture/bad-handlers-field"),
      reason: `"nodefabric.handlers" in package.json must be a non-empty array of module paths, such as ["./dist/index.js"] (it is "./index.js")`,
    });
  });

  it("an incompatible SDK, a module not built, a node type defined twice in one package, a keyword without the field", () => {
    expect(failedBy.get("@fixture/old-sdk")!.reason).toBe(
      `node type fixture.oldsdk@1.0.0 was made with @nodefabric/sdk 9.0.0, which this executor (SDK ${SDK_VERSION}) cannot run; ` +
        `rebuild the package against @nodefabric/sdk ${SDK_VERSION.replace(/^0\.(\d+)\..*$/, "0.$1.x")}`,
    );
    const unbuilt = linked(project, "@fixture/unbuilt");
    expect(failedBy.get("@fixture/unbuilt")!.reason).toBe(
      `its handler module ./dist/index.js does not exist at ${path.join(unbuilt, "dist/index.js")}; build the package first (npm run build)`,
    );
    const within = linked(project, "@fixture/dup-within");
    expect(failedBy.get("@fixture/dup-within")!.reason).toBe(
      `node type fixture.twice@1.0.0 is defined twice, in ${path.join(within, "index.js")} and ${path.join(within, "again.js")}; each (node_type_id, version) must be defined once`,
    );
    expect(failedBy.get("fixture-keyword-only")!.reason).toBe(
      `its package.json has the keyword "nodefabric-handler" but no "nodefabric": { "handlers": [...] } naming its modules; add it, or name the package with --handlers`,
    );
  });

  it("a package with one broken module among good ones names that module", () => {
    const dir = linked(project, "@fixture/half-broken");
    const f = failedBy.get("@fixture/half-broken")!;
    expect(f).toMatchObject({ version: "2.1.0", dir, module: path.join(dir, "broken.js") });
    expect(f.reason).toMatch(new RegExp(`^cannot import ${path.join(dir, "broken.js").replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: .*no-such-module\\.js`));
  });
});

describe("what still stops the start", () => {
  it("a broken package named with handlers, even when discovery finds good ones", async () => {
    const project = projectWith({ "@fixture/good-handlers": "good", "@fixture/throws-on-import": "throws-on-import" });
    const err = await loadHandlers({ handlers: ["@fixture/throws-on-import"], discover: [project], cwd: project, logger: quietLogger().logger }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HandlerLoadError);
    expect((err as HandlerLoadError).problems).toEqual([
      `cannot import handler module ${path.join(fixture("throws-on-import"), "index.js")} of package @fixture/throws-on-import: WEATHER_API_KEY is not set`,
    ]);
  });

  it("the same node type from two discovered packages, naming both", async () => {
    const project = projectWith({ "@fixture/dup-a": "dup-a", "@fixture/dup-b": "dup-b", "@fixture/good-handlers": "good" });
    const err = await loadHandlers({ discover: [project], logger: quietLogger().logger }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HandlerLoadError);
    expect((err as HandlerLoadError).message).toBe(
      `node type fixture.dup@1.0.0 is defined twice: by package @fixture/dup-a@1.0.0 (${path.join(linked(project, "@fixture/dup-a"), "index.js")}) ` +
        `and by package @fixture/dup-b@2.0.0 (${path.join(linked(project, "@fixture/dup-b"), "index.js")}); ` +
        `each (node_type_id, version) must come from one package (remove one, or give it a new version)`,
    );
  });
});

describe("the executor reports what it could not load", () => {
  let app: FastifyInstance;
  let project: string;
  const logLines: Array<Record<string, any>> = [];

  beforeAll(async () => {
    project = projectWith({ "@fixture/good-handlers": "good", "@fixture/throws-on-import": "throws-on-import", "@fixture/bad-schema": "bad-schema" });
    const handlers = await loadHandlers({ discover: [project], logger: quietLogger().logger });
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split("\n")) if (line.trim()) logLines.push(JSON.parse(line));
        done();
      },
    });
    app = await buildAtomicExecutor({ logger: { level: "warn", stream }, handlers });
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
  });

  it("its health is degraded, with a handlers check naming each failed package and its reason", async () => {
    const res = await app.inject({ method: "GET", url: "/v1/health" });
    expect(res.statusCode).toBe(200);
    const health = res.json();
    expect(validatorFor("health")(health)).toBe(true);
    expect(health.status).toBe("degraded");
    const check = health.checks.find((c: { name: string }) => c.name === "handlers");
    expect(check.status).toBe("degraded");
    expect(check.message).toBe(
      "1 handler package(s) could not be loaded and are not served: @fixture/throws-on-import; " +
        "1 node type(s) could not be loaded and are not served: fixture.badschema@1.0.0 (@fixture/bad-schema)",
    );
    expect(check.details.count).toBe(3);
    expect(check.details.node_types).toContainEqual({ node_type_id: "fixture.greet", version: "1.0.0", package: "@fixture/good-handlers", package_version: "1.2.3" });
    expect(check.details.failed).toHaveLength(2);
    expect(check.details.failed[0]).toMatchObject({
      package: "@fixture/bad-schema",
      node_type_id: "fixture.badschema",
      node_type_version: "1.0.0",
      reason: expect.stringContaining("its input_schema does not compile"),
    });
    // Health names the package's files from node_modules on, never by an absolute path.
    expect(check.details.failed[1]).toEqual({
      package: "@fixture/throws-on-import",
      version: "1.0.0",
      dir: "node_modules/@fixture/throws-on-import",
      module: "node_modules/@fixture/throws-on-import/index.js",
      reason: "cannot import node_modules/@fixture/throws-on-import/index.js: WEATHER_API_KEY is not set",
    });
    expect(JSON.stringify(health)).not.toContain(project);
  });

  it("serves the packages that loaded", async () => {
    const res = await app.inject({
      method: "POST",
      url: "/v1/atomic-node-runs:execute",
      payload: { run_id: "r_disc", node_run_id: "nr_disc", node_type_ref: { node_type_id: "fixture.greet", version: "1.0.0" }, inputs: { name: "Ada" } },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ state: "completed", outputs: { greeting: "hello Ada" } });
    const missing = await app.inject({
      method: "POST",
      url: "/v1/atomic-node-runs:execute",
      payload: { run_id: "r_disc", node_run_id: "nr_disc2", node_type_ref: { node_type_id: "fixture.badschema", version: "1.0.0" }, inputs: {} },
    });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error.code).toBe("unknown_node_type");
    // The answer says why: the node type is defined, but could not load.
    expect(missing.json().error.message).toMatch(/^this executor does not serve fixture\.badschema@1\.0\.0: node type fixture\.badschema@1\.0\.0: its input_schema does not compile/);
  });

  it("logged each failed load once at start, as a warning with the reason", () => {
    const failedLogs = logLines.filter((l) => l.failed_handler_load);
    expect(failedLogs.map((l) => [l.level, l.failed_handler_load.package])).toEqual([
      [40, "@fixture/bad-schema"],
      [40, "@fixture/throws-on-import"],
    ]);
    expect(failedLogs[1].msg).toBe(
      `handler package @fixture/throws-on-import could not be loaded and is not served: cannot import ${path.join(linked(project, "@fixture/throws-on-import"), "index.js")}: WEATHER_API_KEY is not set`,
    );
  });

  it("is ok, with the counts and an empty failed list, when everything loaded", async () => {
    const clean = await buildAtomicExecutor({ logger: false, handlers: await loadHandlers({ handlers: [fixture("good")], logger: quietLogger().logger }) });
    try {
      const check = (await clean.inject({ method: "GET", url: "/v1/health" })).json().checks.find((c: { name: string }) => c.name === "handlers");
      expect(check).toMatchObject({ status: "ok", details: { count: 3, failed: [] } });
      expect(check.message).toBeUndefined();
    } finally {
      await clean.close();
    }
  });
});
