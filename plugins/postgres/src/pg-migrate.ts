/**
 * `migrate` on a pg Pool: one client, one transaction, released (and dropped when the rollback itself failed).
 */
import type pg from "pg";
import { migrateWith, type MigrateOptions, type MigrateResult } from "./migrate.js";

/** Brings the database behind `pool` up to this package's last migration (see migrateWith for the errors). */
export function migrate(pool: pg.Pool, options: MigrateOptions = {}): Promise<MigrateResult> {
  return migrateWith(async (work) => {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      await client.query("BEGIN");
      const result = await work(async (sql, params) => (await client.query(sql, params as unknown[] | undefined)).rows);
      await client.query("COMMIT");
      return result;
    } catch (err) {
      await client.query("ROLLBACK").catch((rollbackErr: Error) => (broken = rollbackErr));
      throw err;
    } finally {
      client.release(broken);
    }
  }, options);
}
