/**
 * What each public package would upload to npm: `npm pack --dry-run --json` of every public workspace package (found
 * from the root `workspaces`, as the release finds them), checked for what must ship and what must not, and the
 * metadata npm and users read. Like test/e2e, it expects the packages built (`npm test` builds first).
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { publicPackages, readWorkspacePackages, type WorkspacePackage } from "../scripts/release-lib.mjs";

const repo = fileURLToPath(new URL("..", import.meta.url));
const run = promisify(execFile);

interface PackResult {
  name: string;
  version: string;
  files: { path: string }[];
}

const all: WorkspacePackage[] = readWorkspacePackages(repo);
const pub: WorkspacePackage[] = publicPackages(all);
const REPO_URL = "git+https://github.com/nodefabric/nodefabric.git";

/**
 * Files that must not ship, by the rule they break. The scaffolder's `templates/` folder is the exception: it is the
 * data the scaffolder copies into a new handler package, sources, tests and configs included.
 */
const FORBIDDEN: [RegExp, string][] = [
  [/(^|\/)(test|tests|__tests__)\//, "a test folder"],
  [/\.(test|spec)\.[^/]*$/, "a test file (or its source map)"],
  [/(^|\/)fixtures\//, "a test fixture"],
  [/\.tsbuildinfo$/, "a TypeScript build-info file"],
  [/(^|\/)src\//, "a TypeScript source folder (dist ships the built code and its .d.ts)"],
  [/(?<!\.d)\.[cm]?tsx?$/, "a TypeScript source file"],
  [/(^|\/)(tsup|vitest|vite|eslint)\.config\.[^/]+$/, "a build or test tool config"],
  [/(^|\/)tsconfig[^/]*\.json$/, "a tsconfig"],
  [/(^|\/)\.(env|npmrc)$/, "a local settings file"],
  [/(^|\/)\.build-stamp$/, "the stamp scripts/build-changed.mjs leaves in dist/"],
];
const DATA_FOLDERS = ["templates/"];

/** Every file path an `exports` value points at (conditions and subpaths flattened), with its condition. */
function exportTargets(value: unknown, condition = "default"): { target: string; condition: string }[] {
  if (typeof value === "string") return [{ target: value, condition }];
  if (Array.isArray(value)) return value.flatMap((v) => exportTargets(v, condition));
  if (value && typeof value === "object") return Object.entries(value).flatMap(([k, v]) => exportTargets(v, k.startsWith(".") ? condition : k));
  return [];
}

/** `./dist/x.js` → `dist/x.js`, as npm lists files. */
const normal = (p: string) => path.posix.normalize(p).replace(/^\.\//, "");

/** Whether `files` holds `target`, where a `*` in a subpath pattern stands for any one or more path characters. */
function shipped(files: Set<string>, target: string): boolean {
  const t = normal(target);
  if (!t.includes("*")) return files.has(t);
  const re = new RegExp(`^${t.split("*").map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".+")}$`);
  return [...files].some((f) => re.test(f));
}

describe("what npm would publish", () => {
  const packs = new Map<string, Set<string>>();

  beforeAll(async () => {
    const args = ["pack", "--dry-run", "--json", "--ignore-scripts", ...pub.flatMap((p) => ["--workspace", p.dir])];
    const { stdout } = await run("npm", args, { cwd: repo, maxBuffer: 64 * 1024 * 1024 });
    for (const r of JSON.parse(stdout) as PackResult[]) packs.set(r.name, new Set(r.files.map((f) => f.path)));
  }, 120_000);

  it("finds every public package, from the root workspaces", () => {
    const names = pub.map((p) => p.name);
    for (const expected of ["@nodefabric/schemas", "@nodefabric/core", "@nodefabric/handler-demo", "@nodefabric/handler-http", "create-fabric-handler"]) {
      expect(names).toContain(expected);
    }
    expect([...packs.keys()].sort()).toEqual([...names].sort());
  });

  for (const p of pub) {
    describe(`${p.name} (${p.dir})`, () => {
      it("ships no tests, fixtures, sources or build configs", () => {
        const bad = [...packs.get(p.name)!]
          .filter((f) => !DATA_FOLDERS.some((d) => f.startsWith(d)))
          .flatMap((f) => FORBIDDEN.filter(([re]) => re.test(f)).map(([, why]) => `${p.name}: ${f} is ${why}`));
        expect(bad).toEqual([]);
      });

      it("ships package.json, README.md, LICENSE and every file its manifest names", () => {
        const files = packs.get(p.name)!;
        const m = p.manifest;
        const needed: string[] = ["package.json", "README.md", "LICENSE"];
        if (m.main) needed.push(m.main);
        if (m.types) needed.push(m.types);
        for (const { target } of exportTargets(m.exports)) needed.push(target);
        const bins = typeof m.bin === "string" ? [m.bin] : Object.values(m.bin ?? {});
        needed.push(...(bins as string[]));
        needed.push(...((m.nodefabric?.handlers ?? []) as string[]), ...((m.nodefabric?.plugins ?? []) as string[]));
        const missing = needed.filter((f) => !shipped(files, f)).map((f) => `${p.name}: ${normal(f)} is not in the tarball`);
        expect(missing).toEqual([]);
      });

      it("exports types and import for every entry point, and ./package.json", () => {
        const m = p.manifest;
        expect(m.exports, `${p.name} has no "exports"`).toBeTypeOf("object");
        expect(m.exports["./package.json"], `${p.name} does not export ./package.json`).toBe("./package.json");
        for (const [subpath, value] of Object.entries(m.exports as Record<string, unknown>)) {
          const targets = exportTargets(value);
          if (targets.some(({ target }) => /\.[cm]?js$/.test(target))) {
            const conditions = targets.map((t) => t.condition);
            expect(conditions, `${p.name} exports ${subpath}: code without a "types" condition`).toContain("types");
            expect(conditions, `${p.name} exports ${subpath}: code without an "import" condition`).toContain("import");
          }
        }
      });

      it("has the metadata npm shows and users rely on", () => {
        const m = p.manifest;
        expect(m.license, `${p.name} license`).toBe("Apache-2.0");
        expect(m.engines, `${p.name} engines`).toEqual({ node: ">=20.19.0" });
        expect(m.repository, `${p.name} repository`).toEqual({ type: "git", url: REPO_URL, directory: p.dir });
        expect(m.homepage, `${p.name} homepage`).toMatch(/^https:\/\/github\.com\/nodefabric\/nodefabric\b/);
        expect(m.bugs?.url, `${p.name} bugs`).toBe("https://github.com/nodefabric/nodefabric/issues");
        expect(Array.isArray(m.keywords) && m.keywords.length > 0, `${p.name} keywords`).toBe(true);
        expect(Array.isArray(m.files), `${p.name} has no "files" list`).toBe(true);
        if (p.name.startsWith("@")) expect(m.publishConfig?.access, `${p.name} publishConfig.access`).toBe("public");
        // npm 11 drops a bin path written with a leading ./ when it publishes.
        const bins = typeof m.bin === "string" ? { [p.name]: m.bin } : (m.bin ?? {});
        for (const [name, target] of Object.entries(bins)) expect(String(target), `${p.name} bin ${name}`).not.toMatch(/^\.\//);
        expect(readFileSync(path.join(repo, p.dir, "LICENSE"), "utf8"), `${p.dir}/LICENSE is not the repository's LICENSE`).toBe(readFileSync(path.join(repo, "LICENSE"), "utf8"));
      });

      it("needs no private workspace package at install time", () => {
        const priv = new Set(all.filter((w) => w.private).map((w) => w.name));
        const bad = ["dependencies", "peerDependencies", "optionalDependencies"].flatMap((field) =>
          Object.keys(p.manifest[field] ?? {}).filter((d) => priv.has(d)).map((d) => `${p.name} ${field}: ${d} is private`),
        );
        expect(bad).toEqual([]);
      });
    });
  }
});

describe("the repository", () => {
  it("carries the full Apache License 2.0 and the same Node requirement as its packages", () => {
    const license = readFileSync(path.join(repo, "LICENSE"), "utf8");
    expect(license).toMatch(/^\s*Apache License\s+Version 2\.0, January 2004/);
    expect(license).toContain("END OF TERMS AND CONDITIONS");
    expect(license).toContain("APPENDIX: How to apply the Apache License to your work.");
    const root = JSON.parse(readFileSync(path.join(repo, "package.json"), "utf8"));
    expect(root.engines).toEqual({ node: ">=20.19.0" });
    expect(root.private).toBe(true);
  });
});
