/**
 * The OpenAPI importer on documents nobody here wrote: every document of test/fixtures/openapi/ (real API
 * descriptions from npm packages, with their sources and licences in SOURCES.md) is made into a handler package, and
 * every package must typecheck and pass its own generated tests, as `npm test` would in the package. Every operation
 * of every document is either a node type or listed as left out, with a reason.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadOpenApi } from "@nodefabric/importer-openapi";
import { renderPackage, type RenderedPackage } from "../../templates/create-fabric-handler/src/scaffold.js";
import { linkGeneratedPackages, type LinkedPackages } from "../../templates/create-fabric-handler/test/generated-package-runner.js";

const fixtures = fileURLToPath(new URL("../fixtures/openapi/", import.meta.url));
const corpus = JSON.parse(readFileSync(path.join(fixtures, "corpus.json"), "utf8")) as Array<{ file: string; name: string; operations: number }>;

interface Made {
  name: string;
  file: string;
  operations: number;
  rendered: RenderedPackage;
}

const made: Made[] = [];
let linked: LinkedPackages;

beforeAll(async () => {
  for (const entry of corpus) {
    const loaded = await loadOpenApi(path.join(fixtures, entry.file));
    const name = `corpus-${entry.file.replace(/\.(json|yaml)$/, "").toLowerCase().replace(/[^a-z0-9]+/g, "-")}`;
    const rendered = renderPackage({ packageName: name, template: "http", openApi: { document: loaded.document, location: loaded.location } });
    made.push({ name, file: entry.file, operations: entry.operations, rendered });
  }
  linked = linkGeneratedPackages(made.map((m) => ({ name: m.name, files: m.rendered.files })));
}, 1_200_000); // links and installs a package per document: minutes on a loaded 2-core machine; the bound is for a hang

afterAll(() => linked?.remove());

describe("the real-world corpus", () => {
  it("has at least 30 documents", () => {
    expect(corpus.length).toBeGreaterThanOrEqual(30);
  });

  it("makes every operation a node type or lists it as left out, with a reason", () => {
    for (const m of made) {
      const accounted = m.rendered.nodeTypeIds.length + m.rendered.skipped.length;
      expect({ file: m.file, accounted }).toEqual({ file: m.file, accounted: m.operations });
      for (const line of m.rendered.skipped) expect(line).toMatch(/^[A-Z]+ \S+: \S/);
    }
  });

  it("gives packages that typecheck", { timeout: 600_000 }, async () => {
    const outcome = await linked.typecheck();
    expect(outcome.code, outcome.output.slice(0, 6000)).toBe(0);
  });

  it("gives packages that pass their own tests, one test per operation", { timeout: 900_000 }, async () => {
    const outcome = await linked.test();
    const report = outcome.report;
    expect(report, outcome.output.slice(0, 4000)).toBeDefined();
    const failures = report!.testResults.flatMap((file) =>
      file.assertionResults.filter((a) => a.status === "failed").map((a) => `${path.relative(linked.root, file.name)} › ${a.fullName}: ${a.failureMessages[0]?.split("\n")[0]}`),
    );
    const broken = report!.testResults.filter((f) => f.status === "failed" && f.assertionResults.length === 0).map((f) => `${f.name}: ${f.message}`);
    expect([...broken, ...failures].slice(0, 30)).toEqual([]);
    expect(report!.numFailedTests).toBe(0);
    // Each package replays each operation it could make samples for; those it could not are `todo`, with the reason.
    const operations = made.reduce((n, m) => n + m.rendered.nodeTypeIds.length, 0);
    expect(report!.numPassedTests + report!.numTodoTests).toBeGreaterThanOrEqual(operations);
    expect(report!.numTodoTests).toBeLessThanOrEqual(Math.ceil(operations * 0.01));
  });
});
