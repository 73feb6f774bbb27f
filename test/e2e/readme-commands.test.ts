/**
 * README.md's blocks with no note, run as a new contributor would, in README order, on a fresh copy of this repository
 * (its tracked files and its untracked files that are not ignored; node_modules is installed there by the README's own
 * `npm install`, from npm's cache). `npm start` and `fabric dev` keep running in the background, in their own process
 * group, until the next block that starts a fabric (they all use the README's ports, 8080 to 8086, which no other test
 * uses); a block's other commands then run in one bash script (`set -euo pipefail`), so a variable set by one line is
 * seen by the next. A failure names the block's README line and the command, with the script's output.
 * test/readme.test.ts checks who runs each block, and that every command pastes into bash.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { spawn, execFileSync } from "node:child_process";
import { copyFileSync, lstatSync, mkdirSync, mkdtempSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { EXPECTED, isLongRunning, planOf, readmeBlocks, readmeServiceUrls, repo, where, type ReadmeBlock } from "../readme-blocks.js";
import { shBackground, type BackgroundCommand } from "./shell.js";
import { localBetterSqlitePrebuild } from "./sqlite-prebuild.js";
import { call } from "../run-client.js";

const blocks = readmeBlocks();

/** The README's ports, 8080 to 8086: true once nothing listens on any of them. */
async function portsFree(urls: string[]): Promise<boolean> {
  const listening = await Promise.all(
    urls.map(
      (u) =>
        new Promise<boolean>((resolve) => {
          const { hostname, port } = new URL(u);
          const socket = net.connect({ host: hostname, port: Number(port) });
          socket.once("connect", () => (socket.destroy(), resolve(true)));
          socket.once("error", () => resolve(false));
        }),
    ),
  );
  return !listening.some(Boolean);
}

/** A fabric's output from its start banner on (not the install and build before it), at most its last 4,000 characters. */
function sinceBanner(command: BackgroundCommand): string {
  const output = command.output();
  const banner = output.lastIndexOf("NodeFabric ");
  return output.slice(Math.max(banner, 0)).slice(-4000);
}

interface ScriptResult {
  code: number | null;
  /** The output of each command, in order, for those that started. */
  outputs: string[];
  /** Everything, each command's output after a `$ command` line. */
  transcript: string;
  timedOut: boolean;
}

const MARK = "\u001eREADME-COMMAND ";

/** Runs `commands` as one bash script in its own process group; the group is killed when the script ends or times out. */
function runScript(commands: string[], options: { cwd: string; env: NodeJS.ProcessEnv; file: string; timeoutMs: number }): Promise<ScriptResult> {
  const lines = ["set -euo pipefail", "exec 2>&1"];
  commands.forEach((c, i) => lines.push(`printf '\\n${MARK}%d\\n' ${i}`, c));
  writeFileSync(options.file, lines.join("\n") + "\n");
  return new Promise((resolve) => {
    const child = spawn("bash", [options.file], { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let output = "";
    child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    const killGroup = () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    };
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, options.timeoutMs);
    child.once("close", (code) => {
      clearTimeout(timer);
      killGroup();
      const parts = output.split(new RegExp(`\\n?${MARK}(\\d+)\\n`));
      const outputs: string[] = [];
      let transcript = parts[0]!;
      for (let i = 1; i < parts.length; i += 2) {
        const n = Number(parts[i]);
        outputs[n] = parts[i + 1]!;
        transcript += `\n$ ${commands[n]}\n${parts[i + 1]}`;
      }
      resolve({ code, outputs, transcript, timedOut });
    });
  });
}

describe("README.md: the blocks with no note, run as a new contributor runs them", () => {
  const runBlocks = blocks.filter((b) => planOf(b).kind === "run");
  const readmeUrls = readmeServiceUrls();
  let work: string;
  let copy: string;
  let env: NodeJS.ProcessEnv;
  /** What `npm install` needs besides: on Node 20, where better-sqlite3's prebuild is (other npm commands warn of it). */
  let installEnv: NodeJS.ProcessEnv;
  let fabric: { block: ReadmeBlock; commands: BackgroundCommand[] } | undefined;
  /** Set when a block that starts a fabric failed: the blocks after it cannot run. */
  let broken: string | undefined;

  const stopFabric = async () => {
    const running = fabric;
    fabric = undefined;
    if (!running) return;
    await Promise.all(running.commands.map((c) => c.stop()));
    const deadline = Date.now() + 15_000;
    while (!(await portsFree(Object.values(readmeUrls)))) {
      if (Date.now() > deadline) throw new Error(`the fabric of ${where(running.block)} still holds a port of ${Object.values(readmeUrls).join(", ")} after it stopped`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), "nf-readme-"));
    copy = path.join(work, "nodefabric");
    // A fresh copy, as a clone would be: the working tree's files that git tracks or would track (so this change
    // included), and nothing it ignores (no node_modules, dist, .fabric).
    const files = execFileSync("git", ["ls-files", "-co", "--exclude-standard", "-z"], { cwd: repo, encoding: "utf8" }).split("\0").filter(Boolean);
    for (const f of files) {
      const from = path.join(repo, f);
      const to = path.join(copy, f);
      let stat;
      try {
        stat = lstatSync(from);
      } catch {
        continue; // tracked, but deleted in the working tree
      }
      mkdirSync(path.dirname(to), { recursive: true });
      if (stat.isSymbolicLink()) symlinkSync(readlinkSync(from), to);
      else copyFileSync(from, to);
    }
    // The contributor's environment: nothing of the npm run or vitest that started this test, nor any FABRIC_* setting.
    env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !/^(npm_|FABRIC_|VITEST|INIT_CWD$|NODE_ENV$|NODE_OPTIONS$|TEST$)/i.test(k) || /^npm_config_(cache|registry|userconfig)$/i.test(k)),
    );
    Object.assign(env, {
      // npm's warm cache, and no calls that are not the install itself.
      npm_config_prefer_offline: "true",
      npm_config_audit: "false",
      npm_config_fund: "false",
      npm_config_update_notifier: "false",
    });
    // On Node 20, better-sqlite3 from this repository's build instead of two minutes of compiling.
    installEnv = { ...env, ...(await localBetterSqlitePrebuild(path.join(work, "prebuilds"))) };
    if (!(await portsFree(Object.values(readmeUrls)))) {
      throw new Error(`a port of ${Object.values(readmeUrls).join(", ")} is in use: the README's fabric needs them all (stop what listens there)`);
    }
  }, 300_000); // copies the tree and packs a prebuild: a bound for a hang, not a measure of speed

  afterAll(async () => {
    await stopFabric().catch(() => undefined);
    if (work) rmSync(work, { recursive: true, force: true });
  }, 60_000);

  it("the README's table lists the seven services", () => {
    expect(Object.keys(readmeUrls).sort()).toEqual(["atomic-executor", "composite-executor", "node-registry", "pdp", "run-coordinator", "run-gateway", "selection"]);
  });

  for (const b of runBlocks) {
    const background = b.commands.filter(isLongRunning);
    const foreground = b.commands.filter((c) => !isLongRunning(c));
    // A block that installs (the first: it installs and builds everything) is the longest by far.
    const installs = b.commands.some((c) => /\bnpm (install|i|ci)\b/.test(c));
    // `npm start` builds every package before it starts the fabric (a minute or more on a busy 2-core machine, four
    // and more when other jobs share it: CI once took longer than 270 s for install and build). The bounds are for a
    // command that hangs, not a measure of speed.
    const builds = b.commands.some((c) => /\bnpm (start|run build)\b/.test(c));
    const timeoutMs = installs || builds ? 900_000 : 120_000;
    const first = b.commands[0]!.length > 60 ? `${b.commands[0]!.slice(0, 60)}…` : b.commands[0]!;
    it(`${where(b)}: runs \`${first}\`${b.commands.length > 1 ? ` and ${b.commands.length - 1} more` : ""}`, async () => {
      if (broken) throw new Error(`${where(b)} was not run: ${broken}`);
      if (background.length > 0) {
        await stopFabric();
        const started: BackgroundCommand[] = [];
        fabric = { block: b, commands: started };
        try {
          for (const c of background) {
            started.push(await shBackground(c, { cwd: copy, env: installs ? installEnv : env, expect: 7, timeoutMs: timeoutMs - 30_000 }));
          }
          const urls = started.at(-1)!.urls;
          // The fabric listens where the README's table says.
          expect(urls, `${where(b)}: \`${background.at(-1)}\` listed other URLs than the README's table`).toEqual(readmeUrls);
          // Ready once both executors have registered their node types (health needs no token, with auth or not).
          for (const service of ["atomic-executor", "composite-executor"]) {
            const deadline = Date.now() + 30_000;
            for (;;) {
              const health = await call("GET", `${urls[service]}/v1/health`);
              const check = (health.body?.checks ?? []).find((c: { name: string }) => c.name === "registry_registration");
              if (check?.status === "ok") break;
              if (Date.now() > deadline) throw new Error(`${where(b)}: the ${service} did not register with the node registry: ${JSON.stringify(health.body)}`);
              await new Promise((r) => setTimeout(r, 100));
            }
          }
        } catch (err) {
          broken = `the fabric of ${where(b)} did not start`;
          const output = started.map((s) => s.output()).join("\n");
          throw new Error(`${where(b)}: ${(err as Error).message}${output ? `\n${output}` : ""}`);
        }
      }
      if (foreground.length === 0) return;
      const result = await runScript(foreground, { cwd: copy, env: installs ? installEnv : env, file: path.join(work, `readme-line-${b.line}.sh`), timeoutMs });
      const failed = foreground[result.outputs.length - 1];
      const fabricOutput = fabric ? `\n--- the fabric's output since it started (${where(fabric.block)}):\n${fabric.commands.map(sinceBanner).join("\n")}` : "";
      if (result.timedOut) throw new Error(`${where(b)}: \`${failed}\` did not finish in ${timeoutMs} ms:\n${result.transcript}${fabricOutput}`);
      if (result.code !== 0) throw new Error(`${where(b)}: \`${failed}\` exited ${result.code}:\n${result.transcript}${fabricOutput}`);
      expect(result.outputs.length).toBe(foreground.length);
      foreground.forEach((c, i) => {
        const output = result.outputs[i]!;
        // Every non-2xx answer is an ErrorEnvelope; none is expected from the README.
        expect(output, `${where(b)}: \`${c}\` answered an error:\n${result.transcript}`).not.toMatch(/\{"error":\{"code"/);
        for (const [part, shows] of EXPECTED) {
          if (c.includes(part)) expect(output, `${where(b)}: \`${c}\` should show ${shows}:\n${result.transcript}`).toMatch(shows);
        }
      });
    }, timeoutMs + 30_000);
  }
});
