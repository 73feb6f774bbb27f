/**
 * Transactions on a pg Pool, and `migrate` on one: one client, one transaction, released (and dropped when the
 * connection was lost or the rollback itself failed).
 */
import type pg from "pg";
import { migrateWith, type MigrateOptions, type MigrateResult } from "./migrate.js";
import { asStoreError, isConnectionLost } from "./connection-lost.js";

/** Runs `work` in one transaction on one pooled connection. */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (err) {
    // A connection lost mid-transaction: the server rolls the transaction back itself (or never saw it commit);
    // the connection is dropped, not handed to the next caller, and the caller learns the database is unreachable.
    // A COMMIT whose answer was lost may have been applied: the caller must not assume either way.
    if (isConnectionLost(err)) {
      broken = err as Error;
      throw asStoreError(err);
    }
    await client.query("ROLLBACK").catch((e: Error) => (broken = e));
    throw err;
  } finally {
    client.release(broken);
  }
}

/** Brings the database behind `pool` up to this package's last migration (see migrateWith for the errors). */
export function migrate(pool: pg.Pool, options: MigrateOptions = {}): Promise<MigrateResult> {
  return migrateWith(
    (work) => inTransaction(pool, (client) => work(async (sql, params) => (await client.query(sql, params as unknown[] | undefined)).rows)),
    options,
  );
}
