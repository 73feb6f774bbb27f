/**
 * The run store's records as rows of its tables, the same for the SQLite store and the PostgreSQL one
 * (plugins/postgres): the columns queries need beside each record's whole document, the mappers from a row back to
 * its record, and what both derive from a batch when they write it. `Doc` is how a row holds its document: JSON text
 * in SQLite, the parsed value of a jsonb column in PostgreSQL.
 */
import type { RunEvent } from "@nodefabric/schemas";
import type { ApprovalRecord, NewRunEvent, NodeRunRecord, RunRecord } from "./run-store.js";

/**
 * A row of each table: its record's columns as they are, and the record's document (`run`, `node_run`, an approval's
 * `decision`) as `doc`, so the two cannot drift apart.
 */
export type RunRow<Doc> = Omit<RunRecord, "run"> & { doc: Doc };
export type NodeRunRow<Doc> = Omit<NodeRunRecord, "node_run"> & { doc: Doc };
export type ApprovalRow<Doc> = Omit<ApprovalRecord, "decision"> & { doc: Doc };

/** The mappers from rows to records of a store whose rows hold documents as `Doc`; `read` makes a document a value. */
export interface RowMappers<Doc> {
  toRun(row: RunRow<Doc>): RunRecord;
  toNodeRun(row: NodeRunRow<Doc>): NodeRunRecord;
  toApproval(row: ApprovalRow<Doc>): ApprovalRecord;
}

/** The row-to-record mappers of a store that reads its documents with `read` (JSON.parse, or as they are). */
export function rowMappers<Doc>(read: (doc: Doc) => unknown): RowMappers<Doc> {
  return {
    toRun: (row) => ({
      run_id: row.run_id,
      tenant_id: row.tenant_id,
      state: row.state,
      run: read(row.doc) as RunRecord["run"],
      request_hash: row.request_hash,
      deadline_at: row.deadline_at,
      created_at: row.created_at,
    }),
    toNodeRun: (row) => ({
      node_run_id: row.node_run_id,
      run_id: row.run_id,
      parent_node_run_id: row.parent_node_run_id,
      state: row.state,
      node_run: read(row.doc) as NodeRunRecord["node_run"],
      attempt: row.attempt,
      available_at: row.available_at,
      lease_owner: row.lease_owner,
      lease_expires_at: row.lease_expires_at,
      approval_id: row.approval_id,
      idempotency_key: row.idempotency_key,
      spec_hash: row.spec_hash,
      depth: row.depth,
      created_at: row.created_at,
    }),
    toApproval: (row) => ({
      approval_id: row.approval_id,
      run_id: row.run_id,
      node_run_id: row.node_run_id,
      state: row.state,
      created_at: row.created_at,
      resolved_at: row.resolved_at,
      decision: read(row.doc) as ApprovalRecord["decision"],
    }),
  };
}

/** The node type id of each run's root NodeRun, when the batch holds it (a run's first batch does). */
export function rootTypesOf(runs: readonly RunRecord[], nodeRuns: readonly NodeRunRecord[]): Array<string | null> {
  const roots = new Map<string, string>();
  for (const r of runs) roots.set(r.run.root_node_run_id, "");
  for (const n of nodeRuns) if (roots.has(n.node_run_id)) roots.set(n.node_run_id, n.node_run.node_type_ref.node_type_id);
  return runs.map((r) => roots.get(r.run.root_node_run_id) || null);
}

/** Oldest first, then by id: the order claims answer in. */
export function byAge(a: NodeRunRecord, b: NodeRunRecord): number {
  if (a.created_at !== b.created_at) return a.created_at - b.created_at;
  return a.node_run_id < b.node_run_id ? -1 : a.node_run_id > b.node_run_id ? 1 : 0;
}

/**
 * An event with its seq, built field by field: seq lands second in the JSON, and a key set to undefined is left out,
 * as the schema wants. Both stores hand events out in this key order.
 */
export function eventWithSeq(e: NewRunEvent, seq: number): RunEvent {
  const ev: RunEvent = { run_id: e.run_id, seq, type: e.type, time: e.time };
  if (e.node_run_id !== undefined) ev.node_run_id = e.node_run_id;
  if (e.data !== undefined) ev.data = e.data;
  if (e.extensions !== undefined) ev.extensions = e.extensions;
  return ev;
}
