/**
 * What scripts/build-changed.mjs decides with: the workspace packages in build order, what each one's build reads
 * (its own files, a few shared files of the root, and what it sees of other workspace packages), the fingerprint of
 * all that, and the stamp a successful build leaves in `dist/`. Nothing here runs a build, so the decisions can be
 * read apart from the running; test/build-changed.test.ts drives both through the command on a small workspace.
 *
 * The rule it keeps: a package is up to date only when everything its build could have read is what it was when its
 * stamp was written, and its `dist/` is the one that build wrote. Where it cannot tell what a build reads, it
 * counts more as read, never less.
 */
import { createHash } from "node:crypto";
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync, statSync } from "node:fs";
import path from "node:path";
import { readWorkspacePackages } from "./release-lib.mjs";

/** Bumped when what a stamp means changes, so stamps written by an earlier version of this script count as stale. */
export const STAMP_FORMAT = 1;
/** The stamp's file, in the package's build output folder: removing `dist/` removes it. */
export const STAMP_FILE = ".build-stamp";
export const OUT_DIR = "dist";

/**
 * Files of the root that every build reads: the tsconfig the packages extend (core has none of its own, so tsup
 * finds the root's), and the lock files, which stand for the installed toolchain (tsup, esbuild, TypeScript, vite)
 * and the third-party code that is bundled.
 */
export const SHARED_INPUTS = ["tsconfig.json", "package-lock.json", "node_modules/.package-lock.json"];

/** Folders of a package that no build reads: the output, installs, and the package's tests. */
const SKIPPED_TOP = new Set([OUT_DIR, "node_modules", "test", ".git"]);
const SKIPPED_ANYWHERE = new Set(["node_modules", ".git"]);
/** Files scanned for the modules they import. */
const CODE = /\.(?:[cm]?[jt]sx?|vue|svelte|html)$/;
/** Declarations: what a package that imports another as an external reads of it. */
const DECLARATIONS = /\.d\.[cm]?ts$/;

const sha = (data) => createHash("sha256").update(data).digest("hex");

/**
 * The workspace packages of `root` (read from the root package.json's `workspaces` and each package.json), each with
 * its own input files, the workspace packages its files import, and the tsconfig `paths` that point into another
 * package; in build order (each after the packages it imports or declares), the workspace order deciding ties.
 */
export function readPlan(root) {
  const packages = readWorkspacePackages(root).map((p) => ({ ...p, abs: path.join(root, p.dir) }));
  const byName = new Map(packages.map((p) => [p.name, p]));
  for (const p of packages) {
    p.files = ownFiles(p.abs);
    // tsup's options: its config file, or the "tsup" field of package.json.
    const tsupFiles = Object.keys(p.files).filter((f) => /^tsup\.config\.[cm]?[jt]s$/.test(f));
    p.tsupConfig = tsupFiles.map((f) => readFileSync(path.join(p.abs, f), "utf8")).join("\n") + JSON.stringify(p.manifest.tsup ?? "");
    p.imports = new Map(); // name → "src" | "outside" (where the importing file is; "outside" wins)
    p.pathsInto = new Set(); // packages whose files a tsconfig `paths` of this package points at
    p.extra = new Map(); // files outside every package that this package's files or build script name → their hash
    scanImports(root, p, packages);
    scanTsconfigPaths(root, p, packages);
    scanBuildScript(root, p, packages);
    const fields = ["dependencies", "peerDependencies", "devDependencies", "optionalDependencies"];
    p.declared = new Set(fields.flatMap((f) => Object.keys(p.manifest[f] ?? {})).filter((n) => byName.has(n) && n !== p.name));
  }
  const ordered = buildOrder(packages);
  for (const p of ordered) p.reads = readsOf(p, byName);
  return { root, packages: ordered, byName, shared: sharedInputs(root) };
}

/** Every file of the package a build could read, relative to it with forward slashes, mapped to its content's hash. */
export function ownFiles(abs) {
  return hashFiles(abs, SKIPPED_TOP, (name) => !name.endsWith(".md"));
}

/** The files under `abs` (but the folders `skip` names at its top, and node_modules and .git anywhere) → hashes. */
function hashFiles(abs, skipTop, keep = () => true) {
  const files = {};
  const walk = (dir, rel) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (rel === "" ? skipTop.has(entry.name) : SKIPPED_ANYWHERE.has(entry.name)) continue;
      const full = path.join(dir, entry.name);
      const r = rel === "" ? entry.name : `${rel}/${entry.name}`;
      if (entry.isSymbolicLink()) files[r] = sha(`symlink:${readlinkSync(full)}`);
      else if (entry.isDirectory()) walk(full, r);
      else if (entry.isFile() && keep(entry.name)) files[r] = sha(readFileSync(full));
    }
  };
  walk(abs, "");
  return files;
}

/**
 * The shared inputs of the root, each mapped to its hash (or "absent"), and NODE_ENV, which tools read (vite makes a
 * development build of the console when it is "development").
 */
export function sharedInputs(root) {
  return { ...Object.fromEntries(SHARED_INPUTS.map((f) => [f, hashPath(path.join(root, f))])), $NODE_ENV: process.env.NODE_ENV ?? "" };
}

/** A file's or a folder's hash (a folder: every file under it, by relative path), or "absent". */
function hashPath(abs) {
  let st;
  try {
    st = statSync(abs);
  } catch {
    return "absent";
  }
  if (st.isFile()) return sha(readFileSync(abs));
  if (st.isDirectory()) return sha(JSON.stringify(hashFiles(abs, SKIPPED_ANYWHERE)));
  return "absent";
}

/**
 * Module specifiers in code: `import … from "x"`, `export … from "x"`, `import "x"`, `import("x")`, `require("x")`,
 * `require.resolve("x")`, `import.meta.resolve("x")`, and `/// <reference types|path="x" />`. A string that merely
 * names a package (core names the plugins it loads at run time) is not an import: no bundler follows it.
 */
const SPECIFIER = /(?:\bfrom|\bimport|\brequire|\bresolve)\s*\(?\s*(["'`])([^"'`\n]+)\1/g;
const REFERENCE = /<reference\s+(?:types|path)\s*=\s*["']([^"']+)["']/g;

function scanImports(root, p, packages) {
  for (const rel of Object.keys(p.files)) {
    if (!CODE.test(rel)) continue;
    const text = readFileSync(path.join(p.abs, rel), "utf8");
    const where = rel.startsWith("src/") ? "src" : "outside";
    const specs = [...text.matchAll(SPECIFIER)].map((m) => m[2]).concat([...text.matchAll(REFERENCE)].map((m) => m[1]));
    for (const spec of specs) {
      if (spec.startsWith("./") || spec.startsWith("../")) {
        // A relative import that leaves the package reads another package's files, or a file of no package.
        const target = path.resolve(path.dirname(path.join(p.abs, rel)), spec);
        if (inside(p.abs, target)) continue;
        const owner = packages.find((q) => inside(q.abs, target));
        if (owner) addImport(p, owner.name, "outside");
        else p.extra.set(path.relative(root, target), hashModule(target));
        continue;
      }
      const owner = packages.find((q) => spec === q.name || spec.startsWith(`${q.name}/`));
      if (owner && owner !== p) addImport(p, owner.name, where);
    }
  }
}

function addImport(p, name, where) {
  if (p.imports.get(name) !== "outside") p.imports.set(name, where);
}

/** A module named by a relative path, as a resolver might find it: the path itself, or with an extension or index. */
function hashModule(target) {
  const candidates = [target, target.replace(/\.([cm]?)js$/, ".$1ts"), `${target}.ts`, `${target}.js`, `${target}.json`];
  candidates.push(path.join(target, "index.ts"), path.join(target, "index.js"));
  return sha(JSON.stringify(candidates.map((c) => [c, existsSync(c) && statSync(c).isFile() ? hashPath(c) : "absent"])));
}

/**
 * A tsconfig `paths` entry that points into another package makes the compiler read that package's sources instead
 * of its built declarations (the handlers map @nodefabric/sdk to sdk/src), so the build reads all of it. The root
 * tsconfig.json, which every package's tsconfig extends, counts for every package.
 */
function scanTsconfigPaths(root, p, packages) {
  const configs = Object.keys(p.files).filter((f) => /(^|\/)tsconfig[^/]*\.json$/.test(f)).map((f) => path.join(p.abs, f));
  configs.push(path.join(root, "tsconfig.json"));
  for (const file of configs) {
    if (!existsSync(file)) continue;
    const config = readJsonc(file);
    const options = config?.compilerOptions ?? {};
    const base = path.resolve(path.dirname(file), options.baseUrl ?? ".");
    // A path into a package, or a wildcard path above several ("../../*/src"), and a project reference.
    const targets = Object.values(options.paths ?? {})
      .flatMap((t) => (Array.isArray(t) ? t : []))
      .map((x) => path.resolve(base, String(x).replace(/\*.*$/, "")));
    for (const ref of Array.isArray(config?.references) ? config.references : []) {
      if (typeof ref?.path === "string") targets.push(path.resolve(path.dirname(file), ref.path));
    }
    for (const target of targets) {
      for (const q of packages) if (q !== p && (inside(q.abs, target) || inside(target, q.abs))) p.pathsInto.add(q.name);
    }
    for (const ext of [config?.extends ?? []].flat()) {
      if (typeof ext !== "string" || !ext.startsWith(".")) continue;
      const target = path.resolve(path.dirname(file), ext);
      if (!inside(p.abs, target)) p.extra.set(path.relative(root, target), hashPath(target));
    }
  }
}

/** A path the build script (or its pre and post scripts) names outside the package is an input too. */
function scanBuildScript(root, p, packages) {
  const scripts = ["prebuild", "build", "postbuild"].map((s) => p.manifest.scripts?.[s] ?? "").join(" ");
  for (const raw of scripts.split(/[\s;&|<>()]+/)) {
    const token = raw.replace(/^['"]|['"]$/g, "").replace(/^--?[\w-]+=/, "");
    if (!token.startsWith("../") && !token.startsWith("/")) continue;
    const target = path.resolve(p.abs, token);
    if (inside(p.abs, target)) continue;
    const owner = packages.find((q) => inside(q.abs, target));
    if (owner) addImport(p, owner.name, "outside");
    else p.extra.set(path.relative(root, target), hashPath(target));
  }
}

/** tsconfig files may hold comments and trailing commas. */
function readJsonc(file) {
  const text = readFileSync(file, "utf8");
  const noComments = text.replace(/("(?:[^"\\]|\\.)*")|\/\/[^\n]*|\/\*[\s\S]*?\*\//g, (m, str) => str ?? "");
  try {
    return JSON.parse(noComments.replace(/,(\s*[}\]])/g, "$1"));
  } catch (err) {
    throw new Error(`${file} cannot be read: ${err.message}`);
  }
}

const escapeRegExp = (t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

const inside = (dir, target) => {
  const r = path.relative(dir, target);
  return r === "" || (!r.startsWith("..") && !path.isAbsolute(r));
};

/**
 * The packages in build order: each after every workspace package it declares (any dependency field) or imports,
 * the workspace order deciding among those free to go. Throws on a cycle, naming the packages caught in it or after it.
 */
export function buildOrder(packages) {
  const names = new Set(packages.map((p) => p.name));
  const deps = new Map(packages.map((p) => [p.name, [...new Set([...p.declared, ...p.imports.keys()])].filter((n) => names.has(n))]));
  const order = [];
  const done = new Set();
  while (order.length < packages.length) {
    const next = packages.find((p) => !done.has(p.name) && deps.get(p.name).every((d) => done.has(d)));
    if (!next) {
      const left = packages.filter((p) => !done.has(p.name)).map((p) => p.name);
      throw new Error(`the workspace packages depend on each other in a cycle, among: ${left.join(", ")}`);
    }
    order.push(next);
    done.add(next.name);
  }
  return order;
}

/**
 * How `p`'s build sees a workspace package `e` it reaches: "decl" when it reads only e's package.json and built
 * declarations (e is an external to tsup: a `dependencies` or `peerDependencies` entry, and no tsconfig path leads
 * to its sources), else "full": it reads e's sources or bundles e's built code, so all of e counts.
 */
export function modeOf(p, e) {
  const external = Object.hasOwn(p.manifest.dependencies ?? {}, e) || Object.hasOwn(p.manifest.peerDependencies ?? {}, e);
  if (!external || p.pathsInto.has(e) || /\bnoExternal\b/.test(p.tsupConfig)) return "full";
  return "decl";
}

/**
 * Every workspace package `p`'s build reads, with how (modeOf): those its files import, and, through each of them,
 * what that one reads (its declarations name its own imports; its sources import theirs). An import from a file
 * outside src/ (the console's web/, built by vite) is bundled: full. Through a package read in full, everything is
 * read in full.
 */
function readsOf(p, byName) {
  const reads = new Map();
  const add = (name, mode) => {
    if (name === p.name) return;
    if (reads.get(name) !== "full") reads.set(name, mode);
  };
  for (const [name, where] of p.imports) {
    const mode = where === "outside" ? "full" : modeOf(p, name);
    add(name, mode);
    for (const [further] of byName.get(name).reads) add(further, mode === "full" ? "full" : modeOf(p, further));
  }
  return new Map([...reads].sort(([a], [b]) => (a < b ? -1 : 1)));
}

/**
 * What a package that reads `e` only as declarations sees of it: its package.json, its built `.d.ts` files, and any
 * file it exports from outside `dist/` (the schemas export `v1/*`: the compiler reads an imported JSON file to type
 * it).
 */
export function declarationsView(e) {
  const files = { "package.json": e.files["package.json"] ?? "absent" };
  for (const [rel] of distFiles(e.abs)) if (DECLARATIONS.test(rel)) files[`${OUT_DIR}/${rel}`] = hashPath(path.join(e.abs, OUT_DIR, rel));
  const outside = ["main", "module", "types", "typings", "exports"]
    .flatMap((f) => exportTargets(e.manifest[f]))
    .map((t) => t.replace(/^\.\//, ""))
    .filter((t) => t !== OUT_DIR && !t.startsWith(`${OUT_DIR}/`))
    .map((t) => new RegExp(`^${t.split("*").map(escapeRegExp).join(".*")}${t.endsWith("/") ? ".*" : ""}$`));
  for (const [rel, hash] of Object.entries(e.files)) if (outside.some((re) => re.test(rel))) files[rel] = hash;
  return sha(JSON.stringify(files));
}

/** Every path an `exports` (or `main`, `types`) value names, conditions and subpaths flattened. */
function exportTargets(value) {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(exportTargets);
  if (value && typeof value === "object") return Object.values(value).flatMap(exportTargets);
  return [];
}

/**
 * The inputs of `p`'s build and their fingerprint, given the fingerprints of the packages built before it
 * (`fingerprints`: name → fingerprint). The fingerprint stands for everything the build reads: a package read in
 * full is represented by its own fingerprint (its built code is made from exactly that), one read as declarations
 * by those files.
 */
export function inputsOf(p, plan, fingerprints) {
  const reads = {};
  for (const [name, mode] of p.reads) {
    const e = plan.byName.get(name);
    reads[name] = `${mode}:${mode === "full" ? fingerprints.get(name) : declarationsView(e)}`;
  }
  const inputs = { format: STAMP_FORMAT, files: p.files, shared: plan.shared, extra: Object.fromEntries([...p.extra].sort()), reads };
  return { ...inputs, fingerprint: sha(JSON.stringify(inputs)) };
}

/** Every file of the package's `dist/` but the stamp, with its size and modification time. */
export function distFiles(abs) {
  const out = [];
  const root = path.join(abs, OUT_DIR);
  const walk = (dir, rel) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const r = rel === "" ? entry.name : `${rel}/${entry.name}`;
      if (r === STAMP_FILE) continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full, r);
      else {
        const st = lstatSync(full);
        out.push([r, [st.size, st.mtimeMs]]);
      }
    }
  };
  walk(root, "");
  return out;
}

/** The stamp of `p`'s last successful build, or undefined. */
export function readStamp(p) {
  try {
    return JSON.parse(readFileSync(path.join(p.abs, OUT_DIR, STAMP_FILE), "utf8"));
  } catch {
    return undefined;
  }
}

/**
 * Why `p` must be built, comparing its current inputs with its stamp, or undefined when it is up to date: the same
 * fingerprint, and a `dist/` with the same files, sizes and times as the build that wrote the stamp left.
 */
export function staleReason(p, inputs, stamp) {
  if (!stamp) return existsSync(path.join(p.abs, OUT_DIR)) ? "no stamp of a successful build" : `no ${OUT_DIR}/`;
  if (stamp.format !== STAMP_FORMAT) return "stamped by another version of build-changed";
  if (stamp.fingerprint !== inputs.fingerprint) return changes(inputs, stamp);
  if (JSON.stringify(distFiles(p.abs)) !== JSON.stringify(stamp.dist)) return `${OUT_DIR}/ changed since its build`;
  return undefined;
}

/** What differs between the inputs and the stamp, in a few words. */
function changes(inputs, stamp) {
  const differing = (a = {}, b = {}) => [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((k) => a[k] !== b[k]).sort();
  const files = differing(inputs.files, stamp.files);
  if (files.length) return `${files.slice(0, 3).join(", ")}${files.length > 3 ? ` and ${files.length - 3} more` : ""} changed`;
  const shared = differing(inputs.shared, stamp.shared);
  if (shared.length) return `${shared.join(", ")} changed`;
  const extra = differing(inputs.extra, stamp.extra);
  if (extra.length) return `${extra.join(", ")} changed`;
  const reads = differing(inputs.reads, stamp.reads);
  if (reads.length) return `what it reads of ${reads.join(", ")} changed`;
  return "its inputs changed";
}

/** The stamp to write after a successful build: the inputs it was built from, and the `dist/` it left. */
export function stampOf(p, inputs) {
  return { ...inputs, dist: distFiles(p.abs) };
}
