/**
 * One source of settings: the FABRIC_* variables the docs name, the ones the settings tables declare and the ones the
 * code reads are the same. A table is core's (FABRIC_SETTINGS, ENVIRONMENT_SETTINGS) or a package's, in its
 * src/settings.ts (docs/configuration.md is generated from them).
 */
import { describe, expect, it } from "vitest";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { glob } from "tinyglobby";
import { ENVIRONMENT_SETTINGS, FABRIC_SETTINGS, isSettingsTable, type SettingsTable } from "@nodefabric/core";
import { repo } from "./readme-blocks.js";

/** Names that look like variables but are not read by the fabric, each with why it may appear. */
const ALLOWED: Record<string, string> = {
  FABRIC_PG_URL: "test only: the PostgreSQL database the suite's PostgreSQL tests use (docs/testing.md)",
  FABRIC_FAULTS_CLI: "test only: runs the e2e fault suite against another build",
  FABRIC_BUILD_ALL: "the contributors' build script (scripts/build-changed.mjs) builds every package when it is set (docs/testing.md); the fabric never reads it",
  FABRIC_PG_MIGRATION_CHECKSUM: "a migration error code of plugin-postgres that the docs quote, not a variable",
  FABRIC_PG_UNKNOWN_OPT_IN: "a migration error code of plugin-postgres that the docs quote, not a variable",
};

const NAME = /(?<![A-Za-z0-9_])FABRIC_[A-Z0-9_]*[A-Z0-9_]/g;
/** A read in code: `env.FABRIC_X` or `env["FABRIC_X"]` (process.env, options.env, …); a table (`*_SETTINGS`) is no variable. */
const READ = /\.\s*(FABRIC_[A-Z0-9_]+)\b(?<!_SETTINGS)|\[\s*["'`](FABRIC_[A-Z0-9_]+)["'`]\s*\]/g;

interface Declared {
  table: SettingsTable;
  /** The file that defines it, and the name it is exported as there. */
  file: string;
  exportName: string;
}

async function tables(): Promise<Declared[]> {
  const out: Declared[] = [
    { table: FABRIC_SETTINGS, file: "core/src/settings/fabric-settings.ts", exportName: "FABRIC_SETTINGS" },
    { table: ENVIRONMENT_SETTINGS, file: "core/src/settings/environment-settings.ts", exportName: "ENVIRONMENT_SETTINGS" },
  ];
  for (const file of (await glob(["plugins/*/src/settings.ts", "handlers/*/src/settings.ts"], { cwd: repo })).sort()) {
    const mod = (await import(pathToFileURL(path.join(repo, file)).href)) as Record<string, unknown>;
    for (const [exportName, value] of Object.entries(mod)) if (isSettingsTable(value)) out.push({ table: value, file, exportName });
  }
  return out;
}

const sourceGlobs = ["core/src/**/*.{ts,mts,mjs}", "sdk/src/**/*.ts", "plugins/*/src/**/*.{ts,tsx}", "handlers/*/src/**/*.ts", "importers/*/src/**/*.ts", "templates/*/src/**/*.ts"];
const testGlobs = ["test/**/*.{ts,mjs,js}", "*/test/**/*.ts", "*/*/test/**/*.ts", "scripts/**/*.mjs"];

async function textOf(globs: string[]): Promise<Map<string, string>> {
  const files = await glob(globs, { cwd: repo, ignore: ["**/node_modules/**", "**/dist/**"] });
  return new Map(files.map((f) => [f, readFileSync(path.join(repo, f), "utf8")]));
}

describe("docs and code name the same FABRIC_* variables", async () => {
  const declared = await tables();
  const names = new Set<string>();
  const prefixes = new Set<string>();
  for (const { table } of declared) for (const v of table.variables()) (v.endsWith("_") ? prefixes : names).add(v);
  /** Whether a name is declared: a variable, one of a family (`FABRIC_SECRET_<NAME>`), or a family's prefix. */
  const isDeclared = (n: string) =>
    names.has(n) || [...prefixes].some((p) => n.startsWith(p)) || (n.endsWith("_") && [...names, ...prefixes].some((d) => d.startsWith(n)));
  const sources = await textOf(sourceGlobs);

  it("finds the tables and their variables (the check itself works)", () => {
    expect(declared.map((d) => d.exportName)).toEqual(expect.arrayContaining(["FABRIC_SETTINGS", "MCP_SETTINGS", "LLM_SETTINGS", "TELEMETRY_SETTINGS", "CONSOLE_SETTINGS"]));
    expect(names).toContain("FABRIC_HOST");
    expect(names).toContain("FABRIC_NODE_REGISTRY_URL");
    expect(prefixes).toContain("FABRIC_EXECUTOR_SECRET_HOSTS_");
    expect(isDeclared("FABRIC_SECRET_WEATHER_API_KEY")).toBe(true);
    expect(isDeclared("FABRIC_AUTH_")).toBe(true);
    expect(isDeclared("FABRIC_NO_SUCH_THING")).toBe(false);
  });

  it("every variable README.md and docs/ name is declared by a table (or allowed, with a reason)", async () => {
    const docs = await textOf(["README.md", "docs/**/*.md"]);
    const unknown = [...docs].flatMap(([file, text]) => [...new Set(text.match(NAME) ?? [])].filter((n) => !isDeclared(n) && !(n in ALLOWED)).map((n) => `${file}: ${n}`));
    expect(unknown).toEqual([]);
  });

  it("every variable the code reads directly is declared by a table (or allowed, with a reason)", async () => {
    const all = new Map([...sources, ...(await textOf(testGlobs))].filter(([f]) => f !== "test/settings-variables.test.ts"));
    const undeclared = [...all].flatMap(([file, text]) =>
      [...text.matchAll(READ)].map((m) => (m[1] ?? m[2])!).filter((n) => !isDeclared(n) && !(n in ALLOWED)).map((n) => `${file}: ${n}`),
    );
    expect(undeclared).toEqual([]);
  });

  it("every table is read by the code, and each of its variables is one the code uses", () => {
    const problems: string[] = [];
    for (const { table, file, exportName } of declared) {
      // The table is read where it is used (fromEnv/read), or, for a table of variables read where they are used (core's
      // environment-only one), each variable's name is in the code outside the table.
      const readers = [...sources].filter(([f, text]) => f !== file && new RegExp(`\\b${exportName}\\s*\\.\\s*(fromEnv|read)\\(`).test(text));
      const ownRead = new RegExp(`\\b${exportName}\\s*\\.\\s*(fromEnv|read)\\(`).test(sources.get(file) ?? "");
      if (readers.length > 0 || ownRead) {
        // Read through the table: each setting with a variable is used by name somewhere (its definition aside).
        for (const row of table.rows().filter((r) => r.env)) {
          const key = row.path.split(".").filter((p) => p !== "<NAME>").pop()!;
          const pattern = new RegExp(`(?<![\\w-])${key.replace(/[-]/g, "\\-")}(?![\\w-])`, "g");
          const uses = [...sources].reduce((n, [, text]) => n + (text.match(pattern)?.length ?? 0), 0);
          if (uses < 2) problems.push(`${table.title}: ${row.path} (${row.env}) is declared but no code uses it`);
        }
        continue;
      }
      for (const v of table.variables()) {
        const used = [...sources].some(([f, text]) => f !== file && text.includes(v));
        if (!used) problems.push(`${table.title}: ${v} is declared but no code reads it`);
      }
    }
    expect(problems).toEqual([]);
  });

  it("each allowed name is still needed: the docs name it or the code reads it", async () => {
    const docs = [...(await textOf(["README.md", "docs/**/*.md"])).values()].join("\n");
    const reads = [...sources.values(), ...(await textOf(testGlobs)).values()].flatMap((text) => [...text.matchAll(READ)].map((m) => (m[1] ?? m[2])!));
    expect(Object.keys(ALLOWED).filter((n) => isDeclared(n) || !((docs.match(NAME) ?? []).includes(n) || reads.includes(n)))).toEqual([]);
  });

  it("each package with a table exports it from its entry, so docs/configuration.md lists it", () => {
    const missing = declared
      .filter((d) => !d.file.startsWith("core/"))
      .filter(({ file, exportName }) => {
        const index = path.join(repo, path.dirname(file), "index.ts");
        return !existsSync(index) || !readFileSync(index, "utf8").includes(exportName);
      })
      .map((d) => `${d.file}: ${d.exportName}`);
    expect(missing).toEqual([]);
  });
});
