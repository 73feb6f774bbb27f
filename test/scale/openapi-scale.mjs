#!/usr/bin/env node
/**
 * The OpenAPI importer at scale, as a user runs it: a large real API description (GitHub's REST API from the npm
 * package @octokit/openapi by default, or any file given) is made into a handler package with the built
 * `create-fabric-handler`, which is then built, typechecked and tested, and served by `fabric dev`.
 * Prints the time and peak memory of each step, and checks them against the targets of issue 11:
 * scaffolding under 1 GB; the executor healthy in under 5 s at under 300 MB RSS.
 *
 *   npm run build && node test/scale/openapi-scale.mjs                # GitHub's REST API (downloads the npm package)
 *   node test/scale/openapi-scale.mjs path/to/openapi.json [--keep]
 *
 * It takes minutes, so it runs outside `npm test`.
 */
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../../", import.meta.url));
const modules = path.join(root, "node_modules");
const scaffolder = path.join(root, "templates/create-fabric-handler/bin/create-fabric-handler.js");
const cli = path.join(root, "core/dist/cli/main.js");
const args = process.argv.slice(2);
const keep = args.includes("--keep");
const source = args.find((a) => !a.startsWith("--"));
const work = mkdtempSync(path.join(os.tmpdir(), "openapi-scale-"));
const results = [];
let failed = false;

/** Prints the peak RSS of a child node process on exit (a preload module, passed with --import). */
const MAXRSS = `data:text/javascript,process.on("exit",()=>process.stderr.write("\\nmaxrss-kb "+process.resourceUsage().maxRSS+"\\n"))`;

function record(step, seconds, rssMb, target, ok = true) {
  results.push({ step, seconds: seconds === undefined ? "" : seconds.toFixed(1), rss_mb: rssMb === undefined ? "" : Math.round(rssMb), target: target ?? "", ok: ok ? "yes" : "NO" });
  if (!ok) failed = true;
}

async function timed(file, argv, options = {}) {
  const started = performance.now();
  try {
    const { stdout, stderr } = await run(process.execPath, ["--import", MAXRSS, file, ...argv], { maxBuffer: 512 * 1024 * 1024, ...options });
    return { ok: true, seconds: (performance.now() - started) / 1000, out: stdout + stderr, rssMb: maxRss(stderr) };
  } catch (err) {
    return { ok: false, seconds: (performance.now() - started) / 1000, out: `${err.stdout ?? ""}${err.stderr ?? ""}`, rssMb: maxRss(err.stderr ?? "") };
  }
}

function maxRss(text) {
  const m = /maxrss-kb (\d+)/.exec(text);
  return m ? Number(m[1]) / 1024 : undefined;
}

async function githubDocument() {
  const dir = path.join(work, "octokit");
  mkdirSync(dir);
  const { stdout } = await run("npm", ["pack", "@octokit/openapi", "--pack-destination", dir], { cwd: dir });
  const tarball = stdout.trim().split("\n").at(-1).trim();
  await run("tar", ["xzf", tarball], { cwd: dir });
  const generated = path.join(dir, "package", "generated");
  const file = readdirSync(generated).find((f) => f === "api.github.com.json") ?? readdirSync(generated).find((f) => /^api\.github\.com.*\.json$/.test(f));
  const version = JSON.parse(readFileSync(path.join(dir, "package", "package.json"), "utf8")).version;
  return { file: path.join(generated, file), label: `GitHub REST API (@octokit/openapi@${version}, ${file})` };
}

async function healthy(url, deadline) {
  while (performance.now() < deadline) {
    try {
      const res = await fetch(`${url}/v1/health`);
      if (res.ok) return true;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

function rssOf(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const now = /VmRSS:\s+(\d+) kB/.exec(status);
    const peak = /VmHWM:\s+(\d+) kB/.exec(status);
    return { now: now ? Number(now[1]) / 1024 : undefined, peak: peak ? Number(peak[1]) / 1024 : undefined };
  } catch {
    return {};
  }
}

async function main() {
  for (const needed of [scaffolder, cli, path.join(root, "templates/create-fabric-handler/dist/index.js")]) {
    if (!existsSync(needed)) throw new Error(`${needed} is missing: run npm run build first`);
  }
  const doc = source ? { file: path.resolve(source), label: source } : await githubDocument();
  console.log(`document: ${doc.label} (${(readFileSync(doc.file).length / 1e6).toFixed(1)} MB)`);

  // 1. Scaffold.
  const pkg = path.join(work, "api");
  const scaffold = await timed(scaffolder, ["scale-api", "--from-openapi", doc.file, "--dir", pkg, "--yes"], { cwd: work });
  record("scaffold (create-fabric-handler --from-openapi)", scaffold.seconds, scaffold.rssMb, "< 1024 MB", scaffold.ok && (scaffold.rssMb ?? 0) < 1024);
  if (!scaffold.ok) {
    console.log(scaffold.out.slice(-4000));
    return;
  }
  const index = JSON.parse(readFileSync(path.join(pkg, "node-types/index.json"), "utf8"));
  const count = index.node_types.length;
  console.log(`node types: ${count}`);
  symlinkSync(modules, path.join(pkg, "node_modules"), "dir");

  // 2. Build, typecheck, test, as the package's own scripts do.
  const build = await timed(path.join(modules, "tsup/dist/cli-default.js"), [], { cwd: pkg });
  record("npm run build (tsup)", build.seconds, build.rssMb, "seconds", build.ok);
  if (!build.ok) console.log(build.out.slice(-3000));
  const types = await timed(path.join(modules, "typescript/bin/tsc"), ["--noEmit", "-p", pkg], { cwd: pkg });
  record("npm run typecheck (tsc --noEmit)", types.seconds, types.rssMb, "passes", types.ok);
  if (!types.ok) console.log(types.out.slice(0, 3000));
  const tests = await timed(path.join(modules, "vitest/vitest.mjs"), ["run", "--root", pkg], { cwd: pkg, env: { ...process.env, CI: "1", NO_COLOR: "1" } });
  const summary = /Tests\s+([^\n]+)/.exec(tests.out)?.[1]?.trim() ?? "no summary";
  record(`npm test (vitest): ${summary}`, tests.seconds, undefined, "passes", tests.ok);
  if (!tests.ok) console.log(tests.out.split("\n").filter((l) => /FAIL|✗|×|Error/.test(l)).slice(0, 40).join("\n"));

  // 3. Serve it: fabric dev discovering the package.
  const base = 20000 + Math.floor(Math.random() * 20000);
  const started = performance.now();
  const fabric = spawn(process.execPath, [cli, "dev", "--discover", pkg, "--port-base", String(base), "--data-dir", path.join(work, ".fabric")], {
    cwd: work,
    env: { ...process.env, FABRIC_LOG_LEVEL: "warn" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  fabric.stdout.on("data", (c) => (out += c));
  fabric.stderr.on("data", (c) => (out += c));
  try {
    const banner = await new Promise((resolve) => {
      const check = setInterval(() => {
        const urls = Object.fromEntries([...out.matchAll(/^\s+([a-z-]+)\s+(http:\/\/\S+)$/gm)].map((m) => [m[1], m[2]]));
        if (urls["atomic-executor"] && urls["node-registry"]) {
          clearInterval(check);
          resolve(urls);
        }
        if (fabric.exitCode !== null || performance.now() - started > 120_000) {
          clearInterval(check);
          resolve(undefined);
        }
      }, 20);
    });
    if (!banner) {
      record("fabric dev: started", undefined, undefined, "", false);
      console.log(out.slice(-3000));
      return;
    }
    const isHealthy = await healthy(banner["atomic-executor"], started + 120_000);
    const healthySeconds = (performance.now() - started) / 1000;
    const atHealthy = rssOf(fabric.pid);
    record("fabric dev: atomic executor healthy", healthySeconds, atHealthy.now, "< 5 s, < 300 MB", isHealthy && healthySeconds < 5 && (atHealthy.now ?? 0) < 300);
    // Served: every node type is published and names an executor.
    const prefix = index.node_types[0].node_type_id.split(".")[0];
    let published = 0;
    while (performance.now() - started < 300_000) {
      const res = await fetch(`${banner["node-registry"]}/v1/node-types?q=${encodeURIComponent(`${prefix}.`)}&limit=1000`).catch(() => undefined);
      if (res?.ok) {
        published = (await res.json()).length;
        let token = res.headers.get("x-next-page-token");
        while (token) {
          const next = await fetch(`${banner["node-registry"]}/v1/node-types?q=${encodeURIComponent(`${prefix}.`)}&limit=1000&page_token=${encodeURIComponent(token)}`);
          published += (await next.json()).length;
          token = next.headers.get("x-next-page-token");
        }
      }
      if (published >= count) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const servedSeconds = (performance.now() - started) / 1000;
    const atServed = rssOf(fabric.pid);
    record(`fabric dev: ${published} of ${count} node types published`, servedSeconds, atServed.now, "all", published >= count);
    const peak = rssOf(fabric.pid).peak;
    record("fabric dev: peak RSS (all seven services in one process)", undefined, peak, "", true);
    const progress = out.split("\n").filter((l) => /node types|loading|published/i.test(l)).slice(0, 6);
    if (progress.length > 0) console.log(`progress shown:\n  ${progress.join("\n  ")}`);
  } finally {
    fabric.kill("SIGTERM");
    await new Promise((r) => fabric.once("exit", r));
  }
}

try {
  await main();
} finally {
  console.log("");
  console.table(results);
  if (!keep) rmSync(work, { recursive: true, force: true });
  else console.log(`kept ${work}`);
}
process.exitCode = failed ? 1 : 0;
