/**
 * Finds handler packages, imports their modules and checks every definition before the executor starts:
 * schemas compile, (node_type_id, version) is unique, and the SDK that made it is compatible with ours.
 */
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import semver from "semver";
import type { ValidateFunction } from "ajv";
import { validatorFor } from "@nodefabric/schemas";
import { isDefinition, SDK_VERSION } from "../../sdk/define-atomic.js";
import type { FabricDefinition } from "../../sdk/types.js";
import { dedupeIssues, issuesFromAjv } from "../../http/validation.js";
import { compileHandlerSchema, createHandlerAjv } from "./handler-schemas.js";

/** Where a definition came from. */
export interface HandlerSource {
  /** npm package name, when it came from a package. */
  package?: string;
  /** Version of that package. */
  version?: string;
  /** The module file that exported it. */
  path: string;
}

/** A checked definition, with its schemas compiled once. */
export interface LoadedDefinition {
  definition: FabricDefinition;
  source: HandlerSource;
  validateInputs: ValidateFunction;
  validateOutputs: ValidateFunction;
}

/** Every definition the executor serves, looked up by id and version. */
export interface LoadedHandlers {
  definitions: LoadedDefinition[];
  /** All versions of each node_type_id. */
  byId: ReadonlyMap<string, LoadedDefinition[]>;
  /** The definition of exactly this id and version. */
  find(nodeTypeId: string, version: string): LoadedDefinition | undefined;
  /** Things worth telling the operator that did not stop the start (e.g. discovery found nothing). */
  warnings: string[];
}

/** A pino-compatible logger (the loader only warns and informs). */
export interface LoaderLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface LoadHandlersOptions {
  /** Package names, package directories or module files. */
  handlers?: string[];
  /** Directories whose `node_modules` (and themselves) are scanned for packages with `nodefabric.handlers`. */
  discover?: string[];
  /** Where package names are resolved from and relative paths start (default: process.cwd()). */
  cwd?: string;
  logger?: LoaderLogger;
}

/** One or more problems that stop the start; `problems` lists each, the message joins them. */
export class HandlerLoadError extends Error {
  readonly problems: string[];

  constructor(problems: string[]) {
    super(problems.length === 1 ? problems[0] : `cannot load handlers:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "HandlerLoadError";
    this.problems = problems;
  }
}

interface PackageJson {
  name?: string;
  version?: string;
  main?: string;
  exports?: unknown;
  keywords?: unknown;
  nodefabric?: { handlers?: unknown };
}

const stderrLogger: LoaderLogger = {
  info: () => undefined,
  warn: (obj, msg) => process.stderr.write(`nodefabric: ${msg ?? JSON.stringify(obj)}\n`),
};

function describe(source: HandlerSource): string {
  return source.package ? `package ${source.package}${source.version ? `@${source.version}` : ""} (${source.path})` : source.path;
}

function readPackageJson(dir: string): PackageJson {
  const file = path.join(dir, "package.json");
  const text = readFileSync(file, "utf8");
  const parsed = JSON.parse(text) as unknown;
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error(`${file} is not a JSON object`);
  return parsed as PackageJson;
}

function tryReadPackageJson(dir: string): PackageJson | undefined {
  try {
    return readPackageJson(dir);
  } catch {
    return undefined;
  }
}

function hasHandlersField(pkg: PackageJson | undefined): boolean {
  return pkg?.nodefabric !== undefined && typeof pkg.nodefabric === "object" && pkg.nodefabric !== null && "handlers" in pkg.nodefabric;
}

/** The directory of an installed package, resolved the way Node would from `cwd`. */
function findPackageDir(name: string, cwd: string): string | undefined {
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
function mainEntry(pkg: PackageJson): string {
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

function looksLikePath(entry: string): boolean {
  return entry.startsWith(".") || path.isAbsolute(entry) || entry.includes("\\");
}

function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** Packages under `root` that declare `nodefabric.handlers`: root itself, then node_modules/* and node_modules/@scope/*. */
function discoverPackageDirs(root: string): string[] {
  const found: string[] = [];
  if (hasHandlersField(tryReadPackageJson(root))) found.push(root);
  const nm = path.join(root, "node_modules");
  if (!isDirectory(nm)) return found;
  const consider = (dir: string) => {
    if (isDirectory(dir) && hasHandlersField(tryReadPackageJson(dir))) found.push(dir);
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

interface Collected {
  definition: FabricDefinition;
  source: HandlerSource;
}

/** Imports handler modules once each and gathers their definitions, noting problems instead of stopping at the first. */
class Collector {
  readonly collected: Collected[] = [];
  readonly problems: string[] = [];
  readonly warnings: string[] = [];
  private readonly seenModules = new Set<string>();
  private readonly seenPackages = new Set<string>();
  private readonly seenDefinitions = new Set<object>();

  constructor(private readonly logger: LoaderLogger) {}

  warn(message: string): void {
    this.warnings.push(message);
    this.logger.warn({ warning: message }, message);
  }

  /** Loads one package directory; `viaKeyword` allows the main-export fallback (named packages only). */
  async loadPackage(dir: string, label: string, viaKeyword: boolean): Promise<number> {
    let real: string;
    try {
      real = realpathSync(dir);
    } catch {
      this.problems.push(`handler package ${label}: directory ${dir} does not exist`);
      return 0;
    }
    if (this.seenPackages.has(real)) return 0;
    this.seenPackages.add(real);
    let pkg: PackageJson;
    try {
      pkg = readPackageJson(dir);
    } catch (err) {
      this.problems.push(`handler package ${label}: cannot read ${path.join(dir, "package.json")}: ${(err as Error).message}`);
      return 0;
    }
    const name = pkg.name ?? label;
    let modules: string[];
    if (hasHandlersField(pkg)) {
      const list = pkg.nodefabric!.handlers;
      if (!Array.isArray(list) || list.length === 0 || !list.every((m) => typeof m === "string" && m.length > 0)) {
        this.problems.push(`handler package ${name} (${dir}): "nodefabric.handlers" in package.json must be a non-empty array of module paths, such as ["./dist/index.js"]`);
        return 0;
      }
      modules = list as string[];
    } else if (viaKeyword && Array.isArray(pkg.keywords) && pkg.keywords.includes("nodefabric-handler")) {
      modules = [mainEntry(pkg)];
    } else {
      this.problems.push(
        `${name} (${dir}) is not a NodeFabric handler package: its package.json has neither "nodefabric": { "handlers": [...] } nor the keyword "nodefabric-handler"`,
      );
      return 0;
    }
    let count = 0;
    for (const rel of modules) {
      const file = path.resolve(dir, rel);
      if (!existsSync(file)) {
        const hint = /(^|[\\/])(dist|build|lib|out)[\\/]/.test(rel) ? "; build the package first (npm run build)" : "";
        this.problems.push(`handler package ${name}: its handler module ${rel} does not exist at ${file}${hint}`);
        continue;
      }
      count += await this.loadModule(file, { package: name, version: pkg.version, path: file });
    }
    return count;
  }

  /** Imports one module and keeps every definition it exports (default: one or an array; named exports too). */
  async loadModule(file: string, source: HandlerSource): Promise<number> {
    let real: string;
    try {
      real = realpathSync(file);
    } catch {
      this.problems.push(`handler module ${file} does not exist`);
      return 0;
    }
    if (this.seenModules.has(real)) return 0;
    this.seenModules.add(real);
    let ns: Record<string, unknown>;
    try {
      ns = (await import(/* @vite-ignore */ pathToFileURL(real).href)) as Record<string, unknown>;
    } catch (err) {
      const e = err as Error;
      const where = source.package ? `handler module ${file} of package ${source.package}` : `handler module ${file}`;
      this.problems.push(`cannot import ${where}: ${e?.message ?? String(err)}`);
      return 0;
    }
    let count = 0;
    const take = (value: unknown) => {
      if (!isDefinition(value) || this.seenDefinitions.has(value)) return;
      this.seenDefinitions.add(value);
      this.collected.push({ definition: value, source });
      count++;
    };
    const keys = Object.keys(ns).sort((a, b) => (a === "default" ? -1 : b === "default" ? 1 : 0));
    for (const key of keys) {
      const value = ns[key];
      if (Array.isArray(value)) value.forEach(take);
      else take(value);
    }
    if (count === 0 && !Object.values(ns).some((v) => isDefinition(v) || (Array.isArray(v) && v.some(isDefinition)))) {
      this.warn(`${describe(source)} exports no node type definitions (export default defineAtomic({ ... }))`);
    }
    return count;
  }
}

function sdkCompatible(version: string): boolean {
  const theirs = semver.parse(version);
  const ours = semver.parse(SDK_VERSION);
  if (!theirs || !ours) return false;
  if (theirs.major !== ours.major) return false;
  return ours.major !== 0 || theirs.minor === ours.minor;
}

function compatibleRange(): string {
  const ours = semver.parse(SDK_VERSION);
  return ours ? (ours.major === 0 ? `${ours.major}.${ours.minor}.x` : `${ours.major}.x`) : SDK_VERSION;
}

/** Checks definitions and compiles their schemas; throws a HandlerLoadError listing every problem. */
export function buildLoadedHandlers(collected: Collected[], warnings: string[] = [], priorProblems: string[] = []): LoadedHandlers {
  const problems = [...priorProblems];
  const definitions: LoadedDefinition[] = [];
  const byKey = new Map<string, Collected>();
  const nodeTypeValidator = validatorFor("node_type");
  for (const item of collected) {
    const { definition, source } = item;
    const nt = definition.nodeType;
    const name = `${String(nt.node_type_id)}@${String(nt.version)}`;
    if (typeof definition.sdkVersion !== "string" || !sdkCompatible(definition.sdkVersion)) {
      problems.push(
        `node type ${name} from ${describe(source)} was made with @nodefabric/core/sdk ${String(definition.sdkVersion)}, ` +
          `which this executor (SDK ${SDK_VERSION}) cannot run; rebuild the package against @nodefabric/core ${compatibleRange()}`,
      );
      continue;
    }
    if (!nodeTypeValidator(nt)) {
      const issues = dedupeIssues(issuesFromAjv(nodeTypeValidator.errors)).map((i) => `${i.path} ${i.message}`);
      problems.push(`node type ${name} from ${describe(source)} is not a valid NodeType: ${issues.join("; ")}`);
      continue;
    }
    const key = `${nt.node_type_id}\u0000${nt.version}`;
    const prior = byKey.get(key);
    if (prior) {
      problems.push(
        `node type ${name} is defined twice: by ${describe(prior.source)} and by ${describe(source)}; ` +
          `each (node_type_id, version) must come from one package (remove one, or give it a new version)`,
      );
      continue;
    }
    byKey.set(key, item);
    const ajv = createHandlerAjv();
    let validateInputs: ValidateFunction | undefined;
    let validateOutputs: ValidateFunction | undefined;
    for (const which of ["input_schema", "output_schema"] as const) {
      try {
        const fn = compileHandlerSchema(ajv, nt[which]);
        if (which === "input_schema") validateInputs = fn;
        else validateOutputs = fn;
      } catch (err) {
        problems.push(`node type ${name} from ${describe(source)}: its ${which} does not compile: ${(err as Error).message}`);
      }
    }
    if (validateInputs && validateOutputs) definitions.push({ definition, source, validateInputs, validateOutputs });
  }
  if (problems.length > 0) throw new HandlerLoadError(problems);
  const byId = new Map<string, LoadedDefinition[]>();
  for (const d of definitions) {
    const list = byId.get(d.definition.nodeType.node_type_id);
    if (list) list.push(d);
    else byId.set(d.definition.nodeType.node_type_id, [d]);
  }
  return {
    definitions,
    byId,
    find: (id, version) => byId.get(id)?.find((d) => d.definition.nodeType.version === version),
    warnings,
  };
}

/** LoadedHandlers from definitions already in memory (tests, `runHandler`), with the same checks as `loadHandlers`. */
export function handlersFromDefinitions(definitions: Array<FabricDefinition | { definition: FabricDefinition; source: HandlerSource }>): LoadedHandlers {
  const collected: Collected[] = [];
  const problems: string[] = [];
  const seen = new Set<object>();
  definitions.forEach((d, i) => {
    const item = isDefinition(d)
      ? { definition: d, source: { path: `<in-memory definition ${i}>` } }
      : typeof d === "object" && d !== null && isDefinition(d.definition)
        ? d
        : undefined;
    if (!item) problems.push(`item ${i} is not a node type definition (make it with defineAtomic)`);
    else if (!seen.has(item.definition)) {
      // The same object twice is one definition, as with a module exporting it twice.
      seen.add(item.definition);
      collected.push(item);
    }
  });
  return buildLoadedHandlers(collected, [], problems);
}

/** Loads handler packages and modules, checks every definition, and stops with a clear error when one is wrong. */
export async function loadHandlers(options: LoadHandlersOptions = {}): Promise<LoadedHandlers> {
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const logger = options.logger ?? stderrLogger;
  const collector = new Collector(logger);
  for (const entry of options.handlers ?? []) {
    if (typeof entry !== "string" || entry.trim() === "") {
      collector.problems.push(`handler entry ${JSON.stringify(entry)} is empty`);
      continue;
    }
    const asPath = path.resolve(cwd, entry);
    const pkgDir = looksLikePath(entry) ? undefined : findPackageDir(entry, cwd);
    if (pkgDir) {
      await collector.loadPackage(pkgDir, entry, true);
    } else if (existsSync(asPath)) {
      if (isDirectory(asPath)) await collector.loadPackage(asPath, entry, true);
      else await collector.loadModule(asPath, { path: asPath });
    } else if (looksLikePath(entry)) {
      collector.problems.push(`handler path ${entry} does not exist (resolved to ${asPath})`);
    } else {
      collector.problems.push(`handler package ${entry} cannot be found from ${cwd}; install it there (npm install ${entry}) or give a path to it`);
    }
  }
  for (const entry of options.discover ?? []) {
    const root = path.resolve(cwd, entry);
    if (!isDirectory(root)) {
      collector.problems.push(`discover directory ${entry} does not exist (resolved to ${root})`);
      continue;
    }
    const dirs = discoverPackageDirs(root);
    for (const dir of dirs) await collector.loadPackage(dir, path.relative(cwd, dir) || dir, false);
    if (dirs.length === 0) collector.warn(`discovery in ${root} found no handler packages (packages declare "nodefabric": { "handlers": [...] } in package.json)`);
  }
  const loaded = buildLoadedHandlers(collector.collected, collector.warnings, collector.problems);
  for (const d of loaded.definitions) {
    logger.info(
      { node_type_id: d.definition.nodeType.node_type_id, version: d.definition.nodeType.version, package: d.source.package, path: d.source.path },
      "handler loaded",
    );
  }
  return loaded;
}
