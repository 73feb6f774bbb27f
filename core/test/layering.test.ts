import { describe, it, expect } from "vitest";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

// docs/architecture.md, "Floors": each floor imports only from the floors below it, and no two files import
// each other, directly or through a loop. This walks every relative import (type-only and re-exports included) of
// core/src.
const SRC = fileURLToPath(new URL("../src", import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return p.endsWith(".ts") && !p.endsWith(".d.ts") ? [p] : [];
  });
}

/** The files of core/src a file imports, by path relative to core/src. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const specifiers = [
    ...text.matchAll(/(?:^|[\n;])\s*(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]*?\s+from\s+)?["']([^"']+)["']/g),
    ...text.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g),
  ].map((m) => m[1]!);
  const out: string[] = [];
  for (const spec of specifiers) {
    if (!spec.startsWith(".")) continue;
    const base = path.resolve(path.dirname(file), spec).replace(/\.js$/, "");
    const target = [`${base}.ts`, path.join(base, "index.ts")].find((p) => existsSync(p));
    if (target) out.push(path.relative(SRC, target));
  }
  return out;
}

const graph = new Map(sourceFiles(SRC).map((f) => [path.relative(SRC, f), importsOf(f)]));

/** Every import loop, each as the path of files that closes it. */
function cycles(): string[][] {
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

const importsFrom = (from: string, to: string) =>
  [...graph].flatMap(([f, ts]) => (f.startsWith(`${from}/`) ? ts.filter((t) => t.startsWith(`${to}/`)).map((t) => `${f} -> ${t}`) : []));

describe("layering inside core", () => {
  it("reads the imports of core/src (the walk itself works)", () => {
    expect(graph.size).toBeGreaterThan(50);
    expect(graph.get("fabric.ts")).toContain("fabric-security.ts");
    expect(graph.get("http/service.ts")).toContain("http/errors.ts");
  });

  it("http/ never imports from clients/ (http/ is the lower floor)", () => {
    expect(importsFrom("http", "clients")).toEqual([]);
  });

  it("has no import loop: no two files import each other, directly or through others", () => {
    expect(cycles().map((c) => c.join(" -> "))).toEqual([]);
  });

  it("the engine does not import from services/", () => {
    expect(importsFrom("engine", "services")).toEqual([]);
  });

  it("no floor imports from a floor above it", () => {
    // 1 cli, testing; 2 fabric.ts; 3 services; 4 engine, clients; 5 store, http, sdk. Files at the top level other
    // than fabric.ts are helpers shared by every floor, and are not checked here.
    const floor = (f: string): number | undefined => {
      const top = f.split("/")[0]!;
      if (top === "cli" || top === "testing") return 1;
      if (f === "fabric.ts") return 2;
      if (top === "services") return 3;
      if (top === "engine" || top === "clients") return 4;
      if (top === "store" || top === "http" || top === "sdk") return 5;
      return undefined;
    };
    const upward = [...graph].flatMap(([f, ts]) => {
      const a = floor(f);
      return a === undefined ? [] : ts.filter((t) => (floor(t) ?? 99) < a).map((t) => `${f} -> ${t}`);
    });
    expect(upward).toEqual([]);
  });
});

// The SDK (@nodefabric/sdk, in sdk/) is the floor below every floor of core: core imports it by its package name only,
// and it imports nothing of core, so a handler package that installs it installs no fabric.
describe("the SDK is a floor below core", () => {
  const SDK_SRC = fileURLToPath(new URL("../../sdk/src", import.meta.url));
  const specifiersOf = (file: string) => {
    const text = readFileSync(file, "utf8");
    return [
      ...text.matchAll(/(?:^|[\n;])\s*(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]*?\s+from\s+)?["']([^"']+)["']/g),
      ...text.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g),
    ].map((m) => m[1]!);
  };

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
  const staticSpecifiers = (file: string) =>
    [...readFileSync(file, "utf8").matchAll(/(?:^|[\n;])\s*(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]*?\s+from\s+)?["']([^"']+)["']/g), ...readFileSync(file, "utf8").matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]!);

  it("core/src imports no importer, no handler package and none of their parsers or clients", () => {
    const bad = [...graph.keys()].flatMap((f) => staticSpecifiers(path.join(SRC, f)).filter((spec) => ONLY_FOR_IMPORTS.test(spec)).map((spec) => `${f} -> ${spec}`));
    expect(bad).toEqual([]);
  });

  it("core's package.json depends on no importer, and on none of what only an import needs", () => {
    const manifest = JSON.parse(readFileSync(fileURLToPath(new URL("../package.json", import.meta.url)), "utf8")) as Record<string, Record<string, string> | undefined>;
    const named = ["dependencies", "peerDependencies", "optionalDependencies"].flatMap((field) => Object.keys(manifest[field] ?? {}).map((d) => `${field}: ${d}`));
    expect(named.filter((d) => ONLY_FOR_IMPORTS.test(d.split(": ")[1]!))).toEqual([]);
    expect(existsSync(path.join(SRC, "openapi"))).toBe(false);
  });
});
