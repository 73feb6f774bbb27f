/**
 * The OpenAPI importer gives the importers' one shape (ImportResult of @nodefabric/sdk): the node types made, what was
 * left out with the reason, and notes; the same node types as its operations carry.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { ImportResult } from "@nodefabric/sdk";
import { loadOpenApi, mapOpenApi } from "../src/index.js";

const petstore = fileURLToPath(new URL("../../../templates/create-fabric-handler/test/fixtures/petstore.yaml", import.meta.url));

describe("mapOpenApi as an ImportResult", () => {
  it("gives the node types of its operations, in order, and each operation left out with its reason", async () => {
    const { document, location } = await loadOpenApi(petstore);
    const mapping = mapOpenApi(document, { prefix: "petstore", settingsPrefix: "PETSTORE", location, exclude: ["createPet"] });
    const result: ImportResult<{ method: string; path: string; reason: string }> = mapping;
    expect(result.nodeTypes.length).toBeGreaterThan(0);
    expect(result.nodeTypes).toEqual(mapping.operations.map((o) => o.nodeType));
    expect(result.nodeTypes.every((t, i) => t === mapping.operations[i]!.nodeType)).toBe(true);
    expect(result.leftOut).toEqual([expect.objectContaining({ method: "POST", reason: "excluded (--exclude createPet)" })]);
    expect(Array.isArray(result.notes)).toBe(true);
  });
});
