import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";

// What a handler author installs and loads: the built @nodefabric/sdk, its testing harness and the packages they
// bring. None of it may be the fabric: no fastify, no better-sqlite3 (a native build), no Cedar, no module of core.
const run = promisify(execFile);
const sdkDir = fileURLToPath(new URL("..", import.meta.url));
const dist = (p: string) => path.join(sdkDir, "dist", p);
const HEAVY = /[\\/]node_modules[\\/](fastify|better-sqlite3|@cedar-policy|@nodefabric[\\/]core)[\\/]|[\\/]core[\\/](dist|src)[\\/]/;

describe("@nodefabric/sdk stays light", () => {
  let tmp: string;
  beforeAll(() => {
    if (!existsSync(dist("testing/index.js"))) throw new Error("sdk/dist is not built: run `npm run build -w @nodefabric/sdk` first");
    tmp = mkdtempSync(path.join(os.tmpdir(), "sdk-light-"));
  });
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it("loads its entry points and runs a handler without loading any module of the fabric", async () => {
    // A resolve hook notes every ESM module loaded; require.cache holds every CommonJS one (ajv, undici, …).
    const log = path.join(tmp, "resolved.log");
    writeFileSync(
      path.join(tmp, "hooks.mjs"),
      `import { appendFileSync } from "node:fs";\nexport async function resolve(specifier, context, next) {\n  const r = await next(specifier, context);\n  appendFileSync(${JSON.stringify(log)}, r.url + "\\n");\n  return r;\n}\n`,
    );
    writeFileSync(path.join(tmp, "register.mjs"), `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(path.join(tmp, "hooks.mjs")).href)});\n`);
    const script = `
      import { createRequire } from "node:module";
      const sdk = await import(${JSON.stringify(pathToFileURL(dist("index.js")).href)});
      const testing = await import(${JSON.stringify(pathToFileURL(dist("testing/index.js")).href)});
      const echo = sdk.defineAtomic({
        nodeType: { node_type_id: "light.echo", version: "1.0.0", input_schema: { type: "object" }, output_schema: { type: "object" },
                    constraints: { gates: { side_effect_class: "read" } } },
        handler: (inputs) => ({ echoed: inputs }),
      });
      const result = await testing.runHandler(echo, { hi: 1 });
      const report = await testing.checkHandler(echo, { cases: 3 });
      const cjs = Object.keys(createRequire(import.meta.url).cache);
      console.log(JSON.stringify({ state: result.state, outputs: result.outputs, completed: report.completed, cjs }));
    `;
    const file = path.join(tmp, "load.mjs");
    writeFileSync(file, script);
    const { stdout } = await run(process.execPath, ["--import", pathToFileURL(path.join(tmp, "register.mjs")).href, file], { cwd: tmp });
    const seen = JSON.parse(stdout.trim().split("\n").pop()!) as { state: string; outputs: unknown; completed: number; cjs: string[] };
    expect(seen).toMatchObject({ state: "completed", outputs: { echoed: { hi: 1 } }, completed: 3 });

    const esm = readFileSync(log, "utf8").trim().split("\n").map((u) => (u.startsWith("file:") ? fileURLToPath(u) : u));
    const loaded = [...esm, ...seen.cjs];
    // The check can see what was loaded: the SDK's own files, and ajv and undici which it uses.
    expect(loaded.some((f) => f.startsWith(path.join(sdkDir, "dist")))).toBe(true);
    expect(loaded.some((f) => /[\\/]node_modules[\\/]ajv[\\/]/.test(f))).toBe(true);
    expect(loaded.some((f) => /[\\/]node_modules[\\/]undici[\\/]/.test(f))).toBe(true);
    expect(loaded.filter((f) => HEAVY.test(f))).toEqual([]);
  });

  it("its main entry point, what a handler module loads at run time, brings neither Ajv nor undici", async () => {
    const script = `
      import { createRequire } from "node:module";
      const sdk = await import(${JSON.stringify(pathToFileURL(dist("index.js")).href)});
      sdk.defineAtomic({ nodeType: { node_type_id: "light.only", version: "1.0.0" }, handler: () => ({}) });
      const cache = createRequire(import.meta.url).cache;
      console.log(JSON.stringify(Object.keys(cache)));
      // The control: the harness does load them, and the same check sees it.
      await import(${JSON.stringify(pathToFileURL(dist("testing/index.js")).href)});
      console.log(JSON.stringify(Object.keys(cache)));
    `;
    const file = path.join(tmp, "main-only.mjs");
    writeFileSync(file, script);
    const { stdout } = await run(process.execPath, [file], { cwd: tmp });
    const [mainOnly, withHarness] = stdout.trim().split("\n").slice(-2).map((line) => JSON.parse(line) as string[]);
    const ajvOrUndici = (f: string) => /[\\/]node_modules[\\/](ajv|ajv-formats|undici)[\\/]/.test(f);
    expect(mainOnly!.filter((f) => ajvOrUndici(f) || HEAVY.test(f))).toEqual([]);
    expect(withHarness!.some(ajvOrUndici)).toBe(true);
  });

  it("depends on nothing that brings the fabric or a native build, however deep", () => {
    // The install tree of sdk/package.json's dependencies, resolved the way Node resolves them from each package.
    const seen = new Map<string, string>();
    const visit = (name: string, from: string) => {
      let manifestPath: string;
      try {
        manifestPath = createRequire(path.join(from, "package.json")).resolve(`${name}/package.json`);
      } catch {
        // A package whose exports hide package.json: find its folder on the node_modules path instead.
        const dir = require_paths(from).map((p) => path.join(p, name, "package.json")).find((p) => existsSync(p));
        if (!dir) throw new Error(`${name} (a dependency of ${from}) is not installed`);
        manifestPath = dir;
      }
      if (seen.has(manifestPath)) return;
      const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as { name: string; dependencies?: Record<string, string>; scripts?: Record<string, string>; gypfile?: boolean };
      seen.set(manifestPath, manifest.name);
      for (const dep of Object.keys(manifest.dependencies ?? {})) visit(dep, path.dirname(manifestPath));
    };
    const sdkManifest = JSON.parse(readFileSync(path.join(sdkDir, "package.json"), "utf8")) as { dependencies: Record<string, string>; peerDependencies?: object };
    for (const dep of Object.keys(sdkManifest.dependencies)) visit(dep, sdkDir);
    const names = [...new Set(seen.values())];
    expect(names).toEqual(expect.arrayContaining(["@nodefabric/schemas", "ajv", "undici"]));
    expect(names.filter((n) => /^(fastify|better-sqlite3|@nodefabric\/core|@cedar-policy\/.*|bindings|prebuild-install|node-gyp)$/.test(n))).toEqual([]);
    expect(sdkManifest.peerDependencies).toBeUndefined();
    // Nothing in the tree runs an install script (each would need approving, and a native one a toolchain).
    const withScripts = [...seen.keys()].filter((p) => {
      const m = JSON.parse(readFileSync(p, "utf8")) as { scripts?: Record<string, string>; gypfile?: boolean };
      return m.gypfile || ["preinstall", "install", "postinstall"].some((s) => m.scripts?.[s]);
    });
    expect(withScripts).toEqual([]);
  });
});

/** The node_modules folders Node searches from `dir` upwards. */
function require_paths(dir: string): string[] {
  const out: string[] = [];
  for (let d = dir; ; d = path.dirname(d)) {
    out.push(path.join(d, "node_modules"));
    if (path.dirname(d) === d) return out;
  }
}
