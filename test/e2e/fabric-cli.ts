/**
 * Runs the built `fabric` CLI as a user would, as a child process, for end-to-end tests.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import net from "node:net";
import { fileURLToPath } from "node:url";

export const CLI = fileURLToPath(new URL("../../core/dist/cli/main.js", import.meta.url));

export interface FabricProcess {
  child: ChildProcess;
  urls: Record<string, string>;
  output: () => string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts `fabric <args>` and resolves once its banner has listed every service URL. `cli` runs another installation's
 * CLI (a package installed outside this repository) instead of this workspace's build.
 */
export function startFabricProcess(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; expect?: number; cli?: string; startMs?: number } = {}): Promise<FabricProcess> {
  const startMs = options.startMs ?? 60_000;
  const child = spawn(process.execPath, [options.cli ?? CLI, ...args], {
    cwd: options.cwd,
    env: { ...process.env, FABRIC_LOG_LEVEL: "warn", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const urls: Record<string, string> = {};
  const expected = options.expect ?? 7;
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    // A generous bound: on a loaded 2-core machine a cold start (module loading, the first SQLite open) has taken over
    // 20 s; a start that really hangs still fails, with what the process printed.
    const timer = setTimeout(() => reject(new Error(`fabric did not start in ${startMs / 1000} s:\n${out}`)), startMs);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      for (const m of out.matchAll(/^\s+([a-z-]+)\s+(http:\/\/\S+)$/gm)) urls[m[1]] = m[2];
      if (Object.keys(urls).length >= expected) {
        clearTimeout(timer);
        resolve({
          child,
          urls,
          output: () => out,
          stop: async (signal = "SIGTERM") => {
            if (child.exitCode === null) child.kill(signal);
            return exited;
          },
        });
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`fabric exited with ${code} before starting:\n${out}`));
    });
  });
}

/** Runs `fabric <args>` to completion and returns its exit code and output. */
export function runFabric(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; cli?: string } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [options.cli ?? CLI, ...args], { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

/**
 * Where the kernel picks ports for port-0 listeners and outgoing connections (Linux's ip_local_port_range; 32768 when
 * it cannot be read): a fabric that must come back on its ports after a restart takes them below it, where no other
 * test's connection or port-0 server can take them while it is down.
 */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 12_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

/** Seven consecutive free ports, so a fabric can come back on the same addresses after a restart. */
export async function freePortBase(): Promise<number> {
  const high = ephemeralLow() - 8;
  for (let i = 0; i < 50; i++) {
    const base = 10000 + Math.floor(Math.random() * (high - 10000));
    const free = await Promise.all(Array.from({ length: 7 }, (_, k) => portFree(base + k)));
    if (free.every(Boolean)) return base;
  }
  throw new Error("no free port range");
}
