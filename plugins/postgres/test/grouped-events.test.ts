/**
 * Grouped event rows on the real PostgreSQL server, and the rolling upgrade to them: a database in use keeps one row
 * per event until an operator enables migration 4 (`grouped-events`), which is refused while a coordinator of the
 * earlier release is live; the earlier release's SQL sees every event until then; a run reads back the same whatever
 * mix of forms it holds; and the store contract passes on a database that has not switched (run-store.test.ts runs it
 * on a new database, which groups from the start).
 */
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import type { NewRunEvent, RunStore } from "@nodefabric/core";
import { makeEvent, makeRun, runStoreContract } from "../../../core/test/store/run-store-contract.js";
import { migrate, MigrationError, openPgRunStore, type PgRunStore } from "../src/index.js";
import { dropSchema, newSchema, OPEN_OPTIONS, PG_URL, storeUrl } from "./support/pg.js";
import { EARLIER_MIGRATIONS, earlierAnnounce, earlierListEvents, earlierWriteEvents } from "./support/earlier-release.js";

type RunEvent = Awaited<ReturnType<RunStore["apply"]>>[number];

/** A schema as the earlier release left it: migrated up to its last migration, before the switch. */
async function earlierSchema(): Promise<string> {
  const schema = newSchema();
  const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
  try {
    await migrate(pool, { schema, migrations: EARLIER_MIGRATIONS });
  } finally {
    await pool.end();
  }
  return schema;
}

/** Runs `work` on one connection in `schema`. */
async function withClient<T>(schema: string, work: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: PG_URL, options: `-c search_path=${schema}` });
  await c.connect();
  try {
    return await work(c);
  } finally {
    await c.end();
  }
}

/** Enables grouped events on `schema`, as `fabric postgres migrate --enable grouped-events` does. */
async function enableGrouped(schema: string): Promise<number[]> {
  const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
  try {
    return (await migrate(pool, { schema, enable: ["grouped-events"] })).applied;
  } finally {
    await pool.end();
  }
}

/** The rows of a run's events as stored: where each starts and ends, and whether it holds an array. */
function rowsOf(schema: string, runId: string): Promise<Array<{ seq: number; last_seq: number | null; grouped: boolean }>> {
  return withClient(schema, async (c) => {
    const hasLastSeq = (await c.query(`SELECT 1 FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'events' AND column_name = 'last_seq'`, [schema])).rowCount === 1;
    const { rows } = await c.query(
      `SELECT seq::float8 AS seq, ${hasLastSeq ? "last_seq::float8" : "NULL::float8"} AS last_seq, jsonb_typeof(payload) = 'array' AS grouped
       FROM events WHERE run_id = $1 ORDER BY seq`,
      [runId],
    );
    return rows;
  });
}

/** `n` events of `runId`, numbered in their data from `start`. */
function eventsOf(runId: string, start: number, n: number): NewRunEvent[] {
  return Array.from({ length: n }, (_, i) => makeEvent(runId, { data: { n: start + i } }));
}

/** Every page from every seq equals the slice of `all` it should be. */
async function expectEveryPage(read: (after: number, limit: number) => Promise<RunEvent[]>, all: RunEvent[]): Promise<void> {
  for (let after = -1; after <= all.length; after++) {
    for (const limit of [1, 2, 3, 5, 100]) {
      expect(await read(after, limit), `after ${after}, limit ${limit}`).toEqual(all.slice(after + 1, after + 1 + limit));
    }
  }
}

// The contract on a database in use that has not switched: every event in a row of its own.
runStoreContract("PostgreSQL, one row per event (before grouped-events is enabled)", async () => {
  const schema = await earlierSchema();
  const store = await openPgRunStore(storeUrl(schema), OPEN_OPTIONS);
  expect(store.writesGroupedEvents).toBe(false);
  return {
    store,
    reopen: () => openPgRunStore(storeUrl(schema), OPEN_OPTIONS),
    cleanup: () => dropSchema(schema),
  };
});

describe("grouped event rows and the rolling upgrade to them", () => {
  const schemas: string[] = [];
  const stores: PgRunStore[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    for (const s of schemas.splice(0)) await dropSchema(s);
  });

  async function open(schema: string, owner?: string): Promise<PgRunStore> {
    const store = await openPgRunStore(storeUrl(schema), OPEN_OPTIONS);
    stores.push(store);
    if (owner !== undefined) store.attach(owner, 5_000);
    return store;
  }

  it("a new database groups from the start: a transaction's events of a run in one row, seq to last_seq", async () => {
    const schema = newSchema();
    schemas.push(schema);
    const store = await open(schema);
    expect(store.writesGroupedEvents).toBe(true);
    const [run, other] = [makeRun(), makeRun()];
    await store.apply({ runs: [run, other] });
    const written = await store.apply({ events: [makeEvent(run.run_id), makeEvent(other.run_id), makeEvent(run.run_id, { type: "node_run_completed" }), makeEvent(run.run_id)] });
    expect(written.map((e) => [e.run_id, e.seq])).toEqual([[run.run_id, 0], [other.run_id, 0], [run.run_id, 1], [run.run_id, 2]]);
    expect(await rowsOf(schema, run.run_id)).toEqual([{ seq: 0, last_seq: 2, grouped: true }]);
    expect(await rowsOf(schema, other.run_id)).toEqual([{ seq: 0, last_seq: 0, grouped: true }]);
    const { rows } = await withClient(schema, (c) => c.query(`SELECT type, payload FROM events WHERE run_id = $1`, [run.run_id]));
    // The row's type is its first event's; its payload the events as listEvents hands them out.
    expect(rows).toEqual([{ type: "node_run_started", payload: written.filter((e) => e.run_id === run.run_id) }]);
  });

  it("before the switch writes one row per event, which the SQL of the earlier release reads whole, and reads that release's rows", async () => {
    const schema = await earlierSchema();
    schemas.push(schema);
    const store = await open(schema, "coordinator-new");
    expect(store.writesGroupedEvents).toBe(false);
    const [run, other] = [makeRun({ state: "running" }), makeRun({ state: "running" })];
    await store.apply({ runs: [run, other] });
    const all: RunEvent[] = [];
    for (const size of [1, 4, 2]) {
      const written = await store.apply({ events: [...eventsOf(run.run_id, all.length, size), ...eventsOf(other.run_id, 0, 2)] });
      all.push(...written.filter((e) => e.run_id === run.run_id));
    }
    expect(await rowsOf(schema, run.run_id)).toEqual(all.map((e) => ({ seq: e.seq, last_seq: null, grouped: false })));
    await withClient(schema, (c) => expectEveryPage((after, limit) => earlierListEvents(c, run.run_id, after, limit), all));

    // A coordinator of the earlier release writes to a run in its way (a run it held before it was taken over); this
    // release reads those rows and carries the seqs on.
    const third = makeRun({ state: "running" });
    await store.apply({ runs: [third] });
    const before = await withClient(schema, (c) => earlierWriteEvents(c, third.run_id, eventsOf(third.run_id, 0, 3)));
    const after = await store.apply({ events: eventsOf(third.run_id, 3, 2) });
    expect(after.map((e) => e.seq)).toEqual([3, 4]);
    await expectEveryPage((a, limit) => store.listEvents(third.run_id, a, limit), [...before, ...after]);
    await withClient(schema, (c) => expectEveryPage((a, limit) => earlierListEvents(c, third.run_id, a, limit), [...before, ...after]));
  });

  it("is refused while a coordinator of the earlier release is live, and once enabled, running stores group and that release no longer starts", async () => {
    const schema = await earlierSchema();
    schemas.push(schema);
    const store = await open(schema, "coordinator-new");
    await store.announce(null, Date.now(), 60_000);
    await withClient(schema, (c) => earlierAnnounce(c, "coordinator-earlier", 60_000));
    const run = makeRun({ state: "running" });
    const first = await store.apply({ runs: [run], events: eventsOf(run.run_id, 0, 2) });

    const refused = await enableGrouped(schema).catch((e: unknown) => e);
    expect((refused as Error).message).toBe(
      "grouped events need every coordinator to read them, and these live coordinators run an earlier release: coordinator-earlier",
    );
    const versions = () => withClient(schema, async (c) => (await c.query(`SELECT version FROM nodefabric_migrations ORDER BY version`)).rows.map((r) => r.version));
    expect(await versions()).toEqual([1, 2, 3]);
    const still = await store.apply({ events: eventsOf(run.run_id, 2, 2) });
    expect(store.writesGroupedEvents).toBe(false);

    // The earlier coordinator is replaced: its entry in the directory ends, as its clean stop ends it.
    await withClient(schema, (c) => c.query(`UPDATE coordinators SET expires_at = now() - interval '1 second' WHERE instance_id = 'coordinator-earlier'`));
    expect(await enableGrouped(schema)).toEqual([4]);
    expect(await versions()).toEqual([1, 2, 3, 4]);

    // The store, open all along, learns it with its next write.
    const grouped = await store.apply({ events: eventsOf(run.run_id, 4, 3) });
    expect(store.writesGroupedEvents).toBe(true);
    expect(await rowsOf(schema, run.run_id)).toEqual([
      { seq: 0, last_seq: null, grouped: false },
      { seq: 1, last_seq: null, grouped: false },
      { seq: 2, last_seq: null, grouped: false },
      { seq: 3, last_seq: null, grouped: false },
      { seq: 4, last_seq: 6, grouped: true },
    ]);
    await expectEveryPage((after, limit) => store.listEvents(run.run_id, after, limit), [...first, ...still, ...grouped]);

    // A process of the earlier release stops at the migration it does not know, before it reads anything.
    const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
    try {
      const err = await migrate(pool, { schema, migrations: EARLIER_MIGRATIONS }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MigrationError);
      expect((err as MigrationError).code).toBe("FABRIC_PG_DATABASE_NEWER");
    } finally {
      await pool.end();
    }
  });

  it("reads a run back in order whatever mix of forms it holds, from any seq, on every coordinator, as notices arrive", async () => {
    const schema = await earlierSchema();
    schemas.push(schema);
    const [a, b] = [await open(schema, "coordinator-a"), await open(schema, "coordinator-b")];
    const heard: Array<[string | null, number]> = [];
    b.onCommit((runId, seq) => heard.push([runId, seq]));
    await b.whenListening();
    const [run, other] = [makeRun({ state: "running" }), makeRun({ state: "running" })];
    await a.apply({ runs: [run, other] });
    const all: RunEvent[] = [];
    const write = async (sizes: number[]) => {
      for (const size of sizes) {
        const written = await a.apply({ events: [...eventsOf(run.run_id, all.length, size), ...eventsOf(other.run_id, 0, 1)] });
        all.push(...written.filter((e) => e.run_id === run.run_id));
      }
    };
    await write([1, 3, 1]);
    await enableGrouped(schema);
    await write([2, 4, 1, 3]);
    expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 15 }, (_, i) => i));
    expect((await rowsOf(schema, run.run_id)).map((r) => [r.seq, r.last_seq, r.grouped])).toEqual([
      [0, null, false], [1, null, false], [2, null, false], [3, null, false], [4, null, false],
      [5, 6, true], [7, 10, true], [11, 11, true], [12, 14, true],
    ]);
    // b has not written since the switch, and reads the same: reading never depended on the switch.
    expect(b.writesGroupedEvents).toBe(false);
    for (const store of [a, b]) await expectEveryPage((after, limit) => store.listEvents(run.run_id, after, limit), all);
    expect(await b.listEvents(run.run_id, 8, 0)).toEqual([]);

    // The notice of a's last commit names the run's last seq; b, which had read up to seq 12, reads from the middle
    // of the last grouped row, as a follower catching up does.
    await expect.poll(() => heard.some(([id, seq]) => id === run.run_id && seq === 14), { timeout: 10_000 }).toBe(true);
    expect(await b.listEvents(run.run_id, 12, 100)).toEqual(all.slice(13));
  });
});
