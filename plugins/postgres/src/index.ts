/**
 * @nodefabric/plugin-postgres: the fabric's stores on PostgreSQL. This first part is the schema and its migrations;
 * the stores and the plugin definition build on it.
 */
export { migrate } from "./pg-migrate.js";
export {
  MIGRATION_LOCK_KEY,
  MIGRATIONS,
  MIGRATIONS_TABLE,
  MigrationError,
  migrateWith,
  migrationChecksum,
  type InTransaction,
  type MigrateOptions,
  type MigrateResult,
  type Migration,
  type MigrationQuery,
} from "./migrate.js";
export { default } from "./plugin.js";
