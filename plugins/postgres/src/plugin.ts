/**
 * The plugin definition core loads: the run, node type and candidate set stores for `postgres://` and
 * `postgresql://` store URLs (each opens its own pool and migrates the database first), and the
 * `fabric postgres migrate` command, which brings a database up to this release's schema.
 */
import { definePlugin, FABRIC_SETTINGS, type CommandTools, type StoreOpenOptions } from "@nodefabric/core";
import pg from "pg";
import { migrate } from "./pg-migrate.js";
import { MigrationError } from "./migrate.js";
import { openPool, pgTarget, type PgTarget } from "./connect.js";
import { PgRunStore } from "./pg-run-store.js";
import { PgNodeTypeStore } from "./pg-node-type-store.js";
import { PgCandidateSetStore } from "./pg-candidate-set-store.js";

/** Opens the RunStore (a SharedRunStore too) of a store URL; `?schema=<name>` picks the schema. */
export async function openPgRunStore(url: URL, options: Partial<StoreOpenOptions> = {}): Promise<PgRunStore> {
  const target = pgTarget(url, options);
  const pool = await openPool(target, options.poolSize);
  try {
    return await PgRunStore.open(pool, target);
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
}

/** Opens the NodeTypeStore of a store URL. */
export async function openPgNodeTypeStore(url: URL, options: Partial<StoreOpenOptions> = {}): Promise<PgNodeTypeStore> {
  const target = pgTarget(url, options);
  return new PgNodeTypeStore(await openPool(target, options.poolSize));
}

/** Opens the CandidateSetStore of a store URL. */
export async function openPgCandidateSetStore(url: URL, options: Partial<StoreOpenOptions> = {}): Promise<PgCandidateSetStore> {
  const target = pgTarget(url, options);
  return new PgCandidateSetStore(await openPool(target, options.poolSize));
}

/** A store URL as it may be printed: the password hidden. */
function redacted(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(not a URL)";
  }
}

function migrateCommand({ Command }: CommandTools) {
  return new Command("migrate")
    .description("apply this release's migrations to a PostgreSQL database (safe when several processes run it at once)")
    .option("--store <url>", "the database, postgres://user@host:port/db (default: $FABRIC_STORE_URL)")
    .option("--schema <name>", "the schema to migrate, created when missing (default: the connection's search_path)")
    .option(
      "--enable <name...>",
      "also apply the opt-in migrations of these names (grouped-events: once every coordinator runs this release; see docs/deploy.md)",
    )
    .action(async (opts: { store?: string; schema?: string; enable?: string[] }) => {
      // The fabric's own store.url variable, read as its settings table says.
      const url = opts.store ?? FABRIC_SETTINGS.fromEnv(process.env, { invalid: "keep" }).store?.url;
      if (!url) {
        process.stderr.write("fabric postgres migrate: give the database with --store postgres://… or FABRIC_STORE_URL\n");
        process.exitCode = 2;
        return;
      }
      let scheme: string;
      try {
        scheme = new URL(url).protocol;
      } catch {
        scheme = "";
      }
      if (scheme !== "postgres:" && scheme !== "postgresql:") {
        process.stderr.write(`fabric postgres migrate: ${redacted(url)} is not a postgres:// or postgresql:// URL\n`);
        process.exitCode = 2;
        return;
      }
      // The URL's ?schema= counts as the stores read it; --schema, when given, wins.
      let target: PgTarget;
      try {
        target = pgTarget(new URL(url));
      } catch (err) {
        process.stderr.write(`fabric postgres migrate: ${redacted(url)}: ${(err as Error).message}\n`);
        process.exitCode = 2;
        return;
      }
      const schema = opts.schema ?? target.schema;
      // No query timeout: a migration may wait for another process's migration lock.
      const pool = new pg.Pool({ ...target.config, query_timeout: undefined, max: 1, connectionTimeoutMillis: 10_000 });
      try {
        const result = await migrate(pool, { ...(schema === undefined ? {} : { schema }), enable: opts.enable ?? [] });
        const where = `${redacted(url)}${schema ? ` (schema ${schema})` : ""}`;
        process.stdout.write(
          result.applied.length === 0
            ? `${where} is at version ${result.version}: nothing to apply\n`
            : `${where}: applied ${result.applied.join(", ")}; now at version ${result.version}\n`,
        );
        const optIn = result.waiting[0];
        if (optIn) {
          process.stdout.write(
            `migration ${optIn.version} (${optIn.name}) waits to be enabled: once every coordinator on this database runs this ` +
              `release, run fabric postgres migrate --enable ${optIn.optIn}\n`,
          );
        }
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        process.stderr.write(`fabric postgres migrate: ${redacted(url)}: ${message}\n`);
        // A migration that refuses itself (RAISE EXCEPTION, as the grouped-events switch does while older
        // coordinators are live) stops on a rule, as the checks of MigrationError do.
        process.exitCode = err instanceof MigrationError || (err as { code?: unknown }).code === "P0001" ? 2 : 1;
      } finally {
        await pool.end();
      }
    });
}

export default definePlugin({
  name: "@nodefabric/plugin-postgres",
  stores: {
    schemes: ["postgres", "postgresql"],
    runs: openPgRunStore,
    nodeTypes: openPgNodeTypeStore,
    candidateSets: openPgCandidateSetStore,
  },
  commands: [(tools) => new tools.Command("postgres").description("NodeFabric's PostgreSQL store").addCommand(migrateCommand(tools))],
});
