import { describe, it, expect, afterEach } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { definePlugin, isPlugin, PLUGIN_BRAND } from "../src/plugin.js";
import { loadPlugins, PluginLoadError, storesFor } from "../src/plugin-loader.js";
import { ConfigError, loadConfig } from "../src/config.js";
import { startFabric, type RunningFabric } from "../src/fabric.js";
import { loadHandlers } from "../src/services/atomic-executor/handler-loader.js";

const fixtures = fileURLToPath(new URL("./fixtures/plugin-packages/", import.meta.url));
const fixture = (name: string) => path.join(fixtures, name);

/** A project folder whose node_modules links the named fixture packages. */
function projectWith(packages: Record<string, string>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "nf-plugin-project-"));
  for (const [name, fixtureName] of Object.entries(packages)) {
    const dest = path.join(root, "node_modules", name);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.symlinkSync(fixture(fixtureName), dest, "dir");
  }
  return root;
}

const failure = async (p: Promise<unknown>): Promise<Error> => {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error("expected a failure");
};

describe("definePlugin", () => {
  it("brands the definition with Symbol.for(\"nodefabric.plugin\") and freezes it", () => {
    const p = definePlugin({ name: "x", version: "1.0.0", commands: [] });
    expect(PLUGIN_BRAND).toBe(Symbol.for("nodefabric.plugin"));
    expect(isPlugin(p)).toBe(true);
    expect(Object.isFrozen(p)).toBe(true);
    expect(Object.keys(p)).toEqual(["name", "version", "commands"]);
    expect(isPlugin({ name: "x" })).toBe(false);
  });

  it("refuses a bad shape at once, naming the field", () => {
    expect(() => definePlugin({ name: "" })).toThrow(/`name` must be a non-empty string/);
    expect(() => definePlugin({ name: "s", stores: { schemes: [] } as never })).toThrow(/stores\.schemes` must be a non-empty array/);
    expect(() => definePlugin({ name: "s", stores: { schemes: ["Postgres:"], runs: () => undefined as never } })).toThrow(/holds "Postgres:"/);
    expect(() => definePlugin({ name: "s", stores: { schemes: ["pg"] } })).toThrow(/gives no factory/);
    expect(() => definePlugin({ name: "s", services: [{ service: "gateway" as never, plugin: async () => undefined }] })).toThrow(/services\[0\]\.service` is "gateway": it must be one of run-gateway, /);
    expect(() => definePlugin({ name: "s", commands: ["x" as never] })).toThrow(/commands\[0\]` must be a function/);
    expect(() => definePlugin({ name: "s", route: 1 } as never)).toThrow(/unknown field `route`/);
  });
});

describe("loading plugins", () => {
  it("loads a plugin package named by path, with its stores, services and commands", async () => {
    const [p, ...rest] = await loadPlugins({ plugins: [fixture("memtest")], warn: () => undefined });
    expect(rest).toEqual([]);
    expect(p!.source).toBe("@fixture/plugin-memtest");
    expect(p!.definition).toMatchObject({ name: "memtest", version: "1.2.3", stores: { schemes: ["memtest"] } });
    expect(p!.definition.services?.map((s) => s.service)).toEqual(["run-gateway"]);
    expect(p!.definition.commands).toHaveLength(1);
  });

  it("loads a plugin package named by its package name, from the working directory", async () => {
    const project = projectWith({ "@fixture/plugin-memtest": "memtest" });
    const loaded = await loadPlugins({ plugins: ["@fixture/plugin-memtest"], cwd: project });
    expect(loaded.map((p) => p.definition.name)).toEqual(["memtest"]);
  });

  it("stops on a named plugin that cannot be found, fails to import, exports no definition or has a bad shape", async () => {
    const cases: Array<[string, RegExp]> = [
      ["@fixture/nowhere", /^plugin @fixture\/nowhere cannot be found from .*; install it there \(npm install @fixture\/nowhere\) or give a path to it$/],
      ["./no/such/dir", /^plugin \.\/no\/such\/dir: the path does not exist \(resolved to /],
      [fixture("throws-on-import"), /^plugin .*throws-on-import: importing .*index\.js failed: the plugin fixture refuses to load$/],
      [fixture("not-a-plugin"), /^plugin .*not-a-plugin: .*index\.js does not default-export a plugin made with definePlugin from @nodefabric\/core/],
      [fixture("bad-shape"), /^plugin .*bad-shape: its definition is not valid: `services\[0\]\.service` is "no-such-service"/],
    ];
    for (const [entry, message] of cases) {
      const err = await failure(loadPlugins({ plugins: [entry], cwd: fixtures }));
      expect(err, entry).toBeInstanceOf(PluginLoadError);
      expect(err.message, entry).toMatch(message);
    }
  });

  it("refuses two plugins serving one store scheme, naming both", async () => {
    const err = await failure(loadPlugins({ plugins: [fixture("memtest"), fixture("memtest-clash")] }));
    expect(err).toBeInstanceOf(PluginLoadError);
    expect(err.message).toBe("plugins memtest (@fixture/plugin-memtest) and memtest-clash (@fixture/plugin-memtest-clash) both serve the store scheme memtest://; remove one of them");
  });

  it("discovery loads plugin packages and skips a broken one with a warning", async () => {
    const project = projectWith({ "@fixture/plugin-memtest": "memtest", "@fixture/plugin-throws": "throws-on-import", "@fixture/not-a-plugin": "not-a-plugin" });
    const warnings: string[] = [];
    const loaded = await loadPlugins({ discover: [project], warn: (m) => warnings.push(m) });
    expect(loaded.map((p) => [p.definition.name, p.discovered]), warnings.join("\n")).toEqual([["memtest", true]]);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/^plugin package @fixture\/not-a-plugin \(.*\) skipped: .* does not default-export a plugin made with definePlugin/);
    expect(warnings[1]).toMatch(/^plugin package @fixture\/plugin-throws \(.*\) skipped: importing .* failed: the plugin fixture refuses to load$/);
  });

  it("handler discovery passes over plugin packages instead of reporting them as broken handler packages", async () => {
    const project = projectWith({ "@fixture/plugin-memtest": "memtest" });
    const warnings: string[] = [];
    const loaded = await loadHandlers({ discover: [project], logger: { info: () => undefined, warn: (_o: object, m?: string) => void warnings.push(m ?? "") } });
    expect(loaded.failed).toEqual([]);
    expect(warnings).toEqual([expect.stringMatching(/found no handler packages/)]);
  });

  it("a store URL picks the plugin serving its scheme, and an unknown scheme lists those available", async () => {
    const loaded = await loadPlugins({ plugins: [fixture("memtest")] });
    expect(storesFor("MemTest://x/y", loaded).plugin.definition.name).toBe("memtest");
    expect(() => storesFor("postgres://u:secret@db/x", loaded)).toThrow(
      "no plugin serves the store scheme postgres:// of postgres://u:***@db/x; schemes available: memtest:// (memtest (@fixture/plugin-memtest))",
    );
    expect(() => storesFor("postgres://db/x", [])).toThrow(/no plugin with stores is loaded/);
  });
});

describe("configuration: plugins and store", () => {
  const dir = () => fs.mkdtempSync(path.join(os.tmpdir(), "nf-plugin-config-"));

  it("reads plugins and store from the file, FABRIC_PLUGINS and FABRIC_STORE_URL", () => {
    const d = dir();
    fs.writeFileSync(path.join(d, "fabric.config.json"), JSON.stringify({ plugins: ["a"], store: { url: "memtest://file", pool_size: 4, statement_timeout_ms: 500 } }));
    expect(loadConfig({ cwd: d, env: {} })).toMatchObject({ plugins: ["a"], store: { url: "memtest://file", pool_size: 4, statement_timeout_ms: 500 } });
    const c = loadConfig({ cwd: d, env: { FABRIC_PLUGINS: "b, c", FABRIC_STORE_URL: "postgres://env/db" } });
    expect(c.plugins).toEqual(["b", "c"]);
    expect(c.store).toEqual({ url: "postgres://env/db", pool_size: 4, statement_timeout_ms: 500 });
    expect(loadConfig({ cwd: dir(), env: {} })).toMatchObject({ plugins: [] });
    expect(loadConfig({ cwd: dir(), env: {} }).store).toBeUndefined();
  });

  it("names a bad plugins or store option", () => {
    const bad = (file: object, env: NodeJS.ProcessEnv = {}) => {
      const d = dir();
      fs.writeFileSync(path.join(d, "fabric.config.json"), JSON.stringify(file));
      return () => loadConfig({ cwd: d, env });
    };
    expect(bad({ plugins: "x" })).toThrow(ConfigError);
    expect(bad({ plugins: "x" })).toThrow(/plugins: must be array/);
    expect(bad({ store: { url: "no-scheme" } })).toThrow(/store\.url: must match pattern/);
    expect(bad({ store: { url: "pg://x", pool_size: 0 } })).toThrow(/store\.pool_size: must be >= 1/);
    expect(bad({ store: { url: "pg://x", pool: 3 } })).toThrow(/store\.pool: unknown option/);
    expect(bad({ store: { pool_size: 3 } })).toThrow(/store needs a url/);
    expect(bad({ store: { pool_size: 3 } }, { FABRIC_STORE_URL: "pg://x" })()).toMatchObject({ store: { url: "pg://x", pool_size: 3 } });
  });
});

describe("the fabric and its plugins", () => {
  let fabric: RunningFabric | undefined;
  afterEach(async () => {
    await fabric?.close();
    fabric = undefined;
  });
  const config = (over: object = {}) => ({ ...loadConfig({ cwd: fs.mkdtempSync(path.join(os.tmpdir(), "nf-plugin-fabric-")), env: {} }), port_base: 0, log_level: "silent" as const, ...over });

  it("core never imports a plugin: no file of core/src names plugins/ or a plugin package", () => {
    const src = fileURLToPath(new URL("../src", import.meta.url));
    const files = (fs.readdirSync(src, { recursive: true }) as string[]).filter((f) => f.endsWith(".ts"));
    const bad = files.filter((f) => /from\s+["'](?:[./]*plugins\/|@nodefabric\/plugin-)/.test(fs.readFileSync(path.join(src, f), "utf8")));
    expect(bad).toEqual([]);
  });

  it("builds and runs with no plugin at all: SQLite stores, no plugin routes", async () => {
    fabric = await startFabric(config(), ["run-coordinator", "run-gateway"], { plugins: [] });
    expect(fabric.plugins).toEqual([]);
    const health = await (await fetch(`${fabric.urls["run-coordinator"]}/v1/health`)).json();
    expect(health.checks.find((c: { name: string }) => c.name === "store").details.sqlite_driver).toBeTypeOf("string");
    expect((await fetch(`${fabric.urls["run-gateway"]}/memtest/seen`)).status).toBe(404);
  });

  it("adds a plugin's routes to its service, and opens its run store for a store URL of its scheme", async () => {
    const plugins = await loadPlugins({ plugins: [fixture("memtest")] });
    fabric = await startFabric(config({ store: { url: "memtest://unit", pool_size: 3, statement_timeout_ms: 250 } }), ["run-coordinator", "run-gateway"], { plugins });
    const seen = await (await fetch(`${fabric.urls["run-gateway"]}/memtest/seen`)).json();
    expect(seen).toEqual({ store: "memtest", opened: 1, given: { url: "memtest://unit", poolSize: 3, statementTimeoutMs: 250, service: "run-coordinator" }, runs: [] });
    expect((await fetch(`${fabric.urls["run-coordinator"]}/memtest/seen`)).status).toBe(404);
  });

  it("stops before any service listens when no plugin serves the store URL's scheme", async () => {
    const plugins = await loadPlugins({ plugins: [fixture("memtest")] });
    const err = await failure(startFabric(config({ store: { url: "postgres://db/x" } }), ["run-gateway"], { plugins }));
    expect(err).toBeInstanceOf(PluginLoadError);
    expect(err.message).toMatch(/no plugin serves the store scheme postgres:\/\/ .*schemes available: memtest:\/\//);
  });
});

describe("plugin routes under authentication", () => {
  it("a plugin route states its access: public answers anyone, a scoped one needs a token with the scope, none stops the start", async () => {
    const { buildPdp, TokenVerifier } = await import("../src/index.js");
    const { startTestIssuer } = await import("./support/test-issuer.js");
    const idp = await startTestIssuer();
    const verifier = new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer, clockToleranceSeconds: 60 });
    const app = await buildPdp({ logger: false, auth: { mode: "required", verifier } });
    try {
      await app.register(async (child) => {
        child.get("/plugin/open", { config: { access: "public" } }, async () => ({ open: true }));
        child.get("/plugin/guarded", { config: { access: { method: "GET", path: "/plugin/guarded", scope: "policy:decide" } } }, async () => ({ guarded: true }));
      });
      await app.listen({ host: "127.0.0.1", port: 0 });
      const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
      expect(await (await fetch(`${base}/plugin/open`)).json()).toEqual({ open: true });
      expect((await fetch(`${base}/plugin/guarded`)).status).toBe(401);
      const token = await idp.mint({ aud: "nodefabric-pdp", scope: "policy:decide" });
      const ok = await fetch(`${base}/plugin/guarded`, { headers: { authorization: `Bearer ${token}` } });
      expect(ok.status).toBe(200);
      expect(await ok.json()).toEqual({ guarded: true });
    } finally {
      await app.close();
    }
    const bare = await buildPdp({ logger: false, auth: { mode: "required", verifier } });
    const start = async () => {
      await bare.register(async (child) => {
        child.get("/plugin/unstated", async () => ({}));
      });
      await bare.ready();
    };
    await expect(start()).rejects.toThrow("pdp: the route GET /plugin/unstated has no entry in ROUTE_ACCESS");
    await bare.close().catch(() => undefined);
    await idp.close();
  });
});
