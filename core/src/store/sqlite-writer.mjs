/**
 * The writes of the SQLite RunStore: rows already serialized by the store, bound to prepared statements and committed.
 * They run either on the store's own connection (`writeRows`, called inside its transaction; the default) or, with
 * FABRIC_SQLITE_WRITER=thread, on a connection of their own in a worker thread, so that binding the rows and
 * committing them happen beside the event loop rather than on it. The store still decides everything: documents,
 * seqs and cache updates are made on its thread, and a batch is acknowledged only once its COMMIT has returned.
 *
 * Plain JavaScript, not TypeScript: a worker thread loads this file from disk, from core/src under the tests as from
 * core/dist in a build (tsup copies it there). Its types are in sqlite-writer.d.mts.
 */
import { createRequire } from "node:module";
import { isMainThread, parentPort, workerData } from "node:worker_threads";

/**
 * Runs a batch of rows on prepared statements (`runs`, `nodeRuns`, `approvals`, `events`), in that order: runs
 * first, because the other rows refer to them. The caller holds the transaction.
 */
export function writeRows(statements, rows) {
  const r = rows.runs;
  for (let i = 0; i < r.length; i += 8) statements.runs.run(r[i], r[i + 1], r[i + 2], r[i + 3], r[i + 4], r[i + 5], r[i + 6], r[i + 7]);
  const n = rows.nodeRuns;
  for (let i = 0; i < n.length; i += 14) {
    statements.nodeRuns.run(
      n[i], n[i + 1], n[i + 2], n[i + 3], n[i + 4], n[i + 5], n[i + 6], n[i + 7], n[i + 8], n[i + 9], n[i + 10], n[i + 11], n[i + 12], n[i + 13],
    );
  }
  const a = rows.approvals;
  for (let i = 0; i < a.length; i += 7) statements.approvals.run(a[i], a[i + 1], a[i + 2], a[i + 3], a[i + 4], a[i + 5], a[i + 6]);
  const e = rows.events;
  for (let i = 0; i < e.length; i += 7) statements.events.run(e[i], e[i + 1], e[i + 2], e[i + 3], e[i + 4], e[i + 5], e[i + 6]);
}

// ------------------------------------------------------------------ the worker thread

/** Opens the file with the driver the store chose, with the per-connection settings the store's own connection has. */
async function openConnection({ file, driver, nativeBinding }) {
  let db;
  if (driver === "node") {
    // node:sqlite warns once per thread that it is experimental; the store's thread already drops that warning.
    const emitWarning = process.emitWarning;
    process.emitWarning = function (warning, ...rest) {
      const text = typeof warning === "string" ? warning : warning?.message;
      if (/SQLite/i.test(String(text))) return;
      return emitWarning.call(process, warning, ...rest);
    };
    try {
      const { DatabaseSync } = await import("node:sqlite");
      db = new DatabaseSync(file);
    } finally {
      process.emitWarning = emitWarning;
    }
  } else {
    const Database = createRequire(import.meta.url)("better-sqlite3");
    db = new Database(file, nativeBinding ? { nativeBinding } : {});
  }
  db.exec("PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;");
  return db;
}

/** Runs `fn` in a transaction that takes the write lock at BEGIN, as the store's own transactions do. */
function immediate(db, fn) {
  db.exec("BEGIN IMMEDIATE");
  try {
    const result = fn();
    db.exec("COMMIT");
    return result;
  } catch (err) {
    try {
      db.exec("ROLLBACK");
    } catch {
      // SQLite may already have rolled back (a full disk, an interrupt): the body's error is the one to report
    }
    throw err;
  }
}

/** What crosses back to the store for an error: its message and SQLite's code, which a structured clone would drop. */
function describe(err) {
  return { name: err?.name ?? "Error", message: String(err?.message ?? err), code: err?.code };
}

async function serve(data) {
  let db;
  let statements;
  let failure;
  try {
    db = await openConnection(data);
    statements = {};
    for (const [name, sql] of Object.entries(data.sql)) statements[name] = db.prepare(sql);
  } catch (err) {
    failure = describe(err);
  }
  parentPort.on("message", (m) => {
    if (m.op === "close") {
      // Ends the thread whatever state it is in: a connection that never opened has nothing to close.
      try {
        db?.close();
      } finally {
        failure = { name: "Error", message: "the SQLite writer is closed" };
        parentPort.postMessage({ id: m.id });
        parentPort.close();
      }
      return;
    }
    if (failure) {
      parentPort.postMessage({ id: m.id, error: failure });
      return;
    }
    try {
      switch (m.op) {
        case "apply":
          immediate(db, () => writeRows(statements, m.rows));
          parentPort.postMessage({ id: m.id });
          return;
        case "claim": {
          const rows = immediate(db, () => statements.claim.all(m.options));
          parentPort.postMessage({ id: m.id, rows });
          return;
        }
        case "release": {
          const changes = Number(statements.releaseLeases.run(m.owner).changes);
          parentPort.postMessage({ id: m.id, changes });
          return;
        }
        default:
          parentPort.postMessage({ id: m.id, error: { name: "TypeError", message: `unknown writer operation ${m.op}` } });
      }
    } catch (err) {
      parentPort.postMessage({ id: m.id, error: describe(err) });
    }
  });
}

if (!isMainThread && workerData?.nodefabricSqliteWriter) void serve(workerData.nodefabricSqliteWriter);
