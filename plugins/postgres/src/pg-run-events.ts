/**
 * The rows of the PostgreSQL run store's `events` table, in its two forms, and how a run's events are read back from
 * any mix of them.
 *
 * Every release wrote, and this one still writes until the database has migration 4 (enabled as `grouped-events`,
 * see migrations.ts), one row per event: `seq` its seq, `last_seq` NULL, `payload` the event. Once it has it, a
 * transaction writes one row per run: `seq` to `last_seq`, `payload` a JSON array of those events. A release before
 * this one reads every row as one event, so the grouped form waits for the switch, which is refused while one of them
 * runs; this release reads both forms everywhere it reads events, so it may meet either in any order. Seqs stay
 * gapless either way (they come from runs.last_seq), so the rows of a run tile its seqs without overlap.
 */
import { eventWithSeq, type NewRunEvent, type RunStore } from "@nodefabric/core";

type RunEvent = Awaited<ReturnType<RunStore["apply"]>>[number];

/** One row of `events` as apply sends it to jsonb_to_recordset. */
interface EventRow {
  run_id: string;
  seq: number;
  last_seq?: number;
  node_run_id: string | null;
  type: string;
  at: string;
  payload: RunEvent | RunEvent[];
}

/**
 * The rows of a batch's events, and the events with their seqs in batch order. `next` holds each run's first seq of
 * the batch, and afterwards its seq after its last event of the batch. Grouped, a run's events of the batch take one
 * row, their seqs consecutive; otherwise one row each.
 */
export function eventRows(events: readonly NewRunEvent[], next: Map<string, number>, grouped: boolean): { rows: EventRow[]; out: RunEvent[] } {
  const out: RunEvent[] = new Array(events.length);
  const rows: EventRow[] = [];
  const groups = grouped ? new Map<string, RunEvent[]>() : undefined;
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    const seq = next.get(e.run_id)!;
    next.set(e.run_id, seq + 1);
    const ev = eventWithSeq(e, seq);
    out[i] = ev;
    if (groups === undefined) {
      rows.push({ run_id: e.run_id, seq, node_run_id: e.node_run_id ?? null, type: e.type, at: e.time, payload: ev });
      continue;
    }
    const group = groups.get(e.run_id);
    if (group) group.push(ev);
    else {
      const first: RunEvent[] = [ev];
      groups.set(e.run_id, first);
      rows.push({ run_id: e.run_id, seq, last_seq: seq, node_run_id: e.node_run_id ?? null, type: e.type, at: e.time, payload: first });
    }
  }
  if (groups !== undefined) for (const row of rows) row.last_seq = row.seq + (row.payload as RunEvent[]).length - 1;
  return { rows, out };
}

/**
 * The CTE of apply's second statement that inserts the rows of eventRows (`$3`, a JSON array). The grouped form names
 * last_seq, which the table has only once migration 4 is applied; the other is the statement every release ran.
 */
export function insertEventsSql(grouped: boolean): string {
  return grouped
    ? `INSERT INTO events (run_id, seq, last_seq, node_run_id, type, at, payload)
           SELECT e.run_id, e.seq, e.last_seq, e.node_run_id, e.type, e.at::timestamptz, e.payload
           FROM jsonb_to_recordset($3::jsonb) AS e(run_id text, seq int8, last_seq int8, node_run_id text, type text, at text, payload jsonb)`
    : `INSERT INTO events (run_id, seq, node_run_id, type, at, payload)
           SELECT e.run_id, e.seq, e.node_run_id, e.type, e.at::timestamptz, e.payload
           FROM jsonb_to_recordset($3::jsonb) AS e(run_id text, seq int8, node_run_id text, type text, at text, payload jsonb)`;
}

/**
 * A run's event rows from the one holding seq `$2` on, in seq order, at most `$3` rows. The row holding `$2` is the
 * last one starting at or before it (the rows tile the seqs); with none, every row starts after `$2`. Both are ranges
 * of the primary key (run_id, seq), and it reads no column that only migration 4 adds, so it runs before the switch.
 * At most `$3` rows always hold `$3` events from `$2` when the run has them: only the first may start before `$2`,
 * and it holds `$2` unless it is the run's last.
 */
export const LIST_EVENTS_SQL = `SELECT payload FROM events
  WHERE run_id = $1 AND seq >= coalesce((SELECT seq FROM events WHERE run_id = $1 AND seq <= $2 ORDER BY seq DESC LIMIT 1), $2)
  ORDER BY seq LIMIT $3`;

/** jsonb keeps keys in its own order; events are handed out with the key order the SQLite store writes. */
function eventFrom(doc: RunEvent): RunEvent {
  return eventWithSeq(doc, doc.seq);
}

/** The events of rows read by LIST_EVENTS_SQL with seq `from` onwards, at most `limit`, whichever form each row has. */
export function eventsFrom(rows: ReadonlyArray<{ payload: RunEvent | RunEvent[] }>, from: number, limit: number): RunEvent[] {
  const out: RunEvent[] = [];
  for (const { payload } of rows) {
    if (Array.isArray(payload)) {
      for (const e of payload) {
        if (e.seq < from) continue;
        out.push(eventFrom(e));
        if (out.length === limit) return out;
      }
    } else if (payload.seq >= from) {
      out.push(eventFrom(payload));
      if (out.length === limit) return out;
    }
  }
  return out;
}
