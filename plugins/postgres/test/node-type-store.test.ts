/**
 * The NodeTypeStore contract (core's suite) against the real PostgreSQL server, each test in a fresh schema, plus
 * what only the PostgreSQL store promises: JSON served byte for byte, and one order when registries publish at once.
 */
import { afterEach, describe, expect, it } from "vitest";
import { nodeTypeStoreContract, storedNodeType } from "../../../core/test/store/node-type-store-contract.js";
import { openPgNodeTypeStore, type PgNodeTypeStore } from "../src/index.js";
import { dropSchema, newSchema, OPEN_OPTIONS, storeUrl } from "./support/pg.js";

const options = { ...OPEN_OPTIONS, service: "node-registry" } as const;

nodeTypeStoreContract("PostgreSQL", async () => {
  const schema = newSchema();
  return {
    store: await openPgNodeTypeStore(storeUrl(schema), options),
    reopen: () => openPgNodeTypeStore(storeUrl(schema), options),
    cleanup: () => dropSchema(schema),
  };
});

describe("PgNodeTypeStore on the server", () => {
  const schemas: string[] = [];
  const stores: PgNodeTypeStore[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    for (const s of schemas.splice(0)) await dropSchema(s);
  });
  async function open(schema: string): Promise<PgNodeTypeStore> {
    const store = await openPgNodeTypeStore(storeUrl(schema), options);
    stores.push(store);
    return store;
  }

  it("serves a node type's JSON byte for byte, spacing and key order kept", async () => {
    const schema = newSchema();
    schemas.push(schema);
    const store = await open(schema);
    const record = { ...storedNodeType("bytes.kept", "1.0.0"), json: `{ "z": 1,  "a": [ 2, 1 ], "node_type_id": "bytes.kept" }` };
    expect((await store.insertNodeType(record)).inserted).toBe(true);
    expect((await store.getNodeType("bytes.kept", "1.0.0"))!.json).toBe(record.json);
    expect((await store.latestNodeType("bytes.kept"))!).toEqual(record);
    expect((await store.listNodeTypes({ limit: 10 })).items[0]!.json).toBe(record.json);
  });

  it("gives every version its own place when two registries publish versions of one node type at once", async () => {
    const schema = newSchema();
    schemas.push(schema);
    const [a, b] = [await open(schema), await open(schema)];
    const versions = Array.from({ length: 20 }, (_, i) => `build-${String(i).padStart(2, "0")}`);
    const results = await Promise.all(versions.map((v, i) => (i % 2 === 0 ? a : b).insertNodeType(storedNodeType("race.t", v))));
    expect(results.every((r) => r.inserted)).toBe(true);
    const listed = await a.listVersions("race.t");
    expect([...listed].sort()).toEqual(versions);
    // Non-semver versions rank by publication: the latest is the last in the order, seen alike by both stores.
    expect((await b.latestNodeType("race.t"))!.version).toBe(listed.at(-1));
  });
});
