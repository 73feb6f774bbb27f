/**
 * @nodefabric/plugin-postgres: the fabric's stores on PostgreSQL (run, node type and candidate set stores, the run
 * store shared by several coordinators), their schema and its migrations, and the plugin definition.
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
export { default, openPgRunStore, openPgNodeTypeStore, openPgCandidateSetStore } from "./plugin.js";
export { PgRunStore } from "./pg-run-store.js";
// The error both run stores throw for a run that does not exist (core's, exported here as before).
export { UnknownRunError } from "@nodefabric/core";
export { PgNodeTypeStore } from "./pg-node-type-store.js";
export { PgCandidateSetStore } from "./pg-candidate-set-store.js";
export { pgTarget, type PgTarget } from "./connect.js";
