/**
 * Finding NodeFabric packages on disk: reading a package.json, resolving an installed package the way Node would, and
 * scanning a folder's node_modules for packages that declare themselves in their package.json. Handler packages
 * (`"nodefabric": { "handlers": [...] }`) and plugin packages (`"nodefabric": { "plugins": [...] }`) are found the
 * same way; each loader says which packages it claims.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

export interface PackageJson {
  name?: string;
  version?: string;
  main?: string;
  exports?: unknown;
  keywords?: unknown;
  nodefabric?: { handlers?: unknown; plugins?: unknown };
}

export function readPackageJson(dir: string): PackageJson {
  const file = path.join(dir, "package.json");
  const text = readFileSync(file, "utf8");
  const parsed = JSON.parse(text) as unknown;
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error(`${file} is not a JSON object`);
  return parsed as PackageJson;
}

export function tryReadPackageJson(dir: string): PackageJson | undefined {
  try {
    return readPackageJson(dir);
  } catch {
    return undefined;
  }
}

/** Whether the package's `nodefabric` field is an object holding `key` (`handlers`, `plugins`). */
export function hasNodefabricField(pkg: PackageJson | undefined, key: "handlers" | "plugins"): boolean {
  return pkg?.nodefabric !== undefined && typeof pkg.nodefabric === "object" && pkg.nodefabric !== null && key in pkg.nodefabric;
}

/** Whether the package carries `keyword` in its package.json keywords. */
export function hasKeyword(pkg: PackageJson | undefined, keyword: string): boolean {
  return pkg !== undefined && Array.isArray(pkg.keywords) && pkg.keywords.includes(keyword);
}

/** The directory of an installed package, resolved the way Node would from `cwd`. */
export function findPackageDir(name: string, cwd: string): string | undefined {
  const req = createRequire(path.join(cwd, "noop.js"));
  try {
    return path.dirname(req.resolve(`${name}/package.json`));
  } catch {
    // A package whose `exports` hides package.json cannot be resolved that way; look in node_modules directly.
  }
  for (const dir of req.resolve.paths(name) ?? []) {
    const candidate = path.join(dir, name);
    if (existsSync(path.join(candidate, "package.json"))) return candidate;
  }
  return undefined;
}

/** The ESM entry of a package: `exports["."]` (import/node/default), else `main`, else index.js. */
export function mainEntry(pkg: PackageJson): string {
  const pick = (v: unknown): string | undefined => {
    if (typeof v === "string") return v;
    if (Array.isArray(v)) {
      for (const item of v) {
        const p = pick(item);
        if (p) return p;
      }
      return undefined;
    }
    if (typeof v === "object" && v !== null) {
      const o = v as Record<string, unknown>;
      if ("." in o) return pick(o["."]);
      for (const cond of ["import", "node", "default"]) if (cond in o) return pick(o[cond]);
    }
    return undefined;
  };
  return pick(pkg.exports) ?? pkg.main ?? "index.js";
}

export function looksLikePath(entry: string): boolean {
  return entry.startsWith(".") || path.isAbsolute(entry) || entry.includes("\\");
}

export function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Packages under `root` that `claims` accepts: root itself, then node_modules/* and node_modules/@scope/*, in name
 * order. `claims` decides what a package means to be; the loader then reports those it cannot use.
 */
export function discoverPackageDirs(root: string, claims: (pkg: PackageJson | undefined) => boolean): string[] {
  const found: string[] = [];
  if (claims(tryReadPackageJson(root))) found.push(root);
  const nm = path.join(root, "node_modules");
  if (!isDirectory(nm)) return found;
  const consider = (dir: string) => {
    if (isDirectory(dir) && claims(tryReadPackageJson(dir))) found.push(dir);
  };
  for (const entry of readdirSync(nm).sort()) {
    if (entry.startsWith(".")) continue;
    const full = path.join(nm, entry);
    if (entry.startsWith("@")) {
      if (!isDirectory(full)) continue;
      for (const sub of readdirSync(full).sort()) if (!sub.startsWith(".")) consider(path.join(full, sub));
    } else {
      consider(full);
    }
  }
  return found;
}

/** The name a package is known by before its package.json is read: its path under node_modules, else its folder name. */
export function nameFromDir(dir: string): string {
  const parts = path.resolve(dir).split(path.sep);
  const nm = parts.lastIndexOf("node_modules");
  return nm >= 0 && nm < parts.length - 1 ? parts.slice(nm + 1).join("/") : path.basename(dir);
}
