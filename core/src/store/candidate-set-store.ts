/**
 * What Selection needs from storage: every CandidateSet it answered, so the coordinator can later
 * check that a binding names one of its members. Sets are written once and never change.
 */

/** One stored CandidateSet; `json` is the body exactly as it was answered. */
export interface StoredCandidateSet {
  candidate_set_id: string;
  subtask_id: string;
  json: string;
  created_at: string;
}

export interface CandidateSetStore {
  /** Stores a new set (ids are unique server-made ids, so this never replaces one). */
  insertCandidateSet(record: StoredCandidateSet): Promise<void>;
  /** The JSON of a stored set, or undefined. */
  getCandidateSetJson(candidateSetId: string): Promise<string | undefined>;
  /** A trivial round trip, for health checks. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
