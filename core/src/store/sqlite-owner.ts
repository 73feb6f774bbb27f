/**
 * One process per SQLite run store file. The store keeps each run's next seq and the rows of its open runs in memory
 * (sqlite-run-store.ts), which is only right while no other process writes the file; and a second coordinator on the
 * same file would start the same client-chosen run_id a second time. So the store claims its file with an owner file
 * beside it (`<file>.owner`, holding the process id), and a second process refuses to open it with a clear message.
 * An owner file left by a process that died (`kill -9`) names a process that no longer exists, and is taken over.
 */
import { closeSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";

/** Stores of this process on each file (the same file opened twice in one process is one owner). */
const claims = new Map<string, number>();

/** Thrown when another live process owns the file. */
export class SqliteFileInUseError extends Error {
  constructor(
    readonly file: string,
    readonly pid: number,
  ) {
    super(
      `the run store ${file} is in use by process ${pid}: one SQLite file serves one coordinator process. Stop that ` +
        `process first, give this one another data directory, or share one PostgreSQL database between coordinators ` +
        `(docs/deploy.md). If process ${pid} is not a fabric, remove ${file}.owner.`,
    );
    this.name = "SqliteFileInUseError";
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, but belongs to another user.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

function ownerOf(ownerFile: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(ownerFile, "utf8").trim(), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Claims `file` for this process; answers the function that lets it go. In-memory databases (":memory:", "") and
 * SQLite URIs (`file:…`) are not claimed.
 */
export function claimSqliteFile(file: string): () => void {
  if (file === "" || file === ":memory:" || file.startsWith("file:")) return () => undefined;
  const ownerFile = `${file}.owner`;
  const held = claims.get(file) ?? 0;
  if (held === 0) {
    for (let tries = 0; ; tries++) {
      try {
        const fd = openSync(ownerFile, "wx", 0o600);
        writeSync(fd, `${process.pid}\n`);
        closeSync(fd);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST" || tries > 0) throw err;
        const pid = ownerOf(ownerFile);
        // The owner is this process (a file left by a process that had the same id), or gone: take the file over.
        if (pid !== undefined && pid !== process.pid && alive(pid)) throw new SqliteFileInUseError(file, pid);
        rmSync(ownerFile, { force: true });
      }
    }
  }
  claims.set(file, held + 1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const left = (claims.get(file) ?? 1) - 1;
    if (left > 0) {
      claims.set(file, left);
      return;
    }
    claims.delete(file);
    if (ownerOf(ownerFile) === process.pid) rmSync(ownerFile, { force: true });
  };
}
