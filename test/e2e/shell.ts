/**
 * Commands run as a user pastes them: each line through bash, in a folder, with an environment. A command that keeps
 * running (a fabric) is started in its own process group and stopped with the whole group.
 */
import { spawn, type ChildProcess } from "node:child_process";

export interface ShellResult {
  code: number | null;
  output: string;
}

/** Runs `line` with `bash -c`; throws with its whole output when it fails or outlives `timeoutMs`. */
export function sh(line: string, options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs?: number; allowFailure?: boolean }): Promise<ShellResult> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", line], { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let output = "";
    child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    const timeoutMs = options.timeoutMs ?? 300_000;
    const timer = setTimeout(() => {
      killGroup(child, "SIGKILL");
      reject(new Error(`\`${line}\` (in ${options.cwd}) did not finish in ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      if (code !== 0 && !options.allowFailure) reject(new Error(`\`${line}\` (in ${options.cwd}) exited ${code}:\n${output}`));
      else resolve({ code, output });
    });
  });
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

/** Waits until no process of `child`'s group is left, killing the group when it outlives `ms`. */
async function groupGone(child: ChildProcess, ms: number): Promise<void> {
  if (child.pid === undefined) return;
  const alive = () => {
    try {
      process.kill(-child.pid!, 0);
      return true;
    } catch {
      return false;
    }
  };
  const deadline = Date.now() + ms;
  while (alive()) {
    if (Date.now() > deadline) {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // gone meanwhile
      }
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface BackgroundCommand {
  output(): string;
  /** The service URLs the fabric's start banner listed. */
  urls: Record<string, string>;
  stop(): Promise<void>;
}

/**
 * Starts a long-running `line` (such as `npx fabric dev --discover .`) and resolves once its output has listed
 * `expect` service URLs, as the fabric's start banner does.
 */
export function shBackground(line: string, options: { cwd: string; env: NodeJS.ProcessEnv; expect?: number; timeoutMs?: number }): Promise<BackgroundCommand> {
  const child = spawn("bash", ["-c", line], { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  let output = "";
  const urls: Record<string, string> = {};
  const expected = options.expect ?? 7;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  // Stopped once the whole process group is gone, not just bash: the fabric it started may still hold its ports.
  const stop = async () => {
    killGroup(child, "SIGTERM");
    const timer = setTimeout(() => killGroup(child, "SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
    await groupGone(child, 10_000);
  };
  return new Promise((resolve, reject) => {
    const timeoutMs = options.timeoutMs ?? 300_000;
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`\`${line}\` (in ${options.cwd}) did not list its services in ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      for (const m of output.matchAll(/^\s+([a-z-]+)\s+(http:\/\/\S+)$/gm)) urls[m[1]!] = m[2]!;
      if (Object.keys(urls).length >= expected) {
        clearTimeout(timer);
        resolve({ output: () => output, urls, stop });
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`\`${line}\` (in ${options.cwd}) exited with ${code} before its services started:\n${output}`));
    });
  });
}
