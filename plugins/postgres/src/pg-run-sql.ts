/**
 * What the PostgreSQL run store's statements share: the open states as the migrations' partial indexes spell them,
 * the columns read back (timestamps as epoch ms), and the count of ready work.
 */
import { ms, ts } from "./connect.js";

// Spelled as in the partial indexes of the migrations, so PostgreSQL can use them.
export const OPEN_RUN = `state IN ('queued', 'running')`;
export const OPEN_NODE_RUN = `state IN ('queued', 'assigned', 'running')`;
export const TERMINAL = new Set(["completed", "failed", "canceled"]);

export const RUN_COLUMNS = `run_id, tenant_id, state, doc, request_hash, ${ms("deadline_at")} AS deadline_at, ${ms("created_at")} AS created_at`;
export const NODE_RUN_COLUMNS =
  `node_run_id, run_id, parent_node_run_id, state, doc, attempt, ${ms("available_at")} AS available_at, lease_owner, ` +
  `${ms("lease_expires_at")} AS lease_expires_at, approval_id, idempotency_key, spec_hash, depth, ${ms("created_at")} AS created_at`;
export const APPROVAL_COLUMNS = `approval_id, run_id, node_run_id, state, doc, ${ms("created_at")} AS created_at, ${ms("resolved_at")} AS resolved_at`;

/**
 * Ready work for the metrics (queueStats, $1 = now): the claim's two index ranges, counted apart. An OR of them
 * implies neither partial index, and the count would read every NodeRun ever stored at each metrics scrape.
 */
export const QUEUE_STATS_SQL = `SELECT sum(n)::int8 AS depth, (extract(epoch FROM min(oldest)) * 1000)::int8 AS oldest FROM (
     SELECT count(*) AS n, min(available_at) AS oldest FROM node_runs
     WHERE lease_owner IS NULL AND approval_id IS NULL AND ${OPEN_NODE_RUN} AND available_at <= ${ts("$1")}
     UNION ALL
     SELECT count(*), min(available_at) FROM node_runs
     WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN} AND lease_expires_at < ${ts("$1")}
       AND approval_id IS NULL AND available_at <= ${ts("$1")}) AS q`;
