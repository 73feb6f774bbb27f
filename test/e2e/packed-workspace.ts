/**
 * What the handler-package end-to-end tests need to act as a user outside this repository: the workspace packed as
 * npm tarballs (what `npm publish` would upload), npm run as a child process, and better-sqlite3's native module
 * offered as a local prebuild, so each `npm install` of @nodefabric/core does not compile it again (about 2 min).
 */
import { execFile, spawn } from "node:child_process";
import { mkdirSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

export const repo = fileURLToPath(new URL("../..", import.meta.url));
const run = promisify(execFile);

export interface PackedWorkspace {
  /** `file:` specs of the packed tarballs, by package name. */
  specs: Record<"@nodefabric/schemas" | "@nodefabric/core" | "create-fabric-handler", string>;
  /** Environment for npm commands: the local prebuild, and no audit, fund or update checks. */
  env: NodeJS.ProcessEnv;
}

/** Packs the workspace packages a handler author installs, into `dir`. */
export async function packWorkspace(dir: string): Promise<PackedWorkspace> {
  const packs = path.join(dir, "packs");
  mkdirSync(packs, { recursive: true });
  await run("npm", ["pack", "-w", "@nodefabric/schemas", "-w", "@nodefabric/core", "-w", "create-fabric-handler", "--pack-destination", packs], { cwd: repo });
  const file = (prefix: string) => {
    const f = readdirSync(packs).find((n) => n.startsWith(prefix) && n.endsWith(".tgz"));
    if (!f) throw new Error(`npm pack wrote no ${prefix}*.tgz in ${packs}`);
    return `file:${path.join(packs, f)}`;
  };
  // better-sqlite3 looks for <name>-v<version>-node-v<abi>-<platform>-<arch>.tar.gz in its local prebuilds folder
  // before it downloads (which fails here) or compiles.
  const prebuilds = path.join(dir, "prebuilds");
  mkdirSync(prebuilds, { recursive: true });
  const require = createRequire(path.join(repo, "core/package.json"));
  const sqliteDir = path.dirname(require.resolve("better-sqlite3/package.json"));
  const version = (require("better-sqlite3/package.json") as { version: string }).version;
  const tarball = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  await run("tar", ["czf", path.join(prebuilds, tarball), "-C", sqliteDir, "build/Release/better_sqlite3.node"]);
  return {
    specs: { "@nodefabric/schemas": file("nodefabric-schemas-"), "@nodefabric/core": file("nodefabric-core-"), "create-fabric-handler": file("create-fabric-handler-") },
    env: {
      ...process.env,
      npm_config_better_sqlite3_local_prebuilds: prebuilds,
      npm_config_audit: "false",
      npm_config_fund: "false",
      npm_config_update_notifier: "false",
      // The tests' own settings must not leak into the user's commands.
      NODE_ENV: undefined,
      VITEST: undefined,
      VITEST_WORKER_ID: undefined,
      VITEST_POOL_ID: undefined,
      FABRIC_LOG_LEVEL: "warn",
    },
  };
}

export interface CommandResult {
  code: number | null;
  output: string;
}

/** Runs a command to completion; throws with its whole output when it fails or outlives `timeoutMs`. */
export function command(cmd: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs?: number; allowFailure?: boolean }): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${cmd} ${args.join(" ")} (in ${options.cwd}) did not finish in ${options.timeoutMs} ms:\n${output}`));
    }, options.timeoutMs ?? 300_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      if (code !== 0 && !options.allowFailure) reject(new Error(`${cmd} ${args.join(" ")} (in ${options.cwd}) exited ${code}:\n${output}`));
      else resolve({ code, output });
    });
  });
}
