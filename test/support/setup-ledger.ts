/**
 * The setup ledger: what each test file pays before it can assert anything. Loaded by vitest as a setup file in every
 * test file; it does nothing unless NODEFABRIC_TEST_LEDGER names a file, as `scripts/test-timings.mjs` sets it.
 *
 * It appends one JSON line per paid setup, tagged with the test file:
 * - `fabric`: a fabric started in the test's process (core publishes `nodefabric:fabric.started` with its duration);
 * - `fabric-process`: a `fabric dev` / `fabric start` child process, for as long as it lived;
 * - `install`: an `npm install` / `npm ci` child, `build`: an `npm run build`, `tsup`, `tsc` or `npm pack` child;
 * - `spawn`: any other child process.
 */
import childProcess from "node:child_process";
import { subscribe } from "node:diagnostics_channel";
import { appendFileSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { performance } from "node:perf_hooks";
import { beforeAll, expect } from "vitest";

const ledger = process.env.NODEFABRIC_TEST_LEDGER;
const PATCHED = Symbol.for("nodefabric.test.ledger");

type Kind = "fabric" | "fabric-process" | "install" | "build" | "spawn";

// Kept on globalThis: with isolate: false this module is evaluated again for each file, while the hooks below are
// installed once per process and must see the file that runs now.
const CURRENT = Symbol.for("nodefabric.test.ledger.file");
const state = globalThis as Record<symbol, unknown>;

function record(kind: Kind, ms: number, what: string): void {
  appendFileSync(ledger!, `${JSON.stringify({ file: state[CURRENT] ?? "", kind, ms: Math.round(ms), what: what.slice(0, 200) })}\n`);
}

/** What a command line is, by the setup it stands for. */
export function classify(line: string): Kind {
  if (/\bnpm(?:\.cmd)?\s+(?:[^|;&]*\s)?(?:install|i|ci|add)(?:\s|$)/.test(line) || /\bnpm\s+exec\b|\bnpx\s+(?:--yes\s+)?-p\b/.test(line)) return "install";
  if (/\bnpm\s+(?:run\s+build|pack)\b|\btsup\b|\btsc\b/.test(line)) return "build";
  if (/(?:cli\/main\.js|\bfabric)\s+(?:[^|;&]*\s)?(?:dev|start)\b/.test(line)) return "fabric-process";
  return "spawn";
}

function commandLine(file: unknown, args: unknown): string {
  const list = Array.isArray(args) ? (args as unknown[]).map(String) : [];
  return [String(file), ...list].join(" ");
}

if (ledger && !(globalThis as Record<symbol, unknown>)[PATCHED]) {
  (globalThis as Record<symbol, unknown>)[PATCHED] = true;
  subscribe("nodefabric:fabric.started", (message) => {
    const m = message as { services: number; duration_ms: number };
    record("fabric", m.duration_ms, `${m.services} services`);
  });

  const cp = childProcess as unknown as Record<string, (...a: unknown[]) => unknown>;
  // exec and execFile call spawn inside Node, not through the module's exports, so each is wrapped on its own.
  for (const name of ["spawn", "execFile", "exec", "fork"] as const) {
    const original = cp[name]!;
    const wrapped = function (this: unknown, ...a: unknown[]) {
      const t0 = performance.now();
      const line = name === "exec" ? String(a[0]) : commandLine(a[0], a[1]);
      const child = original.apply(this, a) as childProcess.ChildProcess;
      child.once("exit", () => record(classify(line), performance.now() - t0, line));
      return child;
    };
    // util.promisify(execFile) and promisify(exec) resolve with { stdout, stderr }, as Node's own do.
    if (name === "exec" || name === "execFile") {
      const promisified = (...a: unknown[]) => {
        let child: childProcess.ChildProcess | undefined;
        const promise = new Promise((resolve, reject) => {
          child = wrapped(...a, (err: (Error & Record<string, unknown>) | null, stdout: unknown, stderr: unknown) =>
            err ? reject(Object.assign(err, { stdout, stderr })) : resolve({ stdout, stderr })) as childProcess.ChildProcess;
        });
        return Object.assign(promise, { child });
      };
      Object.defineProperty(wrapped, Symbol.for("nodejs.util.promisify.custom"), { value: promisified });
    }
    cp[name] = wrapped;
  }
  for (const name of ["spawnSync", "execSync", "execFileSync"] as const) {
    const original = cp[name]!;
    cp[name] = function (this: unknown, ...a: unknown[]) {
      const t0 = performance.now();
      const line = name === "execSync" ? String(a[0]) : commandLine(a[0], a[1]);
      try {
        return original.apply(this, a);
      } finally {
        record(classify(line), performance.now() - t0, line);
      }
    };
  }
  syncBuiltinESMExports();
}

beforeAll(() => {
  state[CURRENT] = expect.getState().testPath ?? "";
});
