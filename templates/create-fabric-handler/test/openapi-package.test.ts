/**
 * Packages made from OpenAPI documents: the files, the README's accounting of every operation, the replayed exchanges,
 * and that the package passes its own tests and typecheck as generated. The mapping rules themselves are tested in
 * the importer (importers/openapi/test/map.test.ts); the corpus of real documents in test/e2e/openapi-corpus.test.ts.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createHandlerAjv, compileHandlerSchema } from "@nodefabric/sdk/runtime";
import { beforeAll, describe, expect, it } from "vitest";
import { loadOpenApi, type LoadedOpenApi } from "@nodefabric/importer-openapi";
import { openApiPackage, type TestedExchange } from "../src/openapi-package.js";
import { renderPackage } from "../src/scaffold.js";
import { linkGeneratedPackage } from "./generated-package-runner.js";

const fixtureDir = fileURLToPath(new URL("./fixtures/", import.meta.url));
const fixturePath = path.join(fixtureDir, "petstore.yaml");

let petstore: LoadedOpenApi;

beforeAll(async () => {
  petstore = await loadOpenApi(fixturePath);
});

function make(document = petstore.document, extra: { include?: string[]; exclude?: string[] } = {}) {
  return openApiPackage(document, { packageName: "petstore", nodeTypePrefix: "petstore", settingsPrefix: "PETSTORE", origin: "From the fixture.", location: petstore.location, ...extra });
}

describe("the generated files", () => {
  it("are one NodeType file per operation with an index, one set definition, the exchanges, a test and a README", () => {
    const { files, mapping } = make();
    const paths = files.map((f) => f.path).sort();
    expect(paths).toEqual(
      [
        "README.md",
        "node-types/index.json",
        ...mapping.operations.map((o) => `node-types/${o.fileName}.json`),
        "src/index.ts",
        "test/exchanges.json",
        "test/handler.test.ts",
      ].sort(),
    );
    const index = JSON.parse(files.find((f) => f.path === "node-types/index.json")!.content) as { node_types: Array<{ node_type_id: string; file: string }> };
    expect(index.node_types.map((n) => n.node_type_id)).toEqual(mapping.operations.map((o) => o.nodeType.node_type_id));
    const source = files.find((f) => f.path === "src/index.ts")!.content;
    expect(source).toContain("defineAtomicSet({");
    expect(source).toContain('new URL("../node-types/", import.meta.url)');
    expect(source).toContain("callHttpOperation(inputs, ctx)");
  });

  it("keep each operation's NodeType as JSON, with the operation it calls", () => {
    const { files, mapping } = make();
    const first = mapping.operations[0];
    const stored = JSON.parse(files.find((f) => f.path === `node-types/${first.fileName}.json`)!.content);
    expect(stored).toEqual(JSON.parse(JSON.stringify(first.nodeType)));
    expect(stored.extensions["nodefabric.openapi"]).toMatchObject({ method: first.descriptor.method, path: first.descriptor.path, settings: { base_url: "PETSTORE_BASE_URL" } });
  });

  it("account for every operation in the README: a node type, or left out with the reason", () => {
    const { files, mapping } = make({ ...petstore.document }, { exclude: ["deletePet"] });
    const readme = files.find((f) => f.path === "README.md")!.content;
    for (const o of mapping.operations) expect(readme).toContain(`| \`${o.nodeType.node_type_id}@1.0.0\` | \`${o.descriptor.method} ${o.descriptor.path}\``);
    expect(mapping.leftOut.map((l) => l.operationId)).toContain("deletePet");
    expect(readme).toMatch(/Left out \(\d+\):/);
    expect(readme).toMatch(/`DELETE \/pets\/\{petId\}` \(deletePet\): .*exclude/);
    expect(readme).toContain("`PETSTORE_BASE_URL`");
  });
});

describe("the exchanges the tests replay", () => {
  it("send sample inputs valid against each input schema, and mock answers that give outputs valid against each output schema", () => {
    const { mapping, exchanges } = make();
    const ajv = createHandlerAjv();
    for (const o of mapping.operations) {
      const e = exchanges.find((x) => x.node_type_id === o.nodeType.node_type_id) as TestedExchange;
      expect(e, o.nodeType.node_type_id).toBeDefined();
      expect("untested" in e ? (e as { untested: string }).untested : undefined).toBeUndefined();
      const inputsValid = compileHandlerSchema(ajv, o.nodeType.input_schema as Record<string, unknown>);
      expect(inputsValid(e.inputs), `${o.nodeType.node_type_id} inputs: ${JSON.stringify(inputsValid.errors)}`).toBe(true);
      const outputsValid = compileHandlerSchema(ajv, o.nodeType.output_schema as Record<string, unknown>);
      expect(outputsValid(e.outputs), `${o.nodeType.node_type_id} outputs: ${JSON.stringify(outputsValid.errors)}`).toBe(true);
    }
  });

  it("mock a JSON answer as JSON, with its content type, even when it is a bare string", () => {
    const { exchanges } = make();
    for (const e of exchanges as TestedExchange[]) {
      if (e.reply.body === undefined) continue;
      expect(e.reply.headers?.["content-type"]).toMatch(/json|text/);
      if (/json/.test(e.reply.headers!["content-type"])) expect(() => JSON.parse(e.reply.body!)).not.toThrow();
    }
  });
});

describe("packages that work as generated", () => {
  it("from the Petstore fixture: passes its own tests and typecheck", { timeout: 180_000 }, async () => {
    const rendered = renderPackage({ packageName: "@acme/petstore", template: "http", openApi: { document: petstore.document, location: fixturePath } });
    const generated = linkGeneratedPackage(rendered.files);
    try {
      const tests = await generated.test();
      expect(tests.code, tests.output).toBe(0);
      expect(tests.output).toMatch(new RegExp(`Tests\\s+${rendered.nodeTypeIds.length + 2} passed`));
      const types = await generated.typecheck();
      expect(types.code, types.output).toBe(0);
    } finally {
      generated.remove();
    }
  });

  it("whose document names no absolute server URL: the tests configure one, and a run without one is refused", { timeout: 180_000 }, async () => {
    const relative = { ...petstore.document, servers: [{ url: "/v2" }] };
    const rendered = renderPackage({ packageName: "petstore", template: "http", openApi: { document: relative, location: fixturePath } });
    const test = rendered.files.find((f) => f.path === "test/handler.test.ts")!.content;
    expect(test).toContain('const BASE_URL = "https://upstream.test";');
    expect(test).toContain("refuses to run without a base URL");
    const generated = linkGeneratedPackage(rendered.files);
    try {
      const tests = await generated.test();
      expect(tests.code, tests.output).toBe(0);
      expect(tests.output).toMatch(new RegExp(`Tests\\s+${rendered.nodeTypeIds.length + 3} passed`));
    } finally {
      generated.remove();
    }
  });
});
