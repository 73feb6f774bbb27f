/**
 * How `fabric node-types import` reaches an importer package (core/src/importers): by its name where the fabric is
 * installed, else from the folder's node_modules; and, when it is in neither, an error that names the package to
 * install, which the command answers with exit code 2.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { A2A_IMPORTER, ImporterMissingError, loadImporter, MCP_IMPORTER, OPENAPI_IMPORTER } from "../src/importers/index.js";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function folder(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), "nf-importer-"));
  dirs.push(d);
  return d;
}

describe("loading an importer package", () => {
  it("names the package to install when it is nowhere to be found", async () => {
    const missing = { name: "@nodefabric/importer-nowhere", imports: "a description of nothing", runBy: "nothing.call of @nodefabric/handler-nowhere" };
    const err = await loadImporter(missing, folder()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImporterMissingError);
    expect((err as Error).message).toBe(
      "importing a description of nothing needs @nodefabric/importer-nowhere (the importer; nothing.call of @nodefabric/handler-nowhere runs the node types it makes): npm install @nodefabric/importer-nowhere",
    );
  });

  it("loads it from the folder's node_modules when the fabric's own install has none", async () => {
    const cwd = folder();
    const dir = path.join(cwd, "node_modules", "@nodefabric", "importer-elsewhere");
    mkdirSync(path.join(dir, "dist"), { recursive: true });
    writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "@nodefabric/importer-elsewhere", type: "module", exports: { ".": { import: "./dist/index.js" } } }));
    writeFileSync(path.join(dir, "dist/index.js"), 'export const where = "the folder";\n');
    const loaded = await loadImporter<{ where: string }>({ name: "@nodefabric/importer-elsewhere", imports: "x", runBy: "y" }, cwd);
    expect(loaded.where).toBe("the folder");
  });

  it("finds the OpenAPI, MCP and A2A importers of this repository by their package names", async () => {
    const openapi = await loadImporter<Record<string, unknown>>(OPENAPI_IMPORTER, folder());
    expect(typeof openapi.loadOpenApi).toBe("function");
    expect(typeof openapi.mapOpenApi).toBe("function");
    expect(typeof openapi.OpenApiImportError).toBe("function");
    const mcp = await loadImporter<Record<string, unknown>>(MCP_IMPORTER, folder());
    for (const name of ["parseSource", "parseHeader", "importMcpServer", "McpImportError"]) expect(typeof mcp[name], name).toBe("function");
    const a2a = await loadImporter<Record<string, unknown>>(A2A_IMPORTER, folder());
    for (const name of ["parseCardUrl", "parseHeader", "importA2aAgent", "A2aImportError"]) expect(typeof a2a[name], name).toBe("function");
  });
});
