/**
 * Loads plugin packages before the fabric starts: those named (`plugins` in fabric.config.json, FABRIC_PLUGINS,
 * `--plugin`) and those found by discovery (packages whose package.json says `"nodefabric": { "plugins": [...] }`,
 * found as handler packages are). A named plugin that cannot load stops the start with its name and the reason; a
 * discovered one is skipped with a warning. Two plugins serving one store scheme always stop the start.
 */
import { existsSync, realpathSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { discoverPackageDirs, findPackageDir, hasKeyword, hasNodefabricField, isDirectory, looksLikePath, mainEntry, nameFromDir, readPackageJson, type PackageJson } from "./package-discovery.js";
import { isPlugin, pluginProblem, type PluginDefinition, type PluginStores } from "./plugin.js";

/** A plugin that cannot be used; the CLI prints the message and exits 2. */
export class PluginLoadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PluginLoadError";
  }
}

export interface LoadedPlugin {
  definition: PluginDefinition;
  /** Its package name, or the module path it was named by. */
  source: string;
  /** The module file it was imported from. */
  file: string;
  discovered: boolean;
}

export interface LoadPluginsOptions {
  /** Packages or paths named by the operator: each must load. */
  plugins?: readonly string[];
  /** Folders whose node_modules (and themselves) are scanned for plugin packages: broken ones are skipped. */
  discover?: readonly string[];
  /** Where names and relative paths are resolved from. */
  cwd?: string;
  /** Where warnings go (default: stderr). */
  warn?: (message: string) => void;
  /**
   * Packages loaded when installed, looked for from `cwd` and from core's own folder (so a copy installed beside core,
   * as `npx` does, counts), unless a plugin of that name is loaded already. One missing is no error; one that is
   * there and broken is skipped with a warning, as a discovered one is.
   */
  defaults?: readonly string[];
}

/** True for a package that means to be a plugin package: `nodefabric.plugins` or the `nodefabric-plugin` keyword. */
function claimsPluginPackage(pkg: PackageJson | undefined): boolean {
  return hasNodefabricField(pkg, "plugins") || hasKeyword(pkg, "nodefabric-plugin");
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** A problem with one plugin: thrown for a named one, a warning for a discovered one. */
class PluginProblem extends Error {}

/** The module files a plugin package names. */
function pluginModules(dir: string, pkg: PackageJson, discovered: boolean): string[] {
  if (hasNodefabricField(pkg, "plugins")) {
    const list = pkg.nodefabric!.plugins;
    if (!Array.isArray(list) || list.length === 0 || !list.every((m) => typeof m === "string" && m.length > 0)) {
      throw new PluginProblem(`"nodefabric.plugins" in package.json must be a non-empty array of module paths, such as ["./dist/index.js"] (it is ${JSON.stringify(list)})`);
    }
    return (list as string[]).map((m) => path.resolve(dir, m));
  }
  if (!discovered && hasKeyword(pkg, "nodefabric-plugin")) return [path.resolve(dir, mainEntry(pkg))];
  throw new PluginProblem(`it is not a NodeFabric plugin package: its package.json has no "nodefabric": { "plugins": [...] } naming its modules`);
}

/** Imports one plugin module and checks its default export. */
async function importPlugin(file: string, rel: string): Promise<PluginDefinition> {
  if (!existsSync(file)) {
    const hint = /(^|[\\/])(dist|build|lib|out)[\\/]/.test(rel) ? "; build the package first (npm run build)" : "";
    throw new PluginProblem(`its module ${rel} does not exist at ${file}${hint}`);
  }
  let ns: Record<string, unknown>;
  try {
    ns = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (err) {
    throw new PluginProblem(`importing ${file} failed: ${messageOf(err)}`);
  }
  const def = ns.default;
  if (!isPlugin(def)) {
    throw new PluginProblem(`${file} does not default-export a plugin made with definePlugin from @nodefabric/core (its default export is ${def === undefined ? "missing" : typeof def})`);
  }
  const problem = pluginProblem(def);
  if (problem) throw new PluginProblem(`its definition is not valid: ${problem}`);
  return def;
}

/** Loads one plugin package directory, or one module named by path. */
async function loadEntry(target: string, label: string, discovered: boolean): Promise<LoadedPlugin[]> {
  if (!isDirectory(target)) return [{ definition: await importPlugin(target, label), source: label, file: target, discovered }];
  let pkg: PackageJson;
  try {
    pkg = readPackageJson(target);
  } catch (err) {
    throw new PluginProblem(`cannot read ${path.join(target, "package.json")}: ${messageOf(err)}`);
  }
  const source = pkg.name ?? (discovered ? nameFromDir(target) : label);
  const out: LoadedPlugin[] = [];
  for (const file of pluginModules(target, pkg, discovered)) {
    out.push({ definition: await importPlugin(file, path.relative(target, file) || file), source, file, discovered });
  }
  return out;
}

/**
 * Loads the named plugins, then the discovered ones (a package both named and discovered loads once), and checks
 * that no two serve the same store scheme or have the same name.
 */
export async function loadPlugins(options: LoadPluginsOptions = {}): Promise<LoadedPlugin[]> {
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const warn = options.warn ?? ((m: string) => process.stderr.write(`nodefabric: ${m}\n`));
  const loaded: LoadedPlugin[] = [];
  const seen = new Set<string>();
  const once = (p: string) => {
    let real: string;
    try {
      real = realpathSync(p);
    } catch {
      real = path.resolve(p);
    }
    if (seen.has(real)) return false;
    seen.add(real);
    return true;
  };
  for (const entry of options.plugins ?? []) {
    if (typeof entry !== "string" || entry.trim() === "") throw new PluginLoadError(`plugin entry ${JSON.stringify(entry)} is empty`);
    const asPath = path.resolve(cwd, entry);
    const pkgDir = looksLikePath(entry) ? undefined : findPackageDir(entry, cwd);
    const target = pkgDir ?? (existsSync(asPath) ? asPath : undefined);
    if (target === undefined) {
      throw new PluginLoadError(
        looksLikePath(entry)
          ? `plugin ${entry}: the path does not exist (resolved to ${asPath})`
          : `plugin ${entry} cannot be found from ${cwd}; install it there (npm install ${entry}) or give a path to it`,
      );
    }
    if (!once(target)) continue;
    try {
      loaded.push(...(await loadEntry(target, entry, false)));
    } catch (err) {
      throw new PluginLoadError(`plugin ${entry}: ${messageOf(err)}`);
    }
  }
  for (const folder of options.discover ?? []) {
    const root = path.resolve(cwd, folder);
    if (!isDirectory(root)) continue; // the handler loader names a missing discover folder
    for (const dir of discoverPackageDirs(root, claimsPluginPackage)) {
      if (!once(dir)) continue;
      try {
        loaded.push(...(await loadEntry(dir, path.relative(cwd, dir) || dir, true)));
      } catch (err) {
        const name = readPackageName(dir);
        warn(`plugin package ${name} (${dir}) skipped: ${messageOf(err)}`);
      }
    }
  }
  for (const name of options.defaults ?? []) {
    const dir = findPackageDir(name, cwd) ?? findPackageDir(name, CORE_DIR);
    if (dir === undefined || !once(dir)) continue;
    try {
      const found = await loadEntry(dir, name, true);
      const fresh = found.filter((p) => !loaded.some((l) => l.definition.name === p.definition.name));
      loaded.push(...fresh);
    } catch (err) {
      warn(`plugin package ${name} (${dir}) skipped: ${messageOf(err)}`);
    }
  }
  checkClashes(loaded);
  return loaded;
}

/** Core's package folder (dist/ or src/ sit one level below it). */
const CORE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function readPackageName(dir: string): string {
  try {
    return readPackageJson(dir).name ?? nameFromDir(dir);
  } catch {
    return nameFromDir(dir);
  }
}

const describe = (p: LoadedPlugin) => (p.definition.name === p.source ? p.definition.name : `${p.definition.name} (${p.source})`);

/** Two plugins of one name, or two serving one store scheme, stop the start. */
function checkClashes(loaded: readonly LoadedPlugin[]): void {
  const byName = new Map<string, LoadedPlugin>();
  const byScheme = new Map<string, LoadedPlugin>();
  for (const p of loaded) {
    const other = byName.get(p.definition.name);
    if (other) throw new PluginLoadError(`two plugins are named ${p.definition.name}: ${other.file} and ${p.file}`);
    byName.set(p.definition.name, p);
    for (const scheme of p.definition.stores?.schemes ?? []) {
      const holder = byScheme.get(scheme);
      if (holder && holder !== p) throw new PluginLoadError(`plugins ${describe(holder)} and ${describe(p)} both serve the store scheme ${scheme}://; remove one of them`);
      byScheme.set(scheme, p);
    }
  }
}

/** The scheme of a store URL, lowercase and without the colon. */
export function storeScheme(url: string): string {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(url);
  if (!m) throw new PluginLoadError(`store URL ${url} has no scheme (expected e.g. postgres://host/db)`);
  return m[1]!.toLowerCase();
}

/** The stores serving a store URL: those of the one plugin that declares its scheme. */
export function storesFor(url: string, plugins: readonly LoadedPlugin[]): { plugin: LoadedPlugin; stores: PluginStores; url: URL } {
  const scheme = storeScheme(url);
  const plugin = plugins.find((p) => p.definition.stores?.schemes.includes(scheme));
  if (!plugin) {
    const available = plugins.flatMap((p) => (p.definition.stores?.schemes ?? []).map((s) => `${s}:// (${describe(p)})`));
    throw new PluginLoadError(
      `no plugin serves the store scheme ${scheme}:// of ${redact(url)}; ` +
        (available.length > 0 ? `schemes available: ${available.join(", ")}` : "no plugin with stores is loaded (name one with --plugin, or leave out the store URL to use SQLite)"),
    );
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new PluginLoadError(`store URL ${redact(url)} is not a valid URL`);
  }
  return { plugin, stores: plugin.definition.stores!, url: parsed };
}

/** A store URL as it may be printed: without its password. */
export function redact(url: string): string {
  return url.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/[^/:@]*):[^@/]*@/, "$1:***@");
}
