/**
 * How long a handler author's first `npm install` takes, from a registry on this machine.
 *
 *   npm run bench:install [-- --rounds N]
 *
 * Publishes this repository's packages to a fresh Verdaccio on loopback (the release script), scaffolds `my-api` with
 * `npm create fabric-handler@latest`, and times its `npm install` with an empty npm cache, N times (the first round
 * also fills Verdaccio's own storage from the upstream registry, so it is reported apart). Beside it, in the same
 * run, the floor: the same package with `@nodefabric/sdk` left out, that is the TypeScript, tsup, vitest and nock
 * any such package installs; and the same install again with npm's cache already filled. Prints one JSON line per
 * scenario and a table of medians and ratios.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { startLocalRegistry, repo } from "../e2e/local-registry.mjs";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "5" } } });
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error("--rounds must be a whole number of at least 1");
  process.exit(2);
}

const work = mkdtempSync(path.join(os.tmpdir(), "nf-bench-install-"));
const registry = await startLocalRegistry(path.join(work, "registry"));
try {
  execFileSync(process.execPath, ["scripts/release.mjs", "--publish", "--registry", registry.url, "--skip-build", "--skip-tests"], { cwd: repo, env: registry.env, stdio: "ignore" });
  execFileSync("npm", ["create", "fabric-handler@latest", "my-api", "--", "--template", "atomic"], { cwd: work, env: { ...registry.env, npm_config_yes: "true" }, stdio: "ignore" });

  const sdkDir = path.join(work, "my-api");
  const floorDir = path.join(work, "floor");
  mkdirSync(floorDir);
  const manifest = JSON.parse(readFileSync(path.join(sdkDir, "package.json"), "utf8"));
  const floor = structuredClone(manifest);
  floor.name = "floor";
  delete floor.peerDependencies;
  delete floor.devDependencies["@nodefabric/sdk"];
  writeFileSync(path.join(floorDir, "package.json"), JSON.stringify(floor, null, 2));

  /** One `npm install` in `dir` with an empty cache: seconds and the packages npm added. */
  const install = (dir, round, cacheName = `cache-${path.basename(dir)}-${round}`) => {
    rmSync(path.join(dir, "node_modules"), { recursive: true, force: true });
    rmSync(path.join(dir, "package-lock.json"), { force: true });
    const cache = path.join(work, cacheName);
    const start = process.hrtime.bigint();
    const res = spawnSync("npm", ["install"], { cwd: dir, env: { ...registry.env, npm_config_cache: cache }, encoding: "utf8" });
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    if (res.status !== 0) throw new Error(`npm install in ${dir} failed:\n${res.stdout}${res.stderr}`);
    if (cacheName.startsWith("cache-")) rmSync(cache, { recursive: true, force: true });
    const added = /added (\d+) packages?/.exec(res.stdout)?.[1];
    return { seconds, packages: added === undefined ? undefined : Number(added) };
  };

  // Round 0 fills Verdaccio's storage for both (it fetches from the upstream registry once).
  const first = { sdk: install(sdkDir, 0), floor: install(floorDir, 0) };
  const samples = { sdk: [], floor: [], sdkWarm: [] };
  for (let r = 1; r <= rounds; r++) {
    // Alternated, so a noisy moment on this shared machine falls on both.
    samples.sdk.push(install(sdkDir, r).seconds);
    samples.floor.push(install(floorDir, r).seconds);
  }
  // An author who has installed these tools before: npm's cache is warm (npm still asks the registry for each
  // package's metadata; the tarballs come from the cache).
  install(sdkDir, 0, "warm");
  for (let r = 1; r <= rounds; r++) samples.sdkWarm.push(install(sdkDir, r, "warm").seconds);
  const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  const sdk = median(samples.sdk);
  const fl = median(samples.floor);
  const rows = [
    { scenario: "handler-install", median_s: sdk, packages: first.sdk.packages, first_s: first.sdk.seconds, rounds, ratio_to_floor: sdk / fl, target_s: 20 },
    { scenario: "handler-install-floor", median_s: fl, packages: first.floor.packages, first_s: first.floor.seconds, rounds },
    { scenario: "handler-install-warm-cache", median_s: median(samples.sdkWarm), packages: first.sdk.packages, first_s: first.sdk.seconds, rounds, ratio_to_floor: median(samples.sdkWarm) / fl, target_s: 20 },
  ];
  for (const row of rows) console.log(JSON.stringify(row));
  console.log("\n| scenario | median (s) | packages | first round, registry cold (s) | ratio to floor |\n|---|---|---|---|---|");
  for (const row of rows) {
    console.log(`| ${row.scenario} | ${row.median_s.toFixed(1)} | ${row.packages ?? "?"} | ${row.first_s.toFixed(1)} | ${row.ratio_to_floor === undefined ? "1" : row.ratio_to_floor.toFixed(2)} |`);
  }
} finally {
  await registry.stop();
  rmSync(work, { recursive: true, force: true });
}
