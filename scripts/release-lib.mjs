/**
 * The pure parts of `npm run release` (scripts/release.mjs): which packages this repository publishes, whether their
 * versions agree, in which order they go to the registry, and how the command line reads. Nothing here runs npm, so
 * test/e2e/release.test.ts checks it directly.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/** The dependency fields that can name another workspace package. */
export const DEPENDENCY_FIELDS = ["dependencies", "peerDependencies", "devDependencies", "optionalDependencies"];

/** Fields whose workspace targets a user installs with the package, so they must be public too. */
const INSTALLED_FIELDS = ["dependencies", "peerDependencies", "optionalDependencies"];

/**
 * Expands the root package.json `workspaces` patterns into package directories, relative to `root` and with forward
 * slashes, in the order the patterns list them. A pattern is a path whose segments may be `*` (any one directory);
 * a directory without a package.json is not a package.
 */
export function workspaceDirs(root, patterns) {
  if (!Array.isArray(patterns)) throw new Error(`${path.join(root, "package.json")} has no "workspaces" array`);
  const found = [];
  for (const pattern of patterns) {
    let dirs = [""];
    for (const segment of pattern.split("/").filter((s) => s !== "" && s !== ".")) {
      if (segment === "**" ) throw new Error(`workspace pattern ${pattern}: "**" is not supported; list the folders with "*"`);
      const next = [];
      for (const dir of dirs) {
        if (!segment.includes("*")) {
          next.push(dir ? `${dir}/${segment}` : segment);
          continue;
        }
        const abs = path.join(root, dir);
        if (!existsSync(abs)) continue;
        const re = new RegExp(`^${segment.split("*").map(escapeRegExp).join("[^/]*")}$`);
        for (const entry of readdirSync(abs, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
          if (entry.isDirectory() && entry.name !== "node_modules" && !entry.name.startsWith(".") && re.test(entry.name)) next.push(dir ? `${dir}/${entry.name}` : entry.name);
        }
      }
      dirs = next;
    }
    for (const dir of dirs) if (dir && existsSync(path.join(root, dir, "package.json")) && !found.includes(dir)) found.push(dir);
  }
  return found;
}

function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Every workspace package of the repository at `root`: `{ name, version, dir, private, manifest }`, in the order the
 * root `workspaces` list them.
 */
export function readWorkspacePackages(root) {
  const rootManifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
  return workspaceDirs(root, rootManifest.workspaces).map((dir) => {
    const file = path.join(root, dir, "package.json");
    let manifest;
    try {
      manifest = JSON.parse(readFileSync(file, "utf8"));
    } catch (err) {
      throw new Error(`${dir}/package.json cannot be read: ${err.message}`);
    }
    if (typeof manifest.name !== "string" || manifest.name === "") throw new Error(`${dir}/package.json has no "name"`);
    return { name: manifest.name, version: manifest.version, dir, private: manifest.private === true, manifest };
  });
}

/** The packages that go to the registry: those not marked `"private": true`. */
export function publicPackages(packages) {
  return packages.filter((p) => !p.private);
}

/**
 * Checks that the public packages can be released together: one shared version, and every dependency on another
 * workspace package naming exactly that version (npm does not rewrite ranges at publish time, so what is written is
 * what users get). A public package must not need a private one at install time. Returns `{ version, problems }`;
 * the release may go on only when `problems` is empty.
 */
export function checkVersions(packages) {
  const problems = [];
  const pub = publicPackages(packages);
  const byName = new Map(packages.map((p) => [p.name, p]));
  const versions = new Map();
  for (const p of pub) {
    if (typeof p.version !== "string" || p.version === "") problems.push(`${p.name} (${p.dir}) has no "version"`);
    else versions.set(p.version, [...(versions.get(p.version) ?? []), p.name]);
  }
  let version;
  if (versions.size === 1) version = [...versions.keys()][0];
  else if (versions.size > 1) {
    const list = [...versions].map(([v, names]) => `${v} (${names.join(", ")})`).join("; ");
    problems.push(`the public packages must share one version, but they have ${versions.size}: ${list}`);
  }
  for (const p of pub) {
    for (const field of DEPENDENCY_FIELDS) {
      for (const [dep, spec] of Object.entries(p.manifest[field] ?? {})) {
        const target = byName.get(dep);
        if (!target) continue;
        if (target.private) {
          if (INSTALLED_FIELDS.includes(field)) problems.push(`${p.name} lists the private workspace package ${dep} in ${field}; users could not install it`);
          continue;
        }
        if (version !== undefined && spec !== version) problems.push(`${p.name} ${field} names ${dep}@${JSON.stringify(spec)}, not the release version ${JSON.stringify(version)}`);
      }
    }
  }
  return { version, problems };
}

/** The workspace packages among `pkg`'s dependencies (every field), limited to `names`. */
export function internalDependencies(pkg, names) {
  const deps = new Set();
  for (const field of DEPENDENCY_FIELDS) for (const dep of Object.keys(pkg.manifest[field] ?? {})) if (names.has(dep) && dep !== pkg.name) deps.add(dep);
  return [...deps];
}

/**
 * Orders `packages` so each comes after the workspace packages it depends on (a topological sort); among packages
 * free to go, the workspace order decides, so the order is stable. Throws, naming the loop, when they depend on each
 * other in a cycle.
 */
export function publishOrder(packages) {
  const names = new Set(packages.map((p) => p.name));
  const deps = new Map(packages.map((p) => [p.name, internalDependencies(p, names)]));
  const order = [];
  const done = new Set();
  while (order.length < packages.length) {
    const next = packages.find((p) => !done.has(p.name) && deps.get(p.name).every((d) => done.has(d)));
    if (!next) throw new Error(`the workspace packages depend on each other in a cycle: ${findCycle(packages.filter((p) => !done.has(p.name)), deps).join(" → ")}`);
    order.push(next);
    done.add(next.name);
  }
  return order;
}

/** One cycle among `packages` (each of which is left only because it waits on another), as names, first repeated last. */
function findCycle(packages, deps) {
  const left = new Set(packages.map((p) => p.name));
  let at = packages[0].name;
  const path = [];
  while (!path.includes(at)) {
    path.push(at);
    at = deps.get(at).find((d) => left.has(d));
  }
  return [...path.slice(path.indexOf(at)), at];
}

export const USAGE = `Usage: npm run release -- [options]

Builds, tests and publishes every public workspace package, in dependency order.
Without --publish it is a dry run: \`npm publish --dry-run\` for each package, nothing uploaded.

Options:
  --publish         really publish (default: dry run)
  --registry URL    the registry to check and publish to (default: npm's configured registry)
  --tag T           the dist-tag to publish under (default: latest)
  --otp CODE        a one-time password for npm's two-factor authentication
  --skip-build      do not run \`npm run build\`
  --skip-tests      do not run \`npm test\`
  --help            print this help

A version that is already on the registry is skipped, so a release that stopped half-way can be run again.`;

/**
 * Reads the release command line. Returns `{ publish, registry, tag, otp, skipBuild, skipTests, help }`; throws an
 * Error whose message says what is wrong for an unknown option or a missing or bad value.
 */
export function parseArgs(argv) {
  const opts = { publish: false, registry: undefined, tag: "latest", otp: undefined, skipBuild: false, skipTests: false, help: false };
  const flags = { "--publish": "publish", "--skip-build": "skipBuild", "--skip-tests": "skipTests", "--help": "help", "-h": "help" };
  const valued = { "--registry": "registry", "--tag": "tag", "--otp": "otp" };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const eq = arg.indexOf("=");
    const name = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
    if (name in flags) {
      if (name !== arg) throw new Error(`${name} takes no value`);
      opts[flags[name]] = true;
    } else if (name in valued) {
      const value = name !== arg ? arg.slice(eq + 1) : argv[++i];
      if (value === undefined || value === "" || (name === arg && value.startsWith("--"))) throw new Error(`${name} needs a value`);
      opts[valued[name]] = value;
    } else {
      throw new Error(`unknown option ${arg}`);
    }
  }
  if (opts.registry !== undefined) {
    let url;
    try {
      url = new URL(opts.registry);
    } catch {
      throw new Error(`--registry ${opts.registry} is not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`--registry ${opts.registry} must be an http or https URL`);
  }
  // npm refuses a dist-tag that is a valid semver range, since `npm install pkg@<tag>` could not tell them apart.
  if (!/^[a-z][a-z0-9._-]*$/i.test(opts.tag) || /^v?\d/.test(opts.tag)) throw new Error(`--tag ${opts.tag} is not a dist-tag (a name such as latest, next or beta)`);
  return opts;
}

/** The npm arguments that publish (or dry-run publish) the package in `dir`. */
export function publishArgs(dir, opts) {
  const args = ["publish", "--workspace", dir, "--tag", opts.tag, "--access", "public"];
  if (!opts.publish) args.push("--dry-run");
  if (opts.registry) args.push("--registry", opts.registry);
  if (opts.otp) args.push("--otp", opts.otp);
  return args;
}

/**
 * What `npm view <name>@<version> version` says about a version: `"published"` when it printed the version,
 * `"absent"` on npm's E404 (no such package, or no such version), `"unknown"` otherwise (the registry could not be
 * reached or refused to answer), with npm's own error line as `reason`.
 */
export function classifyView({ status, stdout, stderr }, version) {
  const printed = String(stdout ?? "").trim().replace(/^"|"$/g, "");
  if (status === 0 && printed === version) return { state: "published" };
  if (status === 0 && printed === "") return { state: "absent" };
  const err = String(stderr ?? "");
  if (/\bcode E404\b/.test(err)) return { state: "absent" };
  const line = err.split("\n").map((l) => l.replace(/^npm error\s*/, "").trim()).find((l) => l && !/^(code|errno|syscall)\b/.test(l));
  return { state: "unknown", reason: line ?? `npm view exited ${status}` };
}
