/**
 * Selection's store on PostgreSQL: every CandidateSet answered, its JSON kept in a json column and served byte for
 * byte. Sets are written once and never change.
 */
import type pg from "pg";
import type { CandidateSetStore, StoredCandidateSet } from "@nodefabric/core";
import { pingPool } from "./connect.js";

/** CandidateSetStore on one PostgreSQL schema. */
export class PgCandidateSetStore implements CandidateSetStore {
  private closing: Promise<void> | undefined;

  constructor(private readonly pool: pg.Pool) {}

  async insertCandidateSet(record: StoredCandidateSet): Promise<void> {
    await this.pool.query(
      `INSERT INTO candidate_sets (candidate_set_id, subtask_id, doc, created_at) VALUES ($1, $2, $3::json, $4::timestamptz)`,
      [record.candidate_set_id, record.subtask_id, record.json, record.created_at],
    );
  }

  async getCandidateSetJson(candidateSetId: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ json: string }>(`SELECT doc::text AS json FROM candidate_sets WHERE candidate_set_id = $1`, [
      candidateSetId,
    ]);
    return rows[0]?.json;
  }

  /** Whether the database answers now (for /v1/health; see pingPool). */
  ping(): Promise<void> {
    return pingPool(this.pool);
  }

  async close(): Promise<void> {
    this.closing ??= this.pool.end();
    return this.closing;
  }
}
