/**
 * A coordinator of the release before grouped event rows, as far as events go: its migrations and the SQL it runs to
 * read a run's events, to write them and to announce itself, copied as they were at commit 9cd13ed
 * (plugins/postgres/src/pg-run-store.ts and pg-run-ownership.ts there). The tests run these statements beside a store
 * of this release on one database, as a rolling upgrade has both at once.
 */
import type pg from "pg";
import type { NewRunEvent, RunStore } from "@nodefabric/core";
import { MIGRATIONS, type Migration } from "../../src/migrations.js";

type RunEvent = Awaited<ReturnType<RunStore["apply"]>>[number];
/** A connection or a pool, in the store's schema. */
type Queryable = pg.ClientBase | pg.Pool;

/** That release's migrations: every one before the grouped-events switch (their SQL is unchanged since). */
export const EARLIER_MIGRATIONS: readonly Migration[] = MIGRATIONS.filter((m) => m.version <= 3).map(({ version, name, sql }) => ({ version, name, sql }));

/** How it read a run's events: every row is one event. */
export const EARLIER_LIST_EVENTS = `SELECT payload FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`;

/** How it inserted a batch's events (the `ev` CTE of its apply), one row each. */
const EARLIER_INSERT_EVENTS = `INSERT INTO events (run_id, seq, node_run_id, type, at, payload)
           SELECT e.run_id, e.seq, e.node_run_id, e.type, e.at::timestamptz, e.payload
           FROM jsonb_to_recordset($1::jsonb) AS e(run_id text, seq int8, node_run_id text, type text, at text, payload jsonb)`;

/** How it announced itself in the coordinator directory ($3: expires_at, epoch ms). */
const EARLIER_ANNOUNCE = `INSERT INTO coordinators (instance_id, endpoint, expires_at) VALUES ($1, $2, ('epoch'::timestamptz + $3::int8 * interval '1 millisecond'))
       ON CONFLICT (instance_id) DO UPDATE SET endpoint = excluded.endpoint, expires_at = excluded.expires_at`;

/** What that release's listEvents answered, on a connection in the store's schema. */
export async function earlierListEvents(c: Queryable, runId: string, afterSeq: number, limit: number): Promise<RunEvent[]> {
  const { rows } = await c.query<{ payload: RunEvent }>(EARLIER_LIST_EVENTS, [runId, afterSeq, limit]);
  return rows.map((r) => r.payload);
}

/** Writes events of one run as that release's apply did: seqs from runs.last_seq, one row each, in one transaction. */
export async function earlierWriteEvents(c: pg.ClientBase, runId: string, events: readonly NewRunEvent[]): Promise<RunEvent[]> {
  await c.query("BEGIN");
  try {
    const { rows } = await c.query<{ last_seq: string }>(`UPDATE runs SET last_seq = last_seq + $2 WHERE run_id = $1 RETURNING last_seq`, [runId, events.length]);
    const first = Number(rows[0]!.last_seq) - events.length;
    const written: RunEvent[] = events.map((e, i) => ({ ...e, seq: first + i }));
    const eventRows = written.map((e) => ({ run_id: e.run_id, seq: e.seq, node_run_id: e.node_run_id ?? null, type: e.type, at: e.time, payload: e }));
    await c.query(EARLIER_INSERT_EVENTS, [JSON.stringify(eventRows)]);
    await c.query("COMMIT");
    return written;
  } catch (err) {
    await c.query("ROLLBACK");
    throw err;
  }
}

/** Announces a coordinator of that release, live for `ttlMs`. */
export async function earlierAnnounce(c: Queryable, instanceId: string, ttlMs: number): Promise<void> {
  await c.query(EARLIER_ANNOUNCE, [instanceId, "http://127.0.0.1:1", Date.now() + ttlMs]);
}
