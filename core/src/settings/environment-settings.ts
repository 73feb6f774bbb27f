/**
 * The variables the fabric reads from the environment only, never from fabric.config.json: how it logs, the embedded
 * store's driver and writer, the CLI's token, and the executor's secrets. The code that uses each reads it where it
 * is used; this table names them for docs/configuration.md and the test that docs and code agree.
 */
import { defineSettings, setting } from "@nodefabric/sdk";

export const ENVIRONMENT_SETTINGS = defineSettings(
  "@nodefabric/core: environment only",
  {
    log_format: setting.oneOf(["json", "pretty"], {
      doc: "The services' log lines: JSON lines, or readable ones (default: readable on a terminal, JSON when piped).",
      env: "FABRIC_LOG_FORMAT",
    }),
    sqlite_driver: setting.oneOf(["node", "better-sqlite3"], {
      doc: "The embedded SQLite store's driver (default: node:sqlite where Node has it, else better-sqlite3).",
      env: "FABRIC_SQLITE_DRIVER",
    }),
    sqlite_writer: setting.oneOf(["thread", "inline"], {
      doc: "Where the SQLite store commits its writes: on a worker thread of their own, or on the event loop.",
      env: "FABRIC_SQLITE_WRITER",
      default: "inline",
    }),
    token: setting.string({ doc: "The bearer token `fabric run`, `fabric runs` and the other client commands send (or --token).", env: "FABRIC_TOKEN" }),
    secrets: setting.map(
      "The executor's secrets for handlers (`ctx.secrets`), never in the configuration file; bind each to hosts with executor.secret_hosts.",
      setting.string({ doc: "The secret NAME." }),
      { envPrefix: "FABRIC_SECRET_" },
    ),
  },
  { intro: "Read from the environment only: never from `fabric.config.json`, and not shown with it." },
);
