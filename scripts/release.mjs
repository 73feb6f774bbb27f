#!/usr/bin/env node
/**
 * `npm run release`: checks, builds, tests and publishes every public workspace package, in dependency order.
 * A dry run unless `--publish` is given. A version already on the registry is skipped, so a release that stopped
 * half-way can simply be run again. `--help` lists the options; the pure parts live in release-lib.mjs.
 *
 * Exit codes: 0 done; 1 a build, test or publish failed; 2 bad options or packages that cannot be released as they are.
 */
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { USAGE, checkVersions, classifyView, internalDependencies, parseArgs, publicPackages, publishArgs, publishOrder, readWorkspacePackages } from "./release-lib.mjs";

const root = path.resolve(fileURLToPath(new URL("..", import.meta.url)));
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

function step(n, text) {
  console.log(`\n[${n}/5] ${text}`);
}

function fail(code, message) {
  console.error(`\nrelease: ${message}`);
  process.exit(code);
}

/** Runs npm in the repository root with its output shown as it comes; returns the exit status. */
function npmShown(args) {
  console.log(`$ npm ${args.map((a) => (a === currentOtp ? "<otp>" : a)).join(" ")}`);
  const r = spawnSync(npm, args, { cwd: root, stdio: "inherit", shell: process.platform === "win32" });
  if (r.error) fail(1, `npm could not be started: ${r.error.message}`);
  return r.status;
}

let currentOtp;
let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (err) {
  console.error(`release: ${err.message}\n\n${USAGE}`);
  process.exit(2);
}
if (opts.help) {
  console.log(USAGE);
  process.exit(0);
}
currentOtp = opts.otp;
const mode = opts.publish ? "PUBLISH" : "DRY RUN (nothing is uploaded; add --publish to publish)";
console.log(`NodeFabric release: ${mode}`);
console.log(`registry: ${opts.registry ?? "npm's configured registry"}, dist-tag: ${opts.tag}`);

// (a) which packages, and do their versions agree
step(1, "Reading the workspace packages");
let all;
try {
  all = readWorkspacePackages(root);
} catch (err) {
  fail(2, err.message);
}
for (const p of all.filter((p) => p.private)) console.log(`  skip ${p.name} (${p.dir}): private`);
const pub = publicPackages(all);
if (pub.length === 0) fail(2, "no public workspace packages to release");
const { version, problems } = checkVersions(all);
if (problems.length > 0) fail(2, `the packages cannot be released as they are:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
console.log(`  ${pub.length} public packages, all at version ${version}; every internal dependency names ${version}`);
// npm packs the working tree, not a commit: say so when it differs from the last commit.
const git = spawnSync("git", ["status", "--porcelain", "--", ...pub.map((p) => p.dir)], { cwd: root, encoding: "utf8" });
if (git.status === 0 && git.stdout.trim() !== "") {
  const n = git.stdout.trim().split("\n").length;
  console.log(`  note: ${n} uncommitted change${n === 1 ? "" : "s"} in the package folders (git status); npm packs the files as they are now`);
}

// (b) dependency order
step(2, "Ordering the packages by their internal dependencies");
let order;
try {
  order = publishOrder(pub);
} catch (err) {
  fail(2, err.message);
}
const names = new Set(pub.map((p) => p.name));
order.forEach((p, i) => {
  const deps = internalDependencies(p, names);
  console.log(`  ${i + 1}. ${p.name}@${p.version} (${p.dir})${deps.length ? `  after ${deps.join(", ")}` : ""}`);
});

// (c) build
step(3, "Building");
if (opts.skipBuild) console.log("  skipped (--skip-build)");
else if (npmShown(["run", "build"]) !== 0) fail(1, "npm run build failed; nothing was published");

// (d) test
step(4, "Testing");
if (opts.skipTests) console.log("  skipped (--skip-tests)");
else if (npmShown(["test"]) !== 0) fail(1, "npm test failed; nothing was published");

// (e) publish, in order; stop at the first failure, since later packages may need the one that failed
step(5, opts.publish ? "Publishing" : "Publishing (dry run: npm publish --dry-run)");
const registryArgs = opts.registry ? ["--registry", opts.registry] : [];
// A dry run must not wait on npm's retries against a registry it may not be able to reach.
const retryArgs = opts.publish ? [] : ["--fetch-retries", "0"];
const done = [];
const skipped = [];
for (const [i, p] of order.entries()) {
  const id = `${p.name}@${p.version}`;
  console.log(`\n  (${i + 1}/${order.length}) ${id} from ${p.dir}`);
  const view = spawnSync(npm, ["view", id, "version", ...registryArgs, ...retryArgs], { cwd: root, encoding: "utf8", shell: process.platform === "win32" });
  if (view.error) fail(1, `npm could not be started: ${view.error.message}`);
  const seen = classifyView(view, p.version);
  if (seen.state === "published") {
    console.log(`  skip ${id}: already on the registry`);
    skipped.push(id);
    continue;
  }
  if (seen.state === "unknown") {
    if (opts.publish) {
      fail(1, `cannot tell whether ${id} is already on the registry (${seen.reason}); ${summary()}`);
    }
    console.log(`  the registry could not be asked (${seen.reason}); a dry run takes ${id} as not published`);
  }
  const status = npmShown([...publishArgs(p.dir, opts), ...retryArgs]);
  if (status !== 0) fail(1, `publishing ${id} (${p.dir}) failed with exit code ${status}; ${summary()}`);
  done.push(id);
}

console.log(`\nrelease: ${opts.publish ? "published" : "dry run succeeded for"} ${done.length ? done.join(", ") : "nothing"}${skipped.length ? `; already on the registry: ${skipped.join(", ")}` : ""}`);

function summary() {
  const left = order.map((p) => `${p.name}@${p.version}`).filter((id) => !done.includes(id) && !skipped.includes(id));
  const parts = [];
  if (done.length) parts.push(`${opts.publish ? "published" : "dry-run published"}: ${done.join(", ")}`);
  if (skipped.length) parts.push(`already on the registry: ${skipped.join(", ")}`);
  parts.push(`not published: ${left.join(", ")}`);
  return `${parts.join("; ")}. Fix the cause and run the release again: published versions are skipped.`;
}
