/**
 * The SQLite drivers this Node can run, for the store suites to run once per driver: node:sqlite on Node 22.13 and
 * later, better-sqlite3 wherever its native module loads. $BETTER_SQLITE3_BINDING names a better_sqlite3.node built
 * for this Node when the installed one was built for another (CI's Node 24 leg, .ci/better-sqlite3.sh).
 * A driver that cannot run here is listed in `unavailable` with the reason, which the suites print as a skipped test.
 */
import { nodeHasSqlite, openSqliteDatabase, type SqliteDriverName, type SqliteOpenOptions } from "../../src/store/sqlite-driver.js";

/** A driver the suites run against, with the options that open a file with it. */
export interface DriverUnderTest {
  name: SqliteDriverName;
  options: SqliteOpenOptions & { driver: SqliteDriverName };
}

function probe(options: SqliteOpenOptions & { driver: SqliteDriverName }): string | undefined {
  try {
    openSqliteDatabase(":memory:", options).close();
    return undefined;
  } catch (err) {
    return (err as Error).message.split("\n")[0];
  }
}

const available: DriverUnderTest[] = [];
const unavailable: Array<{ name: SqliteDriverName; reason: string }> = [];

if (nodeHasSqlite()) available.push({ name: "node", options: { driver: "node" } });
else unavailable.push({ name: "node", reason: `Node ${process.version} has no node:sqlite (22.13 or later has it)` });

const binding = process.env.BETTER_SQLITE3_BINDING || undefined;
const better = { driver: "better-sqlite3" as const, ...(binding ? { nativeBinding: binding } : {}) };
const betterProblem = probe(better);
if (betterProblem === undefined) available.push({ name: "better-sqlite3", options: better });
else unavailable.push({ name: "better-sqlite3", reason: `${betterProblem} (set BETTER_SQLITE3_BINDING, see .ci/better-sqlite3.sh)` });

/** Every driver the suites run against here. */
export const sqliteDrivers: readonly DriverUnderTest[] = available;

/** The drivers that cannot run here, each with why. */
export const unavailableSqliteDrivers: ReadonlyArray<{ name: SqliteDriverName; reason: string }> = unavailable;
