/**
 * The suites are what docs/testing.md and the README say they are, and no test file falls between them: every
 * `*.test.ts` vitest would find belongs to exactly one of `npm test` (projects unit and unit-isolated) and
 * `npm run test:e2e` (project e2e), and .ci/run runs both.
 */
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import path from "node:path";
import { glob } from "tinyglobby";
import config, { RUNTIME } from "../vitest.config.js";
import { readmeBlocks, repo } from "./readme-blocks.js";

interface Project {
  test: { name: string; include: string[]; exclude?: string[] };
}
const projects = (config.test!.projects as Project[]).map((p) => p.test);
const byName = (name: string) => projects.find((p) => p.name === name)!;

async function filesOf(p: Project["test"]): Promise<string[]> {
  return glob(p.include, { cwd: repo, ignore: p.exclude ?? [] });
}

const pkg = JSON.parse(readFileSync(path.join(repo, "package.json"), "utf8")) as { scripts: Record<string, string> };

describe("the test suites", () => {
  it("package.json runs unit and unit-isolated for npm test, e2e for test:e2e, runtime for test:runtime, each after building what changed", () => {
    expect(pkg.scripts.test).toBe("node scripts/build-changed.mjs && vitest run --project unit --project unit-isolated");
    expect(pkg.scripts["test:e2e"]).toBe("node scripts/build-changed.mjs && vitest run --project e2e");
    expect(pkg.scripts["test:runtime"]).toBe("node scripts/build-changed.mjs && vitest run --project runtime");
    // `npm run build` stays the full build (the release runs it), and stamps what it built for the next `npm test`.
    expect(pkg.scripts.build).toBe("node scripts/build-changed.mjs --all");
    expect(projects.map((p) => p.name).sort()).toEqual(["e2e", "runtime", "unit", "unit-isolated"]);
  });

  it("every test file is in exactly one of npm test and npm run test:e2e", async () => {
    const all = await glob(["**/*.test.ts"], { cwd: repo, ignore: ["**/node_modules/**", "**/dist/**", "templates/*/templates/**"] });
    const owners = new Map<string, string[]>();
    for (const name of ["unit", "unit-isolated", "e2e"]) {
      for (const f of await filesOf(byName(name))) owners.set(f, [...(owners.get(f) ?? []), name]);
    }
    const lost = all.filter((f) => !owners.has(f));
    const twice = [...owners].filter(([, o]) => o.length > 1).map(([f, o]) => `${f}: ${o.join(", ")}`);
    expect(lost, `in no suite:\n${lost.join("\n")}`).toEqual([]);
    expect(twice, `in two suites:\n${twice.join("\n")}`).toEqual([]);
    expect(all.length).toBeGreaterThan(100);
  });

  it("the runtime suite names files that exist, and each is in npm test or the e2e suite", async () => {
    const runtime = await filesOf(byName("runtime"));
    const literal = RUNTIME.filter((p) => !p.includes("*"));
    const missing = literal.filter((f) => !runtime.includes(f));
    expect(missing, `the runtime suite names files that do not exist:\n${missing.join("\n")}`).toEqual([]);
    expect(runtime.length).toBeGreaterThanOrEqual(literal.length);
  });

  it(".ci/run runs npm test and npm run test:e2e, and test:runtime on Node 24, and prints each suite's duration", () => {
    const ci = readFileSync(path.join(repo, ".ci/run"), "utf8");
    expect(ci).toMatch(/^suite "[^"]+" npm test$/m);
    expect(ci).toMatch(/^suite "[^"]+" npm run test:e2e$/m);
    expect(ci).toMatch(/suite "[^"]*node 24[^"]*" npm run test:runtime$/m);
    expect(ci).toContain('echo "== durations');
  });

  it("the README's two commands, and its Which tests to run, say which suite to run when", () => {
    const develop = readmeBlocks().filter((b) => b.section === "Two commands" || b.section === "Which tests to run");
    const commands = develop.flatMap((b) => b.commands);
    expect(commands).toContain("npm test");
    expect(commands).toContain("npm run test:e2e");
    const readme = readFileSync(path.join(repo, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("### Which tests to run"), readme.indexOf("\n## ", readme.indexOf("### Which tests to run")));
    expect(section).toMatch(/`npm test`/);
    expect(section).toMatch(/`npm run test:e2e`/);
    expect(section).toMatch(/docs\/testing\.md/);
  });
});
