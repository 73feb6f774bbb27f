/**
 * Finds handler packages, imports their modules and checks every definition before the executor starts:
 * schemas compile, (node_type_id, version) is unique, and the SDK that made it is compatible with ours.
 * A problem with a package the operator named stops the start; a package found by discovery that has one is
 * skipped and reported (`failed`), so one broken package in node_modules does not take the others down with it.
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
import { compileHandlerSchema, createHandlerAjv } from "../../http/handler-schemas.js";
import { versionProblem } from "../../store/node-type-version-order.js";

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
  /** Discovered packages that were skipped because they could not be loaded, with the reason. */
  failed: FailedHandlerLoad[];
}

/** A discovered handler package that the executor skipped: none of its node types are served. */
export interface FailedHandlerLoad {
  /** npm package name (its folder under node_modules when package.json cannot be read). */
  package: string;
  /** Version of that package, when known. */
  version?: string;
  /** The package's directory. */
  dir: string;
  /** The handler module at fault, when exactly one is. */
  module?: string;
  /** Why it was skipped; several problems are joined with "; ". */
  reason: string;
}

/** A pino-compatible logger (the loader only warns and informs). */
export interface LoaderLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface LoadHandlersOptions {
  /** Package names, package directories or module files. */
  handlers?: string[];
  /** Directories whose `node_modules` (and themselves) are scanned for packages with `nodefabric.handlers`; broken ones are skipped and listed in `failed`. */
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

/** True for a package that means to be a handler package: it has a `nodefabric` field or the `nodefabric-handler` keyword. */
function claimsHandlerPackage(pkg: PackageJson | undefined): boolean {
  return pkg !== undefined && (pkg.nodefabric !== undefined || (Array.isArray(pkg.keywords) && pkg.keywords.includes("nodefabric-handler")));
}

/**
 * Packages under `root` that mean to be handler packages: root itself, then node_modules/* and node_modules/@scope/*.
 * Those without a usable `nodefabric.handlers` are still returned, so that discovery reports them instead of
 * passing over them in silence.
 */
function discoverPackageDirs(root: string): string[] {
  const found: string[] = [];
  if (claimsHandlerPackage(tryReadPackageJson(root))) found.push(root);
  const nm = path.join(root, "node_modules");
  if (!isDirectory(nm)) return found;
  const consider = (dir: string) => {
    if (isDirectory(dir) && claimsHandlerPackage(tryReadPackageJson(dir))) found.push(dir);
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

/** A package found by discovery: its problems skip it rather than stop the start. */
interface DiscoveredPackage {
  /** Its real directory, which identifies it. */
  key: string;
  /** Its place in discovery order, which failed loads are listed in. */
  order: number;
  name: string;
  version?: string;
  dir: string;
}

interface Collected {
  definition: FabricDefinition;
  source: HandlerSource;
  /** Set when the definition came from a discovered package. */
  discovered?: DiscoveredPackage;
}

/** Problems found while loading: those that stop the start, and the discovered packages to skip with their reasons. */
class LoadProblems {
  readonly fatal: string[] = [];
  private readonly skipped = new Map<string, { pkg: DiscoveredPackage; reasons: string[]; modules: Set<string> }>();

  /** Records a problem that stops the start. */
  stop(message: string): void {
    this.fatal.push(message);
  }

  /** Skips a discovered package for `reason` (`module`: the handler module at fault). */
  skip(pkg: DiscoveredPackage, reason: string, module?: string): void {
    let entry = this.skipped.get(pkg.key);
    if (!entry) this.skipped.set(pkg.key, (entry = { pkg, reasons: [], modules: new Set() }));
    entry.reasons.push(reason);
    if (module) entry.modules.add(module);
  }

  /** Skips a discovered package for `reason`; anything else stops the start with `message`. */
  add(discovered: DiscoveredPackage | undefined, message: string, reason: string, module?: string): void {
    if (discovered) this.skip(discovered, reason, module);
    else this.stop(message);
  }

  /** True for a definition's package that is skipped. */
  isSkipped(discovered: DiscoveredPackage | undefined): boolean {
    return discovered !== undefined && this.skipped.has(discovered.key);
  }

  /** The skipped packages, in discovery order. */
  failedLoads(): FailedHandlerLoad[] {
    return [...this.skipped.values()].sort((a, b) => a.pkg.order - b.pkg.order).map(({ pkg, reasons, modules }) => ({
      package: pkg.name,
      ...(pkg.version ? { version: pkg.version } : {}),
      dir: pkg.dir,
      ...(modules.size === 1 ? { module: [...modules][0] } : {}),
      reason: reasons.join("; "),
    }));
  }
}

/** The name a package is known by before its package.json is read: its path under node_modules, else its folder name. */
function nameFromDir(dir: string): string {
  const parts = path.resolve(dir).split(path.sep);
  const nm = parts.lastIndexOf("node_modules");
  return nm >= 0 && nm < parts.length - 1 ? parts.slice(nm + 1).join("/") : path.basename(dir);
}

/** Imports handler modules once each and gathers their definitions, noting problems instead of stopping at the first. */
class Collector {
  readonly collected: Collected[] = [];
  readonly problems = new LoadProblems();
  readonly warnings: string[] = [];
  private readonly seenModules = new Set<string>();
  private readonly seenPackages = new Set<string>();
  private readonly seenDefinitions = new Set<object>();
  private packagesVisited = 0;

  constructor(private readonly logger: LoaderLogger) {}

  warn(message: string): void {
    this.warnings.push(message);
    this.logger.warn({ warning: message }, message);
  }

  /** Loads one package directory named by the operator, or found by discovery (`discovered`: skipped when broken). */
  async loadPackage(dir: string, label: string, origin: "named" | "discovered"): Promise<number> {
    const order = this.packagesVisited++;
    let real: string;
    try {
      real = realpathSync(dir);
    } catch {
      const where: DiscoveredPackage | undefined = origin === "discovered" ? { key: path.resolve(dir), order, name: nameFromDir(dir), dir } : undefined;
      this.problems.add(where, `handler package ${label}: directory ${dir} does not exist`, `directory ${dir} does not exist`);
      return 0;
    }
    if (this.seenPackages.has(real)) return 0;
    this.seenPackages.add(real);
    let pkg: PackageJson;
    try {
      pkg = readPackageJson(dir);
    } catch (err) {
      const where: DiscoveredPackage | undefined = origin === "discovered" ? { key: real, order, name: nameFromDir(dir), dir } : undefined;
      const problem = `cannot read ${path.join(dir, "package.json")}: ${(err as Error).message}`;
      this.problems.add(where, `handler package ${label}: ${problem}`, problem);
      return 0;
    }
    const name = pkg.name ?? label;
    const discovered: DiscoveredPackage | undefined =
      origin === "discovered" ? { key: real, order, name: pkg.name ?? nameFromDir(dir), ...(typeof pkg.version === "string" ? { version: pkg.version } : {}), dir } : undefined;
    let modules: string[];
    if (hasHandlersField(pkg)) {
      const list = pkg.nodefabric!.handlers;
      if (!Array.isArray(list) || list.length === 0 || !list.every((m) => typeof m === "string" && m.length > 0)) {
        const problem = `"nodefabric.handlers" in package.json must be a non-empty array of module paths, such as ["./dist/index.js"]`;
        this.problems.add(discovered, `handler package ${name} (${dir}): ${problem}`, `${problem} (it is ${JSON.stringify(list)})`);
        return 0;
      }
      modules = list as string[];
    } else if (origin === "named" && Array.isArray(pkg.keywords) && pkg.keywords.includes("nodefabric-handler")) {
      modules = [mainEntry(pkg)];
    } else {
      // Discovery only imports packages that name their modules; one that only looks like a handler package is reported.
      const has = pkg.nodefabric !== undefined ? `"nodefabric": ${JSON.stringify(pkg.nodefabric)}` : `the keyword "nodefabric-handler"`;
      this.problems.add(
        discovered,
        `${name} (${dir}) is not a NodeFabric handler package: its package.json has neither "nodefabric": { "handlers": [...] } nor the keyword "nodefabric-handler"`,
        `its package.json has ${has} but no "nodefabric": { "handlers": [...] } naming its modules; add it, or name the package with --handlers`,
      );
      return 0;
    }
    let count = 0;
    for (const rel of modules) {
      const file = path.resolve(dir, rel);
      if (!existsSync(file)) {
        const hint = /(^|[\\/])(dist|build|lib|out)[\\/]/.test(rel) ? "; build the package first (npm run build)" : "";
        const problem = `its handler module ${rel} does not exist at ${file}${hint}`;
        this.problems.add(discovered, `handler package ${name}: ${problem}`, problem, file);
        continue;
      }
      count += await this.loadModule(file, { package: name, version: pkg.version, path: file }, discovered);
    }
    return count;
  }

  /** Imports one module and keeps every definition it exports (default: one or an array; named exports too). */
  async loadModule(file: string, source: HandlerSource, discovered?: DiscoveredPackage): Promise<number> {
    let real: string;
    try {
      real = realpathSync(file);
    } catch {
      this.problems.add(discovered, `handler module ${file} does not exist`, `handler module ${file} does not exist`, file);
      return 0;
    }
    if (this.seenModules.has(real)) return 0;
    this.seenModules.add(real);
    let ns: Record<string, unknown>;
    try {
      ns = (await import(/* @vite-ignore */ pathToFileURL(real).href)) as Record<string, unknown>;
    } catch (err) {
      const e = err as Error;
      const cause = e?.message ?? String(err);
      const where = source.package ? `handler module ${file} of package ${source.package}` : `handler module ${file}`;
      this.problems.add(discovered, `cannot import ${where}: ${cause}`, `cannot import ${file}: ${cause}`, file);
      return 0;
    }
    let count = 0;
    const take = (value: unknown) => {
      if (!isDefinition(value) || this.seenDefinitions.has(value)) return;
      this.seenDefinitions.add(value);
      this.collected.push({ definition: value, source, ...(discovered ? { discovered } : {}) });
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

type Checked = LoadedDefinition & { discovered?: DiscoveredPackage };

/** Checks one definition and compiles its schemas; records its problems and returns undefined when it has any. */
function checkDefinition(item: Collected, problems: LoadProblems, nodeTypeValidator: ValidateFunction): Checked | undefined {
  const { definition, source, discovered } = item;
  const nt = definition.nodeType;
  const name = `${String(nt.node_type_id)}@${String(nt.version)}`;
  if (typeof definition.sdkVersion !== "string" || !sdkCompatible(definition.sdkVersion)) {
    const problem =
      `was made with @nodefabric/core/sdk ${String(definition.sdkVersion)}, ` +
      `which this executor (SDK ${SDK_VERSION}) cannot run; rebuild the package against @nodefabric/core ${compatibleRange()}`;
    problems.add(discovered, `node type ${name} from ${describe(source)} ${problem}`, `node type ${name} ${problem}`, source.path);
    return undefined;
  }
  // A node type version is any string the registry can publish (semver or not); only the SDK version is semver.
  const valid = nodeTypeValidator(nt);
  const versionIssue = valid ? versionProblem(nt.version) : undefined;
  if (!valid || versionIssue) {
    const issues = !valid
      ? dedupeIssues(issuesFromAjv(nodeTypeValidator.errors)).map((i) => `${i.path} ${i.message}`)
      : [`/version ${versionIssue}`];
    const problem = `is not a valid NodeType: ${issues.join("; ")}`;
    problems.add(discovered, `node type ${name} from ${describe(source)} ${problem}`, `node type ${name} ${problem}`, source.path);
    return undefined;
  }
  const ajv = createHandlerAjv();
  let validateInputs: ValidateFunction | undefined;
  let validateOutputs: ValidateFunction | undefined;
  for (const which of ["input_schema", "output_schema"] as const) {
    try {
      const fn = compileHandlerSchema(ajv, nt[which]);
      if (which === "input_schema") validateInputs = fn;
      else validateOutputs = fn;
    } catch (err) {
      const problem = `its ${which} does not compile: ${(err as Error).message}`;
      problems.add(discovered, `node type ${name} from ${describe(source)}: ${problem}`, `node type ${name}: ${problem}`, source.path);
    }
  }
  if (!validateInputs || !validateOutputs) return undefined;
  return { definition, source, validateInputs, validateOutputs, ...(discovered ? { discovered } : {}) };
}

/**
 * Reports every (node_type_id, version) defined more than once. Within one discovered package that package is
 * skipped; across packages, or in named ones, the start stops: which one to serve is the operator's call.
 */
function checkDuplicates(checked: Checked[], problems: LoadProblems): void {
  const byKey = new Map<string, Checked[]>();
  for (const c of checked) {
    const key = `${c.definition.nodeType.node_type_id}\u0000${c.definition.nodeType.version}`;
    const list = byKey.get(key);
    if (list) list.push(c);
    else byKey.set(key, [c]);
  }
  for (const list of byKey.values()) {
    if (list.length < 2) continue;
    const nt = list[0]!.definition.nodeType;
    const name = `${nt.node_type_id}@${nt.version}`;
    const times = list.length === 2 ? "twice" : `${list.length} times`;
    const owner = list[0]!.discovered;
    if (owner && list.every((c) => c.discovered?.key === owner.key)) {
      const where = list.map((c) => c.source.path).join(" and ");
      problems.skip(owner, `node type ${name} is defined ${times}, in ${where}; each (node_type_id, version) must be defined once`);
      continue;
    }
    const by = list.map((c) => `by ${describe(c.source)}`);
    problems.stop(
      `node type ${name} is defined ${times}: ${by.slice(0, -1).join(", ")} and ${by[by.length - 1]}; ` +
        `each (node_type_id, version) must come from one package (remove one, or give it a new version)`,
    );
  }
}

/** Checks definitions and compiles their schemas; skips broken discovered packages, and throws a HandlerLoadError listing every other problem. */
function buildLoadedHandlers(collected: Collected[], warnings: string[], problems: LoadProblems): LoadedHandlers {
  const nodeTypeValidator = validatorFor("node_type");
  const checked: Checked[] = [];
  for (const item of collected) {
    const c = checkDefinition(item, problems, nodeTypeValidator);
    if (c) checked.push(c);
  }
  // A skipped package serves none of its node types, so its good ones can clash with nothing.
  checkDuplicates(checked.filter((c) => !problems.isSkipped(c.discovered)), problems);
  if (problems.fatal.length > 0) throw new HandlerLoadError(problems.fatal);
  const definitions: LoadedDefinition[] = checked
    .filter((c) => !problems.isSkipped(c.discovered))
    .map(({ definition, source, validateInputs, validateOutputs }) => ({ definition, source, validateInputs, validateOutputs }));
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
    failed: problems.failedLoads(),
  };
}

/** LoadedHandlers from definitions already in memory (tests, `runHandler`), with the same checks as `loadHandlers`. */
export function handlersFromDefinitions(definitions: Array<FabricDefinition | { definition: FabricDefinition; source: HandlerSource }>): LoadedHandlers {
  const collected: Collected[] = [];
  const problems = new LoadProblems();
  const seen = new Set<object>();
  definitions.forEach((d, i) => {
    const item = isDefinition(d)
      ? { definition: d, source: { path: `<in-memory definition ${i}>` } }
      : typeof d === "object" && d !== null && isDefinition(d.definition)
        ? { definition: d.definition, source: d.source }
        : undefined;
    if (!item) problems.stop(`item ${i} is not a node type definition (make it with defineAtomic)`);
    else if (!seen.has(item.definition)) {
      // The same object twice is one definition, as with a module exporting it twice.
      seen.add(item.definition);
      collected.push(item);
    }
  });
  return buildLoadedHandlers(collected, [], problems);
}

/**
 * Loads handler packages and modules and checks every definition. A problem with anything named in `handlers` (or a
 * discover folder that does not exist) stops the start with a HandlerLoadError; a broken package found by discovery
 * is skipped and listed in `failed`. A (node_type_id, version) defined by two packages always stops the start.
 */
export async function loadHandlers(options: LoadHandlersOptions = {}): Promise<LoadedHandlers> {
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const logger = options.logger ?? stderrLogger;
  const collector = new Collector(logger);
  const fatal = (message: string) => collector.problems.stop(message);
  for (const entry of options.handlers ?? []) {
    if (typeof entry !== "string" || entry.trim() === "") {
      fatal(`handler entry ${JSON.stringify(entry)} is empty`);
      continue;
    }
    const asPath = path.resolve(cwd, entry);
    const pkgDir = looksLikePath(entry) ? undefined : findPackageDir(entry, cwd);
    if (pkgDir) {
      await collector.loadPackage(pkgDir, entry, "named");
    } else if (existsSync(asPath)) {
      if (isDirectory(asPath)) await collector.loadPackage(asPath, entry, "named");
      else await collector.loadModule(asPath, { path: asPath });
    } else if (looksLikePath(entry)) {
      fatal(`handler path ${entry} does not exist (resolved to ${asPath})`);
    } else {
      fatal(`handler package ${entry} cannot be found from ${cwd}; install it there (npm install ${entry}) or give a path to it`);
    }
  }
  for (const entry of options.discover ?? []) {
    const root = path.resolve(cwd, entry);
    if (!isDirectory(root)) {
      fatal(`discover directory ${entry} does not exist (resolved to ${root})`);
      continue;
    }
    const dirs = discoverPackageDirs(root);
    for (const dir of dirs) await collector.loadPackage(dir, path.relative(cwd, dir) || dir, "discovered");
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
