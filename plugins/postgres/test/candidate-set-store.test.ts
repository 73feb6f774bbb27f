/**
 * The CandidateSetStore on the real PostgreSQL server: a set's JSON comes back byte for byte, across stores and a reopen.
 */
import { afterEach, describe, expect, it } from "vitest";
import { openPgCandidateSetStore, type PgCandidateSetStore } from "../src/index.js";
import { dropSchema, newSchema, OPEN_OPTIONS, storeUrl } from "./support/pg.js";

const options = { ...OPEN_OPTIONS, service: "selection" } as const;

describe("CandidateSetStore: PostgreSQL", () => {
  const schemas: string[] = [];
  const stores: PgCandidateSetStore[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    for (const s of schemas.splice(0)) await dropSchema(s);
  });
  async function open(schema: string): Promise<PgCandidateSetStore> {
    const store = await openPgCandidateSetStore(storeUrl(schema), options);
    stores.push(store);
    return store;
  }
  function fresh(): string {
    const s = newSchema();
    schemas.push(s);
    return s;
  }

  it("stores a set and answers its JSON exactly as written; an unknown id is undefined", async () => {
    const store = await open(fresh());
    const json = `{"candidate_set_id":"cs_1","subtask_id":"st_1",  "candidates":[{"z":1,"a":2}] }`;
    await store.insertCandidateSet({ candidate_set_id: "cs_1", subtask_id: "st_1", json, created_at: new Date().toISOString() });
    expect(await store.getCandidateSetJson("cs_1")).toBe(json);
    expect(await store.getCandidateSetJson("cs_missing")).toBeUndefined();
    await expect(store.ping()).resolves.toBeUndefined();
  });

  it("refuses a second set with the same id, keeping the first", async () => {
    const store = await open(fresh());
    const first = { candidate_set_id: "cs_1", subtask_id: "st_1", json: `{"n":1}`, created_at: new Date().toISOString() };
    await store.insertCandidateSet(first);
    await expect(store.insertCandidateSet({ ...first, json: `{"n":2}` })).rejects.toThrow(/duplicate key/);
    expect(await store.getCandidateSetJson("cs_1")).toBe(`{"n":1}`);
  });

  it("answers sets another store wrote, and keeps them across a reopen; close twice is fine", async () => {
    const schema = fresh();
    const a = await open(schema);
    const b = await open(schema);
    await a.insertCandidateSet({ candidate_set_id: "cs_x", subtask_id: "st", json: `[1, 2]`, created_at: new Date().toISOString() });
    expect(await b.getCandidateSetJson("cs_x")).toBe(`[1, 2]`);
    await a.close();
    await a.close();
    const c = await open(schema);
    expect(await c.getCandidateSetJson("cs_x")).toBe(`[1, 2]`);
  });
});
