#!/usr/bin/env node
/**
 * Builds the workspace packages whose inputs changed since their last successful build, in dependency order, so that
 * `npm test` and the other commands that need built packages do not pay for a full build each time (docs/testing.md,
 * "A loop that stays fast"). What a build reads and when a package counts as up to date: scripts/build-changed-lib.mjs.
 *
 *   node scripts/build-changed.mjs            builds what changed (npm test, test:e2e, test:runtime, start, benches)
 *   node scripts/build-changed.mjs --all      builds every package (npm run build); FABRIC_BUILD_ALL=1 does the same
 *   --verbose   shows each build's own output (else only a failed build's)
 *   --root <dir> the repository (default: the working folder, where npm runs scripts)
 *
 * Each package's build is its build script, run as `npm run build` runs it. Its stamp (dist/.build-stamp) is removed
 * before the build and written after it succeeded, so a failed or interrupted build leaves none and is built again
 * next time. The first failure stops the run with a non-zero exit. Two runs in one checkout take turns (a lock in
 * node_modules/.cache).
 */
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { inputsOf, OUT_DIR, readPlan, readStamp, STAMP_FILE, staleReason, stampOf } from "./build-changed-lib.mjs";

function parseArgs(argv) {
  const opts = { all: process.env.FABRIC_BUILD_ALL === "1", verbose: false, root: process.cwd() };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--all") opts.all = true;
    else if (a === "--verbose") opts.verbose = true;
    else if (a === "--root") opts.root = path.resolve(argv[++i] ?? ".");
    else if (a === "--help" || a === "-h") {
      const text = readFileSync(new URL(import.meta.url), "utf8");
      console.log(text.slice(text.indexOf("/**") + 4, text.indexOf(" */")).replace(/^ \* ?/gm, "").trimEnd());
      process.exit(0);
    } else throw new Error(`unknown option ${a} (see --help)`);
  }
  return opts;
}

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

/**
 * Runs the package's build script as `npm run build` would (its prebuild and postbuild too, in the package's folder,
 * with the node_modules/.bin folders from there up to the root on the PATH and npm's variables naming the package),
 * without paying npm's own start for each package. Resolves with the exit code and, unless shown live, the output.
 */
async function runBuild(root, p, verbose) {
  const bins = [];
  for (let dir = p.abs; ; dir = path.dirname(dir)) {
    bins.push(path.join(dir, "node_modules", ".bin"));
    if (dir === root || dir === path.dirname(dir)) break;
  }
  const output = [];
  for (const event of ["prebuild", "build", "postbuild"]) {
    const script = p.manifest.scripts?.[event];
    if (!script) continue;
    const env = {
      ...process.env,
      PATH: [...bins, process.env.PATH].join(path.delimiter),
      npm_lifecycle_event: event,
      npm_lifecycle_script: script,
      npm_package_name: p.name,
      npm_package_version: p.version ?? "",
      npm_package_json: path.join(p.abs, "package.json"),
    };
    if (verbose) console.log(`\n> ${p.name} ${event}\n> ${script}\n`);
    const code = await new Promise((resolve) => {
      const child = spawn(script, { cwd: p.abs, env, shell: true, stdio: verbose ? "inherit" : ["ignore", "pipe", "pipe"] });
      child.stdout?.on("data", (c) => output.push(c));
      child.stderr?.on("data", (c) => output.push(c));
      child.on("error", (err) => {
        output.push(Buffer.from(`${err.message}\n`));
        resolve(1);
      });
      child.on("close", (c, signal) => resolve(c ?? (signal ? 128 : 1)));
    });
    if (code !== 0) return { code, output: Buffer.concat(output).toString() };
  }
  return { code: 0, output: Buffer.concat(output).toString() };
}

/**
 * Takes the checkout's build lock (a folder holding the owner's pid), waiting while another live run holds it; a lock
 * left by a run that died is taken over. Returns the function that releases it.
 */
async function lock(root) {
  const dir = path.join(root, "node_modules", ".cache", "build-changed.lock");
  mkdirSync(path.dirname(dir), { recursive: true });
  let told = false;
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(path.join(dir, "pid"), String(process.pid));
      break;
    } catch (err) {
      if (err.code !== "EEXIST") throw err;
      let owner;
      try {
        owner = Number(readFileSync(path.join(dir, "pid"), "utf8"));
      } catch {
        owner = undefined; // being written, or being removed: look again
      }
      if (owner && !alive(owner)) {
        rmSync(dir, { recursive: true, force: true });
        continue;
      }
      if (!told && owner) console.log(`build: waiting for the build run by pid ${owner} in this checkout`);
      told ||= Boolean(owner);
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  const release = () => rmSync(dir, { recursive: true, force: true });
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.once(signal, () => {
      release();
      process.exit(128 + ({ SIGINT: 2, SIGTERM: 15, SIGHUP: 1 })[signal]);
    });
  }
  return release;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === "EPERM";
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const release = await lock(opts.root);
  try {
    const plan = readPlan(opts.root);
    const width = Math.max(...plan.packages.map((p) => p.name.length));
    const line = (p, text) => console.log(`build: ${p.name.padEnd(width)}  ${text}`);
    const fingerprints = new Map();
    let built = 0;
    let upToDate = 0;
    for (const p of plan.packages) {
      const inputs = inputsOf(p, plan, fingerprints);
      fingerprints.set(p.name, inputs.fingerprint);
      if (!p.manifest.scripts?.build) {
        line(p, "no build script");
        continue;
      }
      const reason = opts.all ? "--all" : staleReason(p, inputs, readStamp(p));
      if (!reason) {
        line(p, "up to date");
        upToDate++;
        continue;
      }
      const stampPath = path.join(p.abs, OUT_DIR, STAMP_FILE);
      rmSync(stampPath, { force: true });
      const t0 = Date.now();
      const { code, output } = await runBuild(plan.root, p, opts.verbose);
      if (code !== 0) {
        if (!opts.verbose) process.stdout.write(output);
        line(p, `FAILED in ${seconds(Date.now() - t0)} (exit ${code}; ${reason})`);
        const left = plan.packages.length - plan.packages.indexOf(p) - 1;
        console.log(`build: stopped at ${p.name}${left ? `, ${left} not checked` : ""}, after ${seconds(Date.now() - started)}`);
        return 1;
      }
      try {
        const tmp = `${stampPath}.${process.pid}`;
        writeFileSync(tmp, JSON.stringify(stampOf(p, inputs)));
        renameSync(tmp, stampPath);
      } catch (err) {
        // A build that writes no dist/ cannot be stamped: it is built every time, which is slow but never stale.
        line(p, `built in ${seconds(Date.now() - t0)}, not stamped (${err.code === "ENOENT" ? `it wrote no ${OUT_DIR}/` : err.message}): it will be built again`);
        built++;
        continue;
      }
      line(p, `built in ${seconds(Date.now() - t0)} (${reason})`);
      built++;
    }
    console.log(`build: ${built} built, ${upToDate} up to date, in ${seconds(Date.now() - started)}${opts.all ? "" : " (npm run build builds everything)"}`);
    return 0;
  } finally {
    release();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`build: ${err.message}`);
    process.exit(1);
  },
);
