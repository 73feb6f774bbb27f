/** Types of sqlite-writer.mjs. */

/** One batch of rows, each group a flat array of statement parameters, 8 per run, 14 per NodeRun, 7 per approval, 7 per row of events. */
export interface WriteRows {
  runs: unknown[];
  nodeRuns: unknown[];
  approvals: unknown[];
  events: unknown[];
}

/** The prepared statements writeRows binds. */
export interface WriteStatements {
  runs: { run(...params: unknown[]): unknown };
  nodeRuns: { run(...params: unknown[]): unknown };
  approvals: { run(...params: unknown[]): unknown };
  events: { run(...params: unknown[]): unknown };
}

/** Runs a batch of rows on prepared statements; the caller holds the transaction. */
export declare function writeRows(statements: WriteStatements, rows: WriteRows): void;
