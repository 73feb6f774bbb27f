import { describe, it, expect, beforeAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { defineAtomic } from "@nodefabric/core/sdk";
import { HandlerLoadError, handlersFromDefinitions, loadHandlers, type LoadedHandlers } from "../src/services/atomic-executor/handler-loader.js";
import { fixture, fixtures, ids, projectWith, quietLogger } from "./support/handler-fixtures.js";

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

async function loadError(options: Parameters<typeof loadHandlers>[0]): Promise<HandlerLoadError> {
  const { logger } = quietLogger();
  const err = await loadHandlers({ ...options, logger }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HandlerLoadError);
  return err as HandlerLoadError;
}

describe("loading handler packages", () => {
  it("loads every definition of a package directory once, with its source, and ignores other exports", async () => {
    const { logger } = quietLogger();
    const h = await loadHandlers({ handlers: [fixture("good")], logger });
    expect(ids(h)).toEqual(["fixture.count@0.1.0", "fixture.greet@1.0.0", "fixture.greet@2.0.0"]);
    const greet = h.find("fixture.greet", "1.0.0")!;
    expect(greet.source).toEqual({ package: "@fixture/good-handlers", version: "1.2.3", path: path.join(fixture("good"), "index.js") });
    expect(h.find("fixture.count", "0.1.0")!.source.path).toBe(path.join(fixture("good"), "more.js"));
    expect(h.byId.get("fixture.greet")!.map((d) => d.definition.nodeType.version).sort()).toEqual(["1.0.0", "2.0.0"]);
    expect(h.find("fixture.greet", "3.0.0")).toBeUndefined();
    expect(h.find("fixture.fake", "1.0.0")).toBeUndefined();
    // The schemas compile on first use.
    expect(greet.validateInputs({ name: "Ada" })).toBe(true);
    expect(greet.validateInputs({})).toBe(false);
    expect(greet.definition.nodeType.kind).toBe("atomic");
  });

  it("resolves a package name from cwd, as installed next to the user's config", async () => {
    const project = projectWith({ "@fixture/good-handlers": "good" });
    const { logger } = quietLogger();
    const h = await loadHandlers({ handlers: ["@fixture/good-handlers"], cwd: project, logger });
    expect(ids(h)).toEqual(["fixture.count@0.1.0", "fixture.greet@1.0.0", "fixture.greet@2.0.0"]);
    expect(h.definitions[0].source.package).toBe("@fixture/good-handlers");
  });

  it("loads the first-party demo package by name from the repository root", async () => {
    expect(fs.existsSync(path.join(repoRoot, "handlers/demo/dist/index.js")), "build handlers/demo first (npm run build)").toBe(true);
    const { logger } = quietLogger();
    const h = await loadHandlers({ handlers: ["@nodefabric/handler-demo"], cwd: repoRoot, logger });
    expect(ids(h)).toEqual(["demo.echo@1.0.0", "demo.fail@1.0.0", "demo.sleep@1.0.0", "demo.upstream@1.0.0"]);
    for (const d of h.definitions) {
      expect(d.source.package).toBe("@nodefabric/handler-demo");
      expect(d.definition.nodeType.constraints?.gates?.side_effect_class).toBe("read");
    }
  });

  it("falls back to the main export of a package that only has the nodefabric-handler keyword", async () => {
    const { logger } = quietLogger();
    const h = await loadHandlers({ handlers: [fixture("keyword-only")], logger });
    expect(ids(h)).toEqual(["fixture.shout@1.0.0"]);
    expect(h.definitions[0].source).toEqual({ package: "fixture-keyword-only", version: "0.0.1", path: path.join(fixture("keyword-only"), "main.js") });
  });

  it("loads a single module file given by path, relative to cwd", async () => {
    const { logger } = quietLogger();
    const h = await loadHandlers({ handlers: ["./single-module/handler.js"], cwd: fixtures, logger });
    expect(ids(h)).toEqual(["fixture.single@1.0.0"]);
    expect(h.definitions[0].source).toEqual({ path: path.join(fixture("single-module"), "handler.js") });
  });
});

describe("discovery", () => {
  let project: string;
  beforeAll(() => {
    project = projectWith({
      "discoverable-handlers": "discoverable",
      "@acme/weather-handlers": "scoped-weather",
      "left-pad-ish": "not-a-handler",
    });
  });

  it("finds packages with nodefabric.handlers in node_modules, scoped ones too, and imports nothing else", async () => {
    const { logger, warnings } = quietLogger();
    const h = await loadHandlers({ discover: [project], logger });
    expect(ids(h)).toEqual(["acme.weather.current@1.0.0", "acme.weather.forecast@1.0.0", "fixture.discovered@1.0.0"]);
    expect(h.find("acme.weather.current", "1.0.0")!.source.package).toBe("@acme/weather-handlers");
    // fixture.discovered was branded by hand, as a second copy of the SDK would do it.
    expect(h.find("fixture.discovered", "1.0.0")!.source.package).toBe("discoverable-handlers");
    expect(warnings).toEqual([]);
    expect(h.warnings).toEqual([]);
    expect(h.failed).toEqual([]);
  });

  it("counts the discovered folder itself when it is a handler package", async () => {
    const { logger } = quietLogger();
    const h = await loadHandlers({ discover: [fixture("good")], logger });
    expect(ids(h)).toEqual(["fixture.count@0.1.0", "fixture.greet@1.0.0", "fixture.greet@2.0.0"]);
  });

  it("loads a package named in handlers and found by discovery only once", async () => {
    const { logger } = quietLogger();
    const h = await loadHandlers({ handlers: ["@acme/weather-handlers"], discover: [project], cwd: project, logger });
    expect(ids(h)).toEqual(["acme.weather.current@1.0.0", "acme.weather.forecast@1.0.0", "fixture.discovered@1.0.0"]);
  });

  it("reports, without failing, a discovery that finds no handlers", async () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), "nf-"));
    fs.mkdirSync(path.join(empty, "node_modules", "some-lib"), { recursive: true });
    fs.writeFileSync(path.join(empty, "node_modules", "some-lib", "package.json"), JSON.stringify({ name: "some-lib", version: "1.0.0" }));
    const { logger, warnings } = quietLogger();
    const h = await loadHandlers({ discover: [empty], logger });
    expect(h.definitions).toEqual([]);
    expect(h.warnings).toHaveLength(1);
    expect(h.warnings[0]).toContain(`discovery in ${empty} found no handler packages`);
    expect(warnings).toEqual(h.warnings);
  });

  it("stops on a discover folder that does not exist", async () => {
    const err = await loadError({ discover: ["./no-such-folder"], cwd: fixtures });
    expect(err.message).toBe(`discover directory ./no-such-folder does not exist (resolved to ${path.join(fixtures, "no-such-folder")})`);
  });
});

describe("load-time checks stop the start with a clear message", () => {
  it("a duplicate node_type_id + version names both packages", async () => {
    const err = await loadError({ handlers: [fixture("dup-a"), fixture("dup-b")] });
    expect(err.problems).toHaveLength(1);
    expect(err.message).toContain("node type fixture.dup@1.0.0 is defined twice");
    expect(err.message).toContain(`package @fixture/dup-a@1.0.0 (${path.join(fixture("dup-a"), "index.js")})`);
    expect(err.message).toContain(`package @fixture/dup-b@2.0.0 (${path.join(fixture("dup-b"), "index.js")})`);
  });

  it("a schema that does not compile does not stop the start: that node type is skipped and listed, with Ajv's reason", async () => {
    const { logger } = quietLogger();
    const h = await loadHandlers({ handlers: [fixture("bad-schema"), fixture("good")], logger });
    expect(ids(h)).toEqual(["fixture.count@0.1.0", "fixture.greet@1.0.0", "fixture.greet@2.0.0"]);
    expect(h.find("fixture.badschema", "1.0.0")).toBeUndefined();
    expect(h.failed).toHaveLength(1);
    expect(h.failed[0]).toMatchObject({
      package: "@fixture/bad-schema",
      version: "1.0.0",
      dir: fixture("bad-schema"),
      module: path.join(fixture("bad-schema"), "index.js"),
      node_type_id: "fixture.badschema",
      node_type_version: "1.0.0",
    });
    expect(h.failed[0]!.reason).toMatch(/^node type fixture\.badschema@1\.0\.0: its input_schema does not compile: schema is invalid: .*type/);
  });

  it("an incompatible SDK version names the versions and what to do", async () => {
    const err = await loadError({ handlers: [fixture("old-sdk")] });
    expect(err.message).toContain("node type fixture.oldsdk@1.0.0 from package @fixture/old-sdk@5.0.0");
    expect(err.message).toMatch(/made with @nodefabric\/sdk 9\.0\.0, which this executor \(SDK \d+\.\d+\.\d+\) cannot run; rebuild the package against @nodefabric\/sdk/);
  });

  it("a package that cannot be found names it and where it was looked for", async () => {
    const err = await loadError({ handlers: ["@fixture/does-not-exist"], cwd: fixtures });
    expect(err.message).toBe(
      `handler package @fixture/does-not-exist cannot be found from ${path.resolve(fixtures)}; install it there (npm install @fixture/does-not-exist) or give a path to it`,
    );
  });

  it("a path that does not exist says so", async () => {
    const err = await loadError({ handlers: ["./nowhere/handlers.js"], cwd: fixtures });
    expect(err.message).toBe(`handler path ./nowhere/handlers.js does not exist (resolved to ${path.join(fixtures, "nowhere/handlers.js")})`);
  });

  it("a module that throws on import names the module, the package and the cause", async () => {
    const err = await loadError({ handlers: [fixture("throws-on-import")] });
    expect(err.message).toBe(
      `cannot import handler module ${path.join(fixture("throws-on-import"), "index.js")} of package @fixture/throws-on-import: WEATHER_API_KEY is not set`,
    );
  });

  it("a handler module that was not built says to build it", async () => {
    const err = await loadError({ handlers: [fixture("unbuilt")] });
    expect(err.message).toBe(
      `handler package @fixture/unbuilt: its handler module ./dist/index.js does not exist at ${path.join(fixture("unbuilt"), "dist/index.js")}; build the package first (npm run build)`,
    );
  });

  it("a package that is no handler package says what it lacks", async () => {
    const err = await loadError({ handlers: [fixture("not-a-handler")] });
    expect(err.message).toContain(`left-pad-ish (${fixture("not-a-handler")}) is not a NodeFabric handler package`);
  });

  it("lists every problem at once (and a node type that is only skipped is none of them)", async () => {
    const err = await loadError({ handlers: [fixture("old-sdk"), fixture("bad-schema"), "@fixture/does-not-exist", fixture("good")], cwd: fixtures });
    expect(err.problems).toHaveLength(2);
    expect(err.message.split("\n")[0]).toBe("cannot load handlers:");
    expect(err.message).toContain("fixture.oldsdk@1.0.0");
    expect(err.message).not.toContain("fixture.badschema@1.0.0");
    expect(err.message).toContain("@fixture/does-not-exist");
  });
});

describe("definitions from memory", () => {
  it("get the same checks as loaded packages", () => {
    const ok = defineAtomic({ nodeType: { node_type_id: "mem.ok", version: "1.0.0" }, handler: () => ({}) });
    const h = handlersFromDefinitions([ok]);
    expect(ids(h)).toEqual(["mem.ok@1.0.0"]);

    const bad = defineAtomic({ nodeType: { node_type_id: "mem.bad", version: "1.0.0", output_schema: { type: 7 } }, handler: () => ({}) });
    expect(() => handlersFromDefinitions([bad])).toThrow(/node type mem\.bad@1\.0\.0 from <in-memory definition 0>: its output_schema does not compile/);
    expect(() => handlersFromDefinitions([ok, ok])).not.toThrow();
    const twin = defineAtomic({ nodeType: { node_type_id: "mem.ok", version: "1.0.0" }, handler: () => ({}) });
    expect(() => handlersFromDefinitions([ok, twin])).toThrow(/mem\.ok@1\.0\.0 is defined twice/);
    expect(() => handlersFromDefinitions([{ nope: true } as never])).toThrow(/item 0 is not a node type definition/);
  });

  it("refuses a node type that is not a valid v1 NodeType", () => {
    const def = defineAtomic({ nodeType: { node_type_id: "bad id with spaces", version: "1.0.0" }, handler: () => ({}) });
    expect(() => handlersFromDefinitions([def])).toThrow(/node type bad id with spaces@1\.0\.0 from <in-memory definition 0> is not a valid NodeType: \/node_type_id/);
  });
});
