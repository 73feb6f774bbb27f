import { describe, it, expect } from "vitest";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

// docs/architecture.md, "Floors": each floor imports only from its own floor and the floors below it, and no two
// files import each other, directly or through a loop. This reads every import of core/src (type-only, re-exports and
// dynamic imports included) with the TypeScript parser, so text that only looks like an import (a template that
// writes a package's files, say) is not taken for one.
const SRC = fileURLToPath(new URL("../src", import.meta.url));
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return p.endsWith(".ts") && !p.endsWith(".d.ts") ? [p] : [];
  });
}

/** Every module a file names: imports, `export ... from`, `import("...")` calls and `import("...")` types. */
function specifiersOf(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, false);
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      out.push(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteralLike(node.arguments[0])) {
      out.push(node.arguments[0].text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      out.push(node.argument.literal.text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) && ts.isStringLiteral(node.moduleReference.expression)) {
      out.push(node.moduleReference.expression.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** The files under `src` a file imports by a relative path, each by its path relative to `src`. */
function relativeImportsOf(src: string, file: string): string[] {
  const out: string[] = [];
  for (const spec of specifiersOf(file)) {
    if (!spec.startsWith(".")) continue;
    const base = path.resolve(path.dirname(file), spec).replace(/\.js$/, "");
    const target = [`${base}.ts`, path.join(base, "index.ts")].find((p) => existsSync(p));
    if (target && target.startsWith(src + path.sep)) out.push(path.relative(src, target));
  }
  return out;
}

/** The import graph of one package's sources: each file (relative to `src`) to the files it imports. */
const graphOf = (src: string) => new Map(sourceFiles(src).map((f) => [path.relative(src, f), relativeImportsOf(src, f)]));

/** Every import loop of a graph, each as the path of files that closes it. */
function cyclesOf(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (f: string) => {
    state.set(f, "open");
    stack.push(f);
    for (const t of graph.get(f) ?? []) {
      if (state.get(t) === "open") found.push([...stack.slice(stack.indexOf(t)), t]);
      else if (!state.has(t)) visit(t);
    }
    stack.pop();
    state.set(f, "done");
  };
  for (const f of graph.keys()) if (!state.has(f)) visit(f);
  return found;
}

const graph = graphOf(SRC);

const importsFrom = (from: string, to: string) =>
  [...graph].flatMap(([f, targets]) => (f.startsWith(`${from}/`) ? targets.filter((t) => t.startsWith(`${to}/`)).map((t) => `${f} -> ${t}`) : []));

/**
 * The floors of core/src, from the top (docs/architecture.md, "Floors"): every folder and every file at the top of
 * core/src has one. The SDK and the schemas are packages below all of them.
 */
const FOLDER_FLOORS: Record<string, number> = {
  cli: 1,
  testing: 1,
  services: 3,
  faces: 3,
  engine: 4,
  clients: 4,
  store: 5,
  http: 5,
  settings: 5,
  importers: 5,
  observe: 6,
  sdk: 7,
};
const FILE_FLOORS: Record<string, number> = {
  // 1: the package's entry, beside the command and the fixture
  "index.ts": 1,
  // 2: the composition root and what only it uses
  "fabric.ts": 2,
  "config.ts": 2,
  "fabric-security.ts": 2,
  "plugin.ts": 2,
  "plugin-loader.ts": 2,
  // 6: the ground every floor stands on
  "service-names.ts": 6,
  "config-error.ts": 6,
  "engine-ports.ts": 6,
  "in-process.ts": 6,
  "clock.ts": 6,
  "ids.ts": 6,
  "canonical-json.ts": 6,
  "version.ts": 6,
  "package-discovery.ts": 6,
  "node-type-implementation.ts": 6,
};
const floorOf = (f: string): number | undefined => (f.includes("/") ? FOLDER_FLOORS[f.split("/")[0]!] : FILE_FLOORS[f]);

describe("layering inside core", () => {
  it("reads the imports of core/src (the walk itself works)", () => {
    expect(graph.size).toBeGreaterThan(50);
    expect(graph.get("fabric.ts")).toContain("fabric-security.ts");
    expect(graph.get("http/service.ts")).toContain("http/errors.ts");
    // a type-only import, a re-export and a dynamic import are read too
    expect(graph.get("engine/node-type-resolver.ts")).toContain("engine-ports.ts");
    expect(graph.get("engine/engine-types.ts")).toContain("engine-ports.ts");
    expect(graph.get("importers/index.ts")).toContain("importers/load-importer.ts");
  });

  it("gives every folder and every file at the top of core/src a floor", () => {
    expect([...graph.keys()].filter((f) => floorOf(f) === undefined)).toEqual([]);
  });

  it("http/ never imports from clients/ (http/ is the lower floor)", () => {
    expect(importsFrom("http", "clients")).toEqual([]);
  });

  it("has no import loop: no two files import each other, directly or through others", () => {
    expect(cyclesOf(graph).map((c) => c.join(" -> "))).toEqual([]);
  });

  it("the engine does not import from services/", () => {
    expect(importsFrom("engine", "services")).toEqual([]);
  });

  it("the engine and the clients share a floor but not code: they meet at its ports (engine-ports.ts), a floor below", () => {
    expect([...importsFrom("engine", "clients"), ...importsFrom("clients", "engine")]).toEqual([]);
  });

  it("no floor imports from a floor above it", () => {
    const upward = [...graph].flatMap(([f, targets]) => {
      const a = floorOf(f) ?? 0;
      return targets.filter((t) => (floorOf(t) ?? 0) < a).map((t) => `${f} (floor ${a}) -> ${t} (floor ${floorOf(t)})`);
    });
    expect(upward).toEqual([]);
  });
});

// No package of the repository has an import loop between its own files either: schemas, the SDK, core, and every
// plugin, handler, importer and template package.
describe("no import loop in any package", () => {
  const packages = ["schemas", "sdk", "core"]
    .concat(...["plugins", "handlers", "importers", "templates"].map((group) => readdirSync(path.join(ROOT, group)).map((name) => `${group}/${name}`)))
    .filter((dir) => existsSync(path.join(ROOT, dir, "src")));

  it("finds the packages (the walk itself works)", () => {
    expect(packages).toEqual(expect.arrayContaining(["sdk", "core", "plugins/mcp", "plugins/postgres", "handlers/llm", "importers/openapi"]));
  });

  it.each(packages)("%s/src has no import loop", (dir) => {
    expect(cyclesOf(graphOf(path.join(ROOT, dir, "src"))).map((c) => c.join(" -> "))).toEqual([]);
  });
});

// The SDK (@nodefabric/sdk, in sdk/) is the floor below every floor of core: core imports it by its package name only,
// and it imports nothing of core, so a handler package that installs it installs no fabric.
describe("the SDK is a floor below core", () => {
  const SDK_SRC = fileURLToPath(new URL("../../sdk/src", import.meta.url));

  it("sdk/src imports nothing of core: no path out of sdk/, no @nodefabric/core, no fastify, store or native module", () => {
    const files = sourceFiles(SDK_SRC);
    expect(files.length).toBeGreaterThan(15);
    const bad = files.flatMap((f) =>
      specifiersOf(f)
        .filter((spec) => {
          if (spec.startsWith(".")) return !path.resolve(path.dirname(f), spec).startsWith(path.dirname(SDK_SRC));
          return /^(@nodefabric\/core|fastify|fastify-plugin|better-sqlite3|@cedar-policy\/|pg$|jose$)/.test(spec);
        })
        .map((spec) => `${path.relative(SDK_SRC, f)} -> ${spec}`),
    );
    expect(bad).toEqual([]);
  });

  it("core/src reaches the SDK only as @nodefabric/sdk, never by a path into sdk/", () => {
    const byPath = [...graph.keys()].flatMap((f) =>
      specifiersOf(path.join(SRC, f))
        .filter((spec) => spec.startsWith(".") && path.resolve(path.dirname(path.join(SRC, f)), spec).startsWith(SDK_SRC))
        .map((spec) => `${f} -> ${spec}`),
    );
    expect(byPath).toEqual([]);
  });
});

// The importers (importers/*: @nodefabric/importer-openapi, @nodefabric/importer-mcp) are packages of their own that
// the `fabric` command loads only when asked (core/src/importers/load-importer.ts): core names none of them, nor what
// only they need, so a fabric's install carries none of it. docs/architecture.md, "Layout".
describe("the importers are not part of core", () => {
  const ONLY_FOR_IMPORTS = /^(@nodefabric\/importer-|@nodefabric\/handler-|@apidevtools\/swagger-parser|swagger2openapi|@modelcontextprotocol\/)/;

  it("core/src imports no importer, no handler package and none of their parsers or clients", () => {
    const bad = [...graph.keys()].flatMap((f) => specifiersOf(path.join(SRC, f)).filter((spec) => ONLY_FOR_IMPORTS.test(spec)).map((spec) => `${f} -> ${spec}`));
    expect(bad).toEqual([]);
  });

  it("core's package.json depends on no importer, and on none of what only an import needs", () => {
    const manifest = JSON.parse(readFileSync(fileURLToPath(new URL("../package.json", import.meta.url)), "utf8")) as Record<string, Record<string, string> | undefined>;
    const named = ["dependencies", "peerDependencies", "optionalDependencies"].flatMap((field) => Object.keys(manifest[field] ?? {}).map((d) => `${field}: ${d}`));
    expect(named.filter((d) => ONLY_FOR_IMPORTS.test(d.split(": ")[1]!))).toEqual([]);
    expect(existsSync(path.join(SRC, "openapi"))).toBe(false);
  });
});
