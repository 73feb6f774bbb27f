/**
 * How a store URL becomes a connection: `?schema=` puts the store's tables and every connection in that schema, the
 * store options set the pool and the statement timeout, and a bad schema name is refused before connecting.
 */
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import plugin, { MIGRATIONS, pgTarget } from "../src/index.js";
import { dropSchema, newSchema, OPEN_OPTIONS, PG_URL, storeUrl } from "./support/pg.js";

const schemas: string[] = [];
afterEach(async () => {
  for (const s of schemas.splice(0)) await dropSchema(s);
});

describe("store URLs", () => {
  it("declares the three stores for postgres:// and postgresql://", () => {
    expect(plugin.stores?.schemes).toEqual(["postgres", "postgresql"]);
    expect(typeof plugin.stores?.runs).toBe("function");
    expect(typeof plugin.stores?.nodeTypes).toBe("function");
    expect(typeof plugin.stores?.candidateSets).toBe("function");
  });

  it("opens every store in the URL's schema, migrated, with the statement timeout of the options", async () => {
    const schema = newSchema();
    schemas.push(schema);
    const url = storeUrl(schema);
    url.protocol = "postgresql:";
    const options = { ...OPEN_OPTIONS, statementTimeoutMs: 1_234 };
    const runs = await plugin.stores!.runs!(url, options);
    const types = await plugin.stores!.nodeTypes!(url, options);
    const sets = await plugin.stores!.candidateSets!(url, options);
    await types.ping();
    await sets.ping();
    expect(await runs.listRuns({ limit: 1 })).toEqual([]);
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      const { rows } = await admin.query(`SELECT max(version) AS v FROM ${schema}.nodefabric_migrations`);
      expect(rows[0].v).toBe(MIGRATIONS.at(-1)!.version);
    } finally {
      await admin.end();
    }
    // A connection as the stores open them: in the schema, with the timeout.
    const client = new pg.Client(pgTarget(url, options).config);
    await client.connect();
    try {
      expect((await client.query("SELECT current_schema() AS s")).rows[0].s).toBe(schema);
      expect((await client.query("SHOW statement_timeout")).rows[0].statement_timeout).toBe("1234ms");
    } finally {
      await client.end();
    }
    for (const s of [runs, types, sets]) {
      await s.close();
      await s.close();
    }
  });

  it("keeps the URL's own options beside the schema's search_path", () => {
    const url = new URL(`${PG_URL}?options=${encodeURIComponent("-c lock_timeout=500")}&schema=nf_x`);
    const config = pgTarget(url).config;
    expect(new URL(config.connectionString!).searchParams.get("options")).toBe("-c lock_timeout=500 -c search_path=nf_x");
    expect(new URL(config.connectionString!).searchParams.has("schema")).toBe(false);
  });

  it("refuses a schema name that is not a plain identifier, before connecting", async () => {
    const url = new URL(`${PG_URL}?schema=${encodeURIComponent('x"; DROP')}`);
    expect(() => pgTarget(url)).toThrow(/is not a plain identifier/);
    await expect(plugin.stores!.runs!(url, OPEN_OPTIONS)).rejects.toThrow(/is not a plain identifier/);
  });
});
