/**
 * The real-world OpenAPI corpus itself (test/fixtures/openapi/): corpus.json, SOURCES.md and the files agree, and
 * every file parses as shipped with the number of operations corpus.json declares. What the importer makes of the
 * documents is tested in openapi-corpus.test.ts.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import SwaggerParser from "@apidevtools/swagger-parser";
import { describe, expect, it } from "vitest";

interface Entry {
  file: string;
  name: string;
  operations: number;
  format: string;
  source: string;
  license: string;
}

const fixtures = fileURLToPath(new URL("./fixtures/openapi/", import.meta.url));
const corpus = JSON.parse(readFileSync(path.join(fixtures, "corpus.json"), "utf8")) as Entry[];
const sources = readFileSync(path.join(fixtures, "SOURCES.md"), "utf8");

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const;

/** "OpenAPI 3.0.3, YAML" → { kind: "OpenAPI", version: "3.0.3", syntax: "YAML" }. */
function formatOf(format: string): { kind: string; version: string; syntax: string } {
  const m = /^(OpenAPI|Swagger) (\d+\.\d+(?:\.\d+)?), (JSON|YAML)$/.exec(format);
  if (!m) throw new Error(`unreadable format ${JSON.stringify(format)}`);
  return { kind: m[1]!, version: m[2]!, syntax: m[3]! };
}

function countOperations(document: { paths?: Record<string, unknown> }): number {
  let n = 0;
  for (const item of Object.values(document.paths ?? {})) {
    if (item && typeof item === "object") for (const method of METHODS) if ((item as Record<string, unknown>)[method]) n++;
  }
  return n;
}

describe("the real-world OpenAPI corpus fixtures", () => {
  it("lists each file once, with every field", () => {
    expect(new Set(corpus.map((e) => e.file)).size).toBe(corpus.length);
    for (const e of corpus) {
      expect(e.file).toMatch(/^[a-z0-9][a-z0-9.-]*\.(json|yaml)$/);
      expect(e.name.length).toBeGreaterThan(0);
      expect(Number.isInteger(e.operations) && e.operations >= 0).toBe(true);
      expect(() => formatOf(e.format)).not.toThrow();
      expect(e.source).toMatch(/^(npm:|github:)/);
      expect(e.license).toMatch(/^package: .+; document: .+$/);
    }
  });

  it("has no file that corpus.json does not list", () => {
    const files = readdirSync(fixtures).filter((f) => f !== "corpus.json" && f !== "SOURCES.md");
    expect(files.sort()).toEqual(corpus.map((e) => e.file).sort());
  });

  it("describes every file in SOURCES.md", () => {
    for (const e of corpus) expect(sources, e.file).toContain(`| \`${e.file}\` |`);
  });

  it("has 44 documents: 5 Swagger 2.0, 32 OpenAPI 3.0 and 7 OpenAPI 3.1; 10 of them YAML", () => {
    const formats = corpus.map((e) => formatOf(e.format));
    expect(corpus.length).toBe(44);
    expect(formats.filter((f) => f.kind === "Swagger" && f.version === "2.0").length).toBe(5);
    expect(formats.filter((f) => f.kind === "OpenAPI" && f.version.startsWith("3.0.")).length).toBe(32);
    expect(formats.filter((f) => f.kind === "OpenAPI" && f.version.startsWith("3.1.")).length).toBe(7);
    expect(formats.filter((f) => f.syntax === "YAML").length).toBe(10);
  });

  describe.each(corpus)("$file", (entry) => {
    it("parses, with the declared version and operation count", async () => {
      const file = path.join(fixtures, entry.file);
      const document = (await SwaggerParser.parse(file)) as { openapi?: string; swagger?: string; paths?: Record<string, unknown> };
      const format = formatOf(entry.format);
      expect(format.syntax).toBe(entry.file.endsWith(".json") ? "JSON" : "YAML");
      if (format.kind === "Swagger") expect(document.swagger).toBe(format.version);
      else expect(document.openapi).toBe(format.version);
      expect(countOperations(document)).toBe(entry.operations);
    });
  });
});
