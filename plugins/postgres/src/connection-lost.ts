/**
 * Whether an error of pg means the database cannot be reached right now, and that error as core must see it (a
 * StoreUnavailableError): a module of its own, so opening a pool (connect.ts) and the transactions and migrations on
 * it (pg-migrate.ts) both use it without importing each other. docs/deploy.md, "When the database goes away".
 */
import { StoreUnavailableError } from "@nodefabric/core";

/** Socket error codes that mean the server cannot be reached now (not a wrong address). */
const OUTAGE_SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "EAI_AGAIN",
]);
/**
 * SQLSTATEs of a server that is going away or not taking connections yet: admin_shutdown, crash_shutdown,
 * cannot_connect_now (starting up, or in recovery), too_many_connections, idle_session_timeout; and class 08, the
 * connection exceptions.
 */
const OUTAGE_SQLSTATES = new Set(["57P01", "57P02", "57P03", "53300", "57P05"]);
/** What pg says when it loses or times out a connection (it sets no code then). */
const OUTAGE_MESSAGES =
  /^(Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error and is not queryable|connection timeout)/i;

/**
 * Whether an error of pg means the database cannot be reached right now: an outage to wait out. Errors of the SQL
 * (syntax, constraints, serialization), a wrong password (28P01) or an unknown database (3D000) or host (ENOTFOUND)
 * are not: they are bugs or configuration mistakes.
 */
export function isConnectionLost(err: unknown): boolean {
  if (StoreUnavailableError.is(err)) return true;
  if (typeof err !== "object" || err === null) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (typeof code === "string") {
    if (OUTAGE_SOCKET_CODES.has(code) || OUTAGE_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code)) return true;
  }
  return typeof message === "string" && OUTAGE_MESSAGES.test(message);
}

/** `err` as core must see it: a StoreUnavailableError when the database cannot be reached, else itself. */
export function asStoreError(err: unknown): unknown {
  if (StoreUnavailableError.is(err) || !isConnectionLost(err)) return err;
  return new StoreUnavailableError(`the database cannot be reached: ${(err as Error).message || String((err as { code?: unknown }).code)}`, { cause: err });
}

/** How a store connects: what pg needs for a Pool or a Client, and the schema, if the URL names one. */
