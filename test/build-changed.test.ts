/**
 * scripts/build-changed.mjs, the build `npm test` starts with, on a small workspace of its own in a temporary folder:
 * real files, real build processes. Its packages mirror the repository's cases: `base` has inputs outside src/ (as
 * the schemas have v1/), `lib` depends on it, and three apps read `lib` the three ways a build can: as declarations
 * only (a peer dependency, external to the bundle), its whole built code (a devDependency the bundle takes in), and
 * its sources (a tsconfig path, as the handlers read the SDK). The tests run in order, each from the state the one
 * before left: what a stale or missing build must never be is used.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync, appendFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repo } from "./readme-blocks.js";

const exec = promisify(execFile);
const SCRIPT = path.join(repo, "scripts/build-changed.mjs");
const PACKAGES = ["@fake/base", "@fake/lib", "@fake/app-alone", "@fake/app-bundle", "@fake/app-decl", "@fake/app-paths"];

let root: string;

/**
 * The fake build every package runs: copies src/ to dist/ (emptied first, as tsup's `clean` does). A source holding
 * BUILD_FAILS fails it after it wrote into the old dist/, which it does not empty: only build-changed can have
 * removed that dist/'s stamp.
 */
const COPY = `
import { appendFileSync, cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
const name = JSON.parse(readFileSync("package.json", "utf8")).name;
appendFileSync(process.env.BUILDS_LOG, name + "\\n");
for (const f of readdirSync("src")) {
  if (!readFileSync("src/" + f, "utf8").includes("BUILD_FAILS")) continue;
  mkdirSync("dist", { recursive: true });
  writeFileSync("dist/partial.js", "");
  console.error(name + ": src/" + f + " does not compile");
  process.exit(2);
}
rmSync("dist", { recursive: true, force: true });
mkdirSync("dist");
for (const f of readdirSync("src")) cpSync("src/" + f, "dist/" + f);
`;

function write(rel: string, text: string) {
  mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
  writeFileSync(path.join(root, rel), text);
}

function pkg(dir: string, name: string, fields: Record<string, unknown> = {}) {
  const up = dir.split("/").map(() => "..").join("/");
  write(`${dir}/package.json`, JSON.stringify({ name, version: "1.0.0", scripts: { build: `node ${up}/tools/copy.mjs` }, ...fields }, null, 2));
}

interface Run {
  code: number;
  output: string;
  /** Each package's line: "built", "up to date" or "FAILED". */
  status: Record<string, string>;
  /** The packages whose build ran, in order. */
  builds: string[];
}

async function build(args: string[] = [], env: Record<string, string> = {}): Promise<Run> {
  const log = path.join(root, "builds.log");
  writeFileSync(log, "");
  const { FABRIC_BUILD_ALL: _, ...inherited } = process.env;
  let code = 0;
  let output: string;
  try {
    const r = await exec(process.execPath, [SCRIPT, ...args], { cwd: root, env: { ...inherited, BUILDS_LOG: log, ...env } });
    output = r.stdout + r.stderr;
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    code = e.code;
    output = e.stdout + e.stderr;
  }
  const status: Record<string, string> = {};
  for (const m of output.matchAll(/^build: (\S+)\s+(built|up to date|FAILED)/gm)) status[m[1]!] = m[2]!;
  return { code, output, status, builds: readFileSync(log, "utf8").split("\n").filter(Boolean) };
}

const stamp = (dir: string) => path.join(root, dir, "dist/.build-stamp");
const built = (r: Run) => PACKAGES.filter((p) => r.status[p] === "built");

beforeAll(() => {
  root = mkdtempSync(path.join(tmpdir(), "nf-build-changed-"));
  write("package.json", JSON.stringify({ name: "fake", private: true, workspaces: ["base", "lib", "apps/*"] }));
  write("tsconfig.json", JSON.stringify({ compilerOptions: { strict: true } }));
  write("tools/copy.mjs", COPY);

  pkg("base", "@fake/base", { exports: { ".": { types: "./dist/index.d.ts", import: "./dist/index.js" }, "./v1/*": "./v1/*" } });
  write("base/src/index.js", "export const version = 1;\n");
  write("base/src/index.d.ts", "export declare const version: number;\n");
  write("base/scripts/generate.mjs", "// writes src/ from v1/\n");
  write("base/v1/schema.json", '{ "type": "object" }\n');

  pkg("lib", "@fake/lib", { dependencies: { "@fake/base": "1.0.0" } });
  write("lib/src/index.js", 'import { version } from "@fake/base";\nexport const greet = (name) => `hello ${name} (v${version})`;\n');
  write("lib/src/index.d.ts", "export declare function greet(name: string): string;\n");

  pkg("apps/decl", "@fake/app-decl", { peerDependencies: { "@fake/lib": "1.0.0" } });
  write("apps/decl/src/index.js", 'export { greet } from "@fake/lib";\n');
  pkg("apps/bundle", "@fake/app-bundle", { devDependencies: { "@fake/lib": "1.0.0" } });
  write("apps/bundle/src/index.js", 'import { greet } from "@fake/lib";\nexport const hi = greet("bundle");\n');
  pkg("apps/paths", "@fake/app-paths", { peerDependencies: { "@fake/lib": "1.0.0" } });
  write("apps/paths/tsconfig.json", JSON.stringify({ extends: "../../tsconfig.json", compilerOptions: { paths: { "@fake/lib": ["../../lib/src/index.js"] } } }));
  write("apps/paths/src/index.js", 'export { greet } from "@fake/lib";\n');
  pkg("apps/alone", "@fake/app-alone");
  write("apps/alone/src/index.js", "export const alone = true;\n");
  write("apps/alone/test/alone.test.js", "// not read by the build\n");
});

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

describe("build-changed", () => {
  it("builds every package on the first run, each after the packages it depends on, and stamps each", async () => {
    const r = await build();
    expect(r.code, r.output).toBe(0);
    expect(built(r)).toEqual(PACKAGES);
    expect(r.builds.indexOf("@fake/base")).toBeLessThan(r.builds.indexOf("@fake/lib"));
    for (const app of ["@fake/app-alone", "@fake/app-bundle", "@fake/app-decl", "@fake/app-paths"]) expect(r.builds.indexOf(app)).toBeGreaterThan(r.builds.indexOf("@fake/lib"));
    for (const dir of ["base", "lib", "apps/alone", "apps/bundle", "apps/decl", "apps/paths"]) expect(existsSync(stamp(dir))).toBe(true);
    expect(r.output).toMatch(/^build: 6 built, 0 up to date, in \d+\.\d s/m);
  });

  it("builds nothing when nothing changed", async () => {
    const r = await build();
    expect(r.code, r.output).toBe(0);
    expect(r.builds).toEqual([]);
    for (const p of PACKAGES) expect(r.status[p]).toBe("up to date");
    expect(r.output).toMatch(/^build: 0 built, 6 up to date/m);
  });

  it("builds nothing for a file touched but not changed, or a test changed", async () => {
    const later = new Date(Date.now() + 60_000);
    utimesSync(path.join(root, "lib/src/index.js"), later, later);
    write("apps/alone/test/alone.test.js", "// still not read by the build\n");
    const r = await build();
    expect(r.builds).toEqual([]);
  });

  it("a change inside lib's code rebuilds lib and the apps that read its code or its sources, not the one that reads its declarations", async () => {
    appendFileSync(path.join(root, "lib/src/index.js"), "export const bye = (name) => `bye ${name}`;\n");
    const r = await build();
    expect(r.code, r.output).toBe(0);
    expect(r.builds).toEqual(["@fake/lib", "@fake/app-bundle", "@fake/app-paths"]);
    expect(r.output).toMatch(/build: @fake\/lib\s+built in \d+\.\d s \(src\/index\.js changed\)/);
    expect(r.output).toMatch(/build: @fake\/app-bundle\s+built in \d+\.\d s \(what it reads of @fake\/lib changed\)/);
    expect(r.status["@fake/app-decl"]).toBe("up to date");
    expect(readFileSync(path.join(root, "apps/bundle/dist/index.js"), "utf8")).toContain("greet");
  });

  it("a change to lib's declarations rebuilds every app that reads lib", async () => {
    appendFileSync(path.join(root, "lib/src/index.d.ts"), "export declare function bye(name: string): string;\n");
    const r = await build();
    expect(r.builds).toEqual(["@fake/lib", "@fake/app-bundle", "@fake/app-decl", "@fake/app-paths"]);
    expect(r.status["@fake/base"]).toBe("up to date");
    expect(r.status["@fake/app-alone"]).toBe("up to date");
  });

  it("a change to an input outside src/ rebuilds its package; lib, which reads base's declarations only, stays", async () => {
    write("base/scripts/generate.mjs", "// writes src/ from v1/, and sorts them\n");
    const r = await build();
    expect(r.output).toMatch(/build: @fake\/base\s+built in \d+\.\d s \(scripts\/generate\.mjs changed\)/);
    expect(r.status["@fake/lib"]).toBe("up to date");
    // The apps reach base through lib without depending on it, so a bundle of theirs would take base in: they rebuild.
    expect(r.builds).toEqual(["@fake/base", "@fake/app-bundle", "@fake/app-decl", "@fake/app-paths"]);
  });

  it("a change to a file base exports from outside dist/ (as the schemas export v1/) rebuilds lib too", async () => {
    write("base/v1/schema.json", '{ "type": "object", "required": ["a"] }\n');
    const r = await build();
    expect(r.builds).toEqual(["@fake/base", "@fake/lib", "@fake/app-bundle", "@fake/app-decl", "@fake/app-paths"]);
    expect(r.output).toMatch(/build: @fake\/lib\s+built in \d+\.\d s \(what it reads of @fake\/base changed\)/);
  });

  it("a change to a file the build script names outside the package rebuilds every package that runs it", async () => {
    appendFileSync(path.join(root, "tools/copy.mjs"), "// a new line of the build tool\n");
    const r = await build();
    expect(r.builds).toEqual(PACKAGES);
  });

  it("a failed build exits non-zero, stops the run, leaves no stamp, and is built again on the next run", async () => {
    write("lib/src/index.js", "export const greet = BUILD_FAILS;\n");
    const failed = await build();
    expect(failed.code).not.toBe(0);
    expect(failed.output).toMatch(/build: @fake\/lib\s+FAILED in \d+\.\d s \(exit 2; src\/index\.js changed\)/);
    expect(failed.output).toContain("@fake/lib: src/index.js does not compile");
    expect(failed.output).toMatch(/build: stopped at @fake\/lib, 4 not checked/);
    expect(failed.builds).toEqual(["@fake/lib"]);
    expect(existsSync(stamp("lib"))).toBe(false);

    const again = await build();
    expect(again.code).not.toBe(0);
    expect(again.builds).toEqual(["@fake/lib"]);
    expect(again.output).toMatch(/build: @fake\/lib\s+FAILED .*no stamp of a successful build/);

    write("lib/src/index.js", 'import { version } from "@fake/base";\nexport const greet = (name) => `hi ${name} (v${version})`;\n');
    const fixed = await build();
    expect(fixed.code, fixed.output).toBe(0);
    expect(fixed.builds).toEqual(["@fake/lib", "@fake/app-bundle", "@fake/app-paths"]);
    expect(existsSync(stamp("lib"))).toBe(true);
    expect(existsSync(path.join(root, "lib/dist/partial.js"))).toBe(false);
  });

  it("a removed dist/ is built again, and so is a dist/ changed by hand; nothing else is", async () => {
    rmSync(path.join(root, "apps/alone/dist"), { recursive: true });
    appendFileSync(path.join(root, "lib/dist/index.js"), "// edited by hand\n");
    const r = await build();
    expect(r.code, r.output).toBe(0);
    expect(r.builds).toEqual(["@fake/lib", "@fake/app-alone"]);
    expect(r.output).toMatch(/build: @fake\/app-alone\s+built .*\(no dist\/\)/);
    expect(r.output).toMatch(/build: @fake\/lib\s+built .*\(dist\/ changed since its build\)/);
    expect(readFileSync(path.join(root, "lib/dist/index.js"), "utf8")).not.toContain("edited by hand");
  });

  it("--all and FABRIC_BUILD_ALL=1 build every package", async () => {
    const all = await build(["--all"]);
    expect(all.code, all.output).toBe(0);
    expect(all.builds).toEqual(PACKAGES);
    const env = await build([], { FABRIC_BUILD_ALL: "1" });
    expect(env.builds).toEqual(PACKAGES);
    expect((await build()).builds).toEqual([]);
  });
});
