/**
 * Finds handler packages, imports their modules and checks what they define before the executor starts: each NodeType
 * is valid, its schemas would compile, (node_type_id, version) is unique, and the SDK that made it is compatible with
 * ours. Load is kept cheap, so a package generated from a 1,000-operation API starts in well under a second:
 *
 * - schemas are not compiled at load but on first use (`validateInputs`, `validateOutputs`), for every definition;
 *   load runs the cheap check of handler-schemas.ts instead;
 * - a set (`defineAtomicSet`) contributes the node types its index lists without reading their files; `find` reads,
 *   checks and caches (LRU) a member's NodeType the first time it is asked for it.
 *
 * Problems are kept as small as they are: one node type that cannot load (a bad NodeType, a schema that would not
 * compile) is skipped and listed in `failed`, and its package serves the rest. A package that cannot load at all is
 * skipped and listed when discovery found it, and stops the start when the operator named it.
 */
import { existsSync, realpathSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { ValidateFunction } from "ajv";
import { validatorFor, type NodeType } from "@nodefabric/schemas";
import { DEFINITION_BRAND, isDefinition } from "@nodefabric/sdk";
import { isAtomicSet } from "@nodefabric/sdk";
import { compileNodeTypeSchemas, nodeTypeProblem as sdkNodeTypeProblem, nodeTypeReason, readSetMember, sdkProblem } from "@nodefabric/sdk/runtime";
import type { AtomicSet, AtomicSetEntry, DefinitionKind, FabricDefinition, HandlerFn } from "@nodefabric/sdk";
import { dedupeIssues, issuesFromAjv } from "../../http/validation.js";
import { versionProblem } from "../../store/node-type-version-order.js";
import { discoverPackageDirs, findPackageDir, hasKeyword, hasNodefabricField, isDirectory, looksLikePath, mainEntry, nameFromDir, readPackageJson, type PackageJson } from "../../package-discovery.js";

/** Where a definition came from. */
export interface HandlerSource {
  /** npm package name, when it came from a package. */
  package?: string;
  /** Version of that package. */
  version?: string;
  /** The module file that exported it. */
  path: string;
}

/**
 * A checked definition. Its validators compile their schema on first call and keep it; while a schema does not compile
 * they fail everything with one error saying so, so call `schemaProblem()` first where that must read as what it is.
 */
export interface LoadedDefinition {
  definition: FabricDefinition;
  source: HandlerSource;
  validateInputs: ValidateFunction;
  validateOutputs: ValidateFunction;
  /**
   * Compiles both schemas unless done already, and says why one does not compile (undefined when both do). The first
   * time it finds a problem, the node type is listed in `failed` of the LoadedHandlers it came from.
   */
  schemaProblem?(): string | undefined;
}

/** A node type the executor serves, known without reading its NodeType (a definition's, or one listed by a set's index). */
export interface ServedNodeType {
  node_type_id: string;
  version: string;
  kind: DefinitionKind;
  source: HandlerSource;
}

/** The NodeTypes of one kind, read one at a time as they are iterated (set members from their files). */
export interface NodeTypeStream extends Iterable<NodeType> {
  /** How many there are, before any turn out not to load. */
  readonly count: number;
}

/** Every definition the executor serves, looked up by id and version. */
export interface LoadedHandlers {
  /** The definitions held in memory (defineAtomic, defineComposite); members of sets are not among them, see `served`. */
  definitions: LoadedDefinition[];
  /** All versions of each node_type_id among `definitions`. */
  byId: ReadonlyMap<string, LoadedDefinition[]>;
  /** The definition of exactly this id and version; a set member's NodeType file is read and checked on first use. */
  find(nodeTypeId: string, version: string): LoadedDefinition | undefined;
  /** Every node type served, set members included (those whose file turned out broken are left out). */
  readonly served: readonly ServedNodeType[];
  /** The versions of `nodeTypeId` served, of `kind` when given. */
  versionsOf(nodeTypeId: string, kind?: DefinitionKind): string[];
  /** Why a node type that a loaded package defines is not served (skipped at load, or its NodeType file turned out broken); else undefined. */
  notServed(nodeTypeId: string, version: string): string | undefined;
  /** The NodeTypes of `kind`, for publishing: read batch by batch rather than held at once. */
  nodeTypes(kind: DefinitionKind): NodeTypeStream;
  /** Things worth telling the operator that did not stop the start (e.g. discovery found nothing). */
  warnings: string[];
  /**
   * What was skipped because it could not be loaded, with the reason: whole packages (discovered ones), and single node
   * types (with `node_type_id`). It grows while the executor runs, when a set member's file or a schema turns out broken.
   */
  readonly failed: FailedHandlerLoad[];
}

/** A handler package, or one node type of it, that the executor skipped. */
export interface FailedHandlerLoad {
  /** npm package name (its folder under node_modules when package.json cannot be read; the module file for a module named by path). */
  package: string;
  /** Version of that package, when known. */
  version?: string;
  /** The package's directory. */
  dir: string;
  /** The handler module at fault, when exactly one is. */
  module?: string;
  /** Set when only this node type is skipped; the package serves the rest. */
  node_type_id?: string;
  /** The version of that node type. */
  node_type_version?: string;
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
  /** Members of sets kept loaded, schemas compiled, at once; the least recently used are dropped past it (default 256). */
  setCacheSize?: number;
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

/** A package with at least this many node types gets a progress line when it loads. */
export const PROGRESS_THRESHOLD = 100;
const DEFAULT_SET_CACHE_SIZE = 256;

/** Warnings go to stderr; of the info lines only progress (`{ progress: true }`), so a large package's load is visible. */
const stderrLogger: LoaderLogger = {
  info: (obj, msg) => {
    if ((obj as { progress?: unknown }).progress === true) process.stderr.write(`nodefabric: ${msg ?? JSON.stringify(obj)}\n`);
  },
  warn: (obj, msg) => process.stderr.write(`nodefabric: ${msg ?? JSON.stringify(obj)}\n`),
};

const silentLogger: LoaderLogger = { info: () => undefined, warn: () => undefined };

function describe(source: HandlerSource): string {
  return source.package ? `package ${source.package}${source.version ? `@${source.version}` : ""} (${source.path})` : source.path;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

const keyOf = (nodeTypeId: string, version: string) => `${nodeTypeId}\u0000${version}`;

/**
 * True for a package that means to be a handler package: `nodefabric.handlers`, the `nodefabric-handler` keyword, or
 * a `nodefabric` field that names no plugins (a plugin package, `"nodefabric": { "plugins": [...] }`, is the plugin
 * loader's).
 */
function claimsHandlerPackage(pkg: PackageJson | undefined): boolean {
  if (pkg === undefined) return false;
  if (hasNodefabricField(pkg, "handlers") || hasKeyword(pkg, "nodefabric-handler")) return true;
  return pkg.nodefabric !== undefined && !hasNodefabricField(pkg, "plugins");
}

/** A package (or a module named by path) that definitions came from: what failed loads are reported under. */
interface Owner {
  /** Its real directory (or file), which identifies it. */
  key: string;
  /** Its place in load order, which failed loads are listed in. */
  order: number;
  name: string;
  version?: string;
  dir: string;
  /** Found by discovery: a problem of the whole package skips it rather than stop the start. */
  discovered: boolean;
}

/** The failed loads of one LoadedHandlers: fixed at load, then growing as set members and schemas turn out broken. */
class FailureList {
  readonly entries: FailedHandlerLoad[] = [];
  private readonly keys = new Set<string>();

  /** Adds an entry unless one for the same package and node type is there; true when added. */
  add(entry: FailedHandlerLoad): boolean {
    const key = `${entry.package}\u0000${entry.node_type_id ?? ""}\u0000${entry.node_type_version ?? ""}`;
    if (this.keys.has(key)) return false;
    this.keys.add(key);
    this.entries.push(entry);
    return true;
  }
}

/** The FailedHandlerLoad of one node type of `owner`. */
function nodeTypeFailure(owner: Owner | undefined, source: HandlerSource, nodeTypeId: string, version: string, reason: string): FailedHandlerLoad {
  return {
    package: owner?.name ?? source.package ?? source.path,
    ...((owner?.version ?? source.version) ? { version: owner?.version ?? source.version } : {}),
    dir: owner?.dir ?? (path.isAbsolute(source.path) ? path.dirname(source.path) : ""),
    ...(path.isAbsolute(source.path) ? { module: source.path } : {}),
    node_type_id: nodeTypeId,
    node_type_version: version,
    reason,
  };
}

/** Problems found while loading: those that stop the start, the packages to skip, and the node types to skip. */
class LoadProblems {
  readonly fatal: string[] = [];
  private readonly skipped = new Map<string, { owner: Owner; reasons: string[]; modules: Set<string> }>();
  private readonly nodeTypes: Array<{ order: number; failure: FailedHandlerLoad }> = [];

  /** Records a problem that stops the start. */
  stop(message: string): void {
    this.fatal.push(message);
  }

  /** Skips a discovered package for `reason` (`module`: the handler module at fault). */
  skip(owner: Owner, reason: string, module?: string): void {
    let entry = this.skipped.get(owner.key);
    if (!entry) this.skipped.set(owner.key, (entry = { owner, reasons: [], modules: new Set() }));
    entry.reasons.push(reason);
    if (module) entry.modules.add(module);
  }

  /** A problem of a whole package: skips it when discovery found it; anything else stops the start with `message`. */
  add(owner: Owner | undefined, message: string, reason: string, module?: string): void {
    if (owner?.discovered) this.skip(owner, reason, module);
    else this.stop(message);
  }

  /** Skips one node type of `owner`, whose other node types are served; without an owner (a definition in memory) it stops the start. */
  skipNodeType(owner: Owner | undefined, source: HandlerSource, nodeTypeId: string, version: string, message: string, reason: string): void {
    if (!owner) {
      this.stop(message);
      return;
    }
    this.nodeTypes.push({ order: owner.order, failure: nodeTypeFailure(owner, source, nodeTypeId, version, reason) });
  }

  /** True for a package that is skipped. */
  isSkipped(owner: Owner | undefined): boolean {
    return owner !== undefined && this.skipped.has(owner.key);
  }

  /** The skipped packages and node types, in load order (a skipped package's node types are not listed on their own). */
  failedLoads(): FailedHandlerLoad[] {
    const packages = [...this.skipped.values()].map(({ owner, reasons, modules }) => ({
      order: owner.order,
      failure: {
        package: owner.name,
        ...(owner.version ? { version: owner.version } : {}),
        dir: owner.dir,
        ...(modules.size === 1 ? { module: [...modules][0] } : {}),
        reason: reasons.join("; "),
      } as FailedHandlerLoad,
    }));
    const skippedOrders = new Set([...this.skipped.values()].map((s) => s.owner.order));
    const nodeTypes = this.nodeTypes.filter((n) => !skippedOrders.has(n.order));
    return [...packages, ...nodeTypes].sort((a, b) => a.order - b.order).map((e) => e.failure);
  }
}

/** Why `nt` cannot be served (not a valid NodeType, a schema that would not compile), or undefined: the SDK runtime's check, with the registry's rule for versions. */
function nodeTypeProblem(nt: unknown): string | undefined {
  return sdkNodeTypeProblem(nt, versionProblem);
}

/** A set's problem-free node types, as the loader keeps them: where to read each, and whom to blame. */
interface LoadedSet {
  directory: string;
  sdkVersion: string;
  handler: HandlerFn<unknown, unknown>;
  source: HandlerSource;
  owner?: Owner;
}

interface Member {
  set: LoadedSet;
  entry: AtomicSetEntry;
}

/**
 * A LoadedDefinition whose schemas compile on first use: `onProblem` is told, once, when one does not. Compiled without
 * the meta-schema check, which the definition passed at load.
 */
function lazyDefinition(definition: FabricDefinition, source: HandlerSource, onProblem: (reason: string) => void): LoadedDefinition {
  const nt = definition.nodeType;
  const name = `${nt.node_type_id}@${nt.version}`;
  let state: { inputs: ValidateFunction; outputs: ValidateFunction } | { problem: string } | undefined;
  const compile = () => {
    if (state) return state;
    state = compileNodeTypeSchemas(nt);
    if ("problem" in state) onProblem(state.problem);
    return state;
  };
  const validator = (which: "inputs" | "outputs"): ValidateFunction => {
    const wrapper = ((data: unknown) => {
      const s = compile();
      if ("problem" in s) {
        // Never a throw: whoever validates gets a failure that names the real problem.
        wrapper.errors = [{ instancePath: "", schemaPath: "#", keyword: "compile", params: {}, message: `cannot be checked: node type ${name}: ${s.problem}` }];
        return false;
      }
      const fn = s[which];
      const ok = fn(data);
      wrapper.errors = fn.errors;
      return ok;
    }) as unknown as ValidateFunction;
    return wrapper;
  };
  return {
    definition,
    source,
    validateInputs: validator("inputs"),
    validateOutputs: validator("outputs"),
    schemaProblem: () => {
      const s = compile();
      return "problem" in s ? s.problem : undefined;
    },
  };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** A checked definition with whom to blame for it. */
interface CheckedDefinition {
  loaded: LoadedDefinition;
  owner?: Owner;
}

/** What the Handlers are made of: checked definitions, the members of sets, and the failures so far. */
interface HandlersParts {
  definitions: CheckedDefinition[];
  members: Member[];
  warnings: string[];
  failures: FailureList;
  logger: LoaderLogger;
  setCacheSize: number;
}

/** The LoadedHandlers an executor serves from. */
class Handlers implements LoadedHandlers {
  readonly definitions: LoadedDefinition[];
  readonly byId: ReadonlyMap<string, LoadedDefinition[]>;
  readonly warnings: string[];
  readonly parts: HandlersParts;
  private readonly members = new Map<string, Member>();
  /** Loaded members, least recently used first. */
  private readonly cache = new Map<string, LoadedDefinition>();
  private readonly broken = new Map<string, string>();

  constructor(parts: HandlersParts) {
    this.parts = parts;
    this.definitions = parts.definitions.map((c) => c.loaded);
    this.warnings = parts.warnings;
    const byId = new Map<string, LoadedDefinition[]>();
    for (const d of this.definitions) {
      const list = byId.get(d.definition.nodeType.node_type_id);
      if (list) list.push(d);
      else byId.set(d.definition.nodeType.node_type_id, [d]);
    }
    this.byId = byId;
    for (const m of parts.members) this.members.set(keyOf(m.entry.node_type_id, m.entry.version), m);
  }

  get failed(): FailedHandlerLoad[] {
    return this.parts.failures.entries;
  }

  find(nodeTypeId: string, version: string): LoadedDefinition | undefined {
    const plain = this.byId.get(nodeTypeId)?.find((d) => d.definition.nodeType.version === version);
    if (plain) return plain;
    const key = keyOf(nodeTypeId, version);
    const hit = this.cache.get(key);
    if (hit) {
      this.cache.delete(key);
      this.cache.set(key, hit);
      return hit;
    }
    const member = this.members.get(key);
    if (!member || this.broken.has(key)) return undefined;
    const nodeType = this.readMember(member);
    if (!nodeType) return undefined;
    const definition = { kind: "atomic", sdkVersion: member.set.sdkVersion, nodeType, handler: member.set.handler };
    Object.defineProperty(definition, DEFINITION_BRAND, { value: true });
    const loaded = lazyDefinition(Object.freeze(definition) as unknown as FabricDefinition, member.set.source, (problem) =>
      this.fail(member.set.owner, member.set.source, nodeTypeId, version, problem),
    );
    this.cache.set(key, loaded);
    while (this.cache.size > this.parts.setCacheSize) this.cache.delete(this.cache.keys().next().value as string);
    return loaded;
  }

  get served(): ServedNodeType[] {
    const out: ServedNodeType[] = this.definitions.map((d) => ({
      node_type_id: d.definition.nodeType.node_type_id,
      version: d.definition.nodeType.version,
      kind: d.definition.kind,
      source: d.source,
    }));
    for (const [key, m] of this.members) {
      if (!this.broken.has(key)) out.push({ node_type_id: m.entry.node_type_id, version: m.entry.version, kind: "atomic", source: m.set.source });
    }
    return out;
  }

  versionsOf(nodeTypeId: string, kind?: DefinitionKind): string[] {
    const versions = (this.byId.get(nodeTypeId) ?? []).filter((d) => kind === undefined || d.definition.kind === kind).map((d) => d.definition.nodeType.version);
    if (kind === undefined || kind === "atomic") {
      for (const [key, m] of this.members) if (m.entry.node_type_id === nodeTypeId && !this.broken.has(key)) versions.push(m.entry.version);
    }
    return versions;
  }

  notServed(nodeTypeId: string, version: string): string | undefined {
    const broken = this.broken.get(keyOf(nodeTypeId, version));
    if (broken) return broken;
    // Skipped at load (a bad NodeType or schema of a package that serves the rest).
    return this.parts.failures.entries.find((f) => f.node_type_id === nodeTypeId && f.node_type_version === version)?.reason;
  }

  nodeTypes(kind: DefinitionKind): NodeTypeStream {
    const plain = this.definitions.filter((d) => d.definition.kind === kind);
    const members = kind === "atomic" ? [...this.members].filter(([key]) => !this.broken.has(key)).map(([, m]) => m) : [];
    const self = this;
    return {
      count: plain.length + members.length,
      *[Symbol.iterator]() {
        for (const d of plain) yield d.definition.nodeType;
        for (const m of members) {
          const cached = self.cache.get(keyOf(m.entry.node_type_id, m.entry.version));
          // Read without caching: publishing passes over every member once and must not push out the ones in use.
          const nt = cached ? cached.definition.nodeType : self.readMember(m);
          if (nt) yield nt;
        }
      },
    };
  }

  /** Reads and checks a member's NodeType file; a broken one is recorded (not served from then on) and gives undefined. */
  private readMember(member: Member): (NodeType & { kind: "atomic" }) | undefined {
    let nt: NodeType & { kind: "atomic" };
    try {
      nt = readSetMember(member.set.directory, member.entry);
    } catch (err) {
      const problem = (err as { problem?: unknown }).problem;
      this.markBroken(member, typeof problem === "string" ? `its NodeType file ${member.entry.file} ${problem}` : messageOf(err));
      return undefined;
    }
    const problem = nodeTypeProblem(nt);
    if (problem) {
      const file = member.entry.file;
      this.markBroken(member, problem.startsWith("is ") ? `its NodeType file ${file} ${problem}` : `${problem} (in ${file})`);
      return undefined;
    }
    // Handlers see it as ctx.nodeType, and every execution shares this one object.
    return deepFreeze(nt);
  }

  private markBroken(member: Member, problem: string): void {
    const { node_type_id, version } = member.entry;
    this.broken.set(keyOf(node_type_id, version), nodeTypeReason(`${node_type_id}@${version}`, problem));
    this.fail(member.set.owner, member.set.source, node_type_id, version, problem);
  }

  private fail(owner: Owner | undefined, source: HandlerSource, nodeTypeId: string, version: string, problem: string): void {
    const reason = nodeTypeReason(`${nodeTypeId}@${version}`, problem);
    if (this.parts.failures.add(nodeTypeFailure(owner, source, nodeTypeId, version, reason))) {
      this.parts.logger.warn({ node_type_id: nodeTypeId, version, package: owner?.name ?? source.package }, `${reason}; it is not served`);
    }
  }
}

/** Imports handler modules once each and checks what they define, noting problems instead of stopping at the first. */
class Collector {
  readonly definitions: CheckedDefinition[] = [];
  readonly sets: Array<{ set: LoadedSet; entries: AtomicSetEntry[] }> = [];
  readonly problems = new LoadProblems();
  readonly warnings: string[] = [];
  private readonly seenModules = new Set<string>();
  private readonly seenPackages = new Set<string>();
  private readonly seenDefinitions = new Set<object>();
  private readonly refValidator = validatorFor("node_type_ref");
  private loadOrder = 0;

  /** `failures`: where node types whose schema turns out not to compile at first use are listed. */
  constructor(
    readonly logger: LoaderLogger,
    readonly failures: FailureList = new FailureList(),
  ) {}

  warn(message: string): void {
    this.warnings.push(message);
    this.logger.warn({ warning: message }, message);
  }

  /** The next place in load order. */
  nextOrder(): number {
    return this.loadOrder++;
  }

  /** Loads one package directory named by the operator, or found by discovery (skipped when broken). */
  async loadPackage(dir: string, label: string, origin: "named" | "discovered"): Promise<number> {
    const order = this.nextOrder();
    const discovered = origin === "discovered";
    let real: string;
    try {
      real = realpathSync(dir);
    } catch {
      const where: Owner = { key: path.resolve(dir), order, name: nameFromDir(dir), dir, discovered };
      this.problems.add(where, `handler package ${label}: directory ${dir} does not exist`, `directory ${dir} does not exist`);
      return 0;
    }
    if (this.seenPackages.has(real)) return 0;
    this.seenPackages.add(real);
    let pkg: PackageJson;
    try {
      pkg = readPackageJson(dir);
    } catch (err) {
      const where: Owner = { key: real, order, name: nameFromDir(dir), dir, discovered };
      const problem = `cannot read ${path.join(dir, "package.json")}: ${messageOf(err)}`;
      this.problems.add(where, `handler package ${label}: ${problem}`, problem);
      return 0;
    }
    const name = pkg.name ?? label;
    const owner: Owner = {
      key: real,
      order,
      name: discovered ? (pkg.name ?? nameFromDir(dir)) : name,
      ...(typeof pkg.version === "string" ? { version: pkg.version } : {}),
      dir,
      discovered,
    };
    let modules: string[];
    if (hasNodefabricField(pkg, "handlers")) {
      const list = pkg.nodefabric!.handlers;
      if (!Array.isArray(list) || list.length === 0 || !list.every((m) => typeof m === "string" && m.length > 0)) {
        const problem = `"nodefabric.handlers" in package.json must be a non-empty array of module paths, such as ["./dist/index.js"]`;
        this.problems.add(owner, `handler package ${name} (${dir}): ${problem}`, `${problem} (it is ${JSON.stringify(list)})`);
        return 0;
      }
      modules = list as string[];
    } else if (!discovered && Array.isArray(pkg.keywords) && pkg.keywords.includes("nodefabric-handler")) {
      modules = [mainEntry(pkg)];
    } else {
      // Discovery only imports packages that name their modules; one that only looks like a handler package is reported.
      const has = pkg.nodefabric !== undefined ? `"nodefabric": ${JSON.stringify(pkg.nodefabric)}` : `the keyword "nodefabric-handler"`;
      this.problems.add(
        owner,
        `${name} (${dir}) is not a NodeFabric handler package: its package.json has neither "nodefabric": { "handlers": [...] } nor the keyword "nodefabric-handler"`,
        `its package.json has ${has} but no "nodefabric": { "handlers": [...] } naming its modules; add it, or name the package with --handlers`,
      );
      return 0;
    }
    const started = performance.now();
    const pending: Array<{ size: number; check: () => number }> = [];
    for (const rel of modules) {
      const file = path.resolve(dir, rel);
      if (!existsSync(file)) {
        const hint = /(^|[\\/])(dist|build|lib|out)[\\/]/.test(rel) ? "; build the package first (npm run build)" : "";
        const problem = `its handler module ${rel} does not exist at ${file}${hint}`;
        this.problems.add(owner, `handler package ${name}: ${problem}`, problem, file);
        continue;
      }
      const found = await this.importModule(file, { package: name, version: pkg.version, path: file }, owner);
      if (found) pending.push(found);
    }
    const total = pending.reduce((n, p) => n + p.size, 0);
    const big = total >= PROGRESS_THRESHOLD;
    if (big) this.logger.info({ progress: true, package: name, node_types: total }, `loading ${total.toLocaleString("en-US")} node types from ${name} …`);
    const count = pending.reduce((n, p) => n + p.check(), 0);
    if (big) {
      const ms = Math.round(performance.now() - started);
      this.logger.info({ progress: true, package: name, node_types: count, ms }, `loaded ${count.toLocaleString("en-US")} node types from ${name} in ${ms} ms`);
    }
    return count;
  }

  /** Imports a module named by path (no package) and checks what it defines. */
  async loadModule(file: string, source: HandlerSource): Promise<number> {
    const owner: Owner = { key: path.resolve(file), order: this.nextOrder(), name: file, dir: path.dirname(file), discovered: false };
    const found = await this.importModule(file, source, owner);
    return found ? found.check() : 0;
  }

  /**
   * Imports one module and finds every definition and set it exports (default: one or an array; named exports too).
   * Returns how many node types it found and the check of them, run once the package's count is known.
   */
  private async importModule(file: string, source: HandlerSource, owner: Owner): Promise<{ size: number; check: () => number } | undefined> {
    let real: string;
    try {
      real = realpathSync(file);
    } catch {
      this.problems.add(owner, `handler module ${file} does not exist`, `handler module ${file} does not exist`, file);
      return undefined;
    }
    if (this.seenModules.has(real)) return undefined;
    this.seenModules.add(real);
    let ns: Record<string, unknown>;
    try {
      ns = (await import(/* @vite-ignore */ pathToFileURL(real).href)) as Record<string, unknown>;
    } catch (err) {
      const cause = messageOf(err);
      const where = source.package ? `handler module ${file} of package ${source.package}` : `handler module ${file}`;
      this.problems.add(owner, `cannot import ${where}: ${cause}`, `cannot import ${file}: ${cause}`, file);
      return undefined;
    }
    const found: unknown[] = [];
    const take = (value: unknown) => {
      if (!(isDefinition(value) || isAtomicSet(value)) || this.seenDefinitions.has(value)) return;
      this.seenDefinitions.add(value);
      found.push(value);
    };
    const keys = Object.keys(ns).sort((a, b) => (a === "default" ? -1 : b === "default" ? 1 : 0));
    for (const key of keys) {
      const value = ns[key];
      if (Array.isArray(value)) value.forEach(take);
      else take(value);
    }
    const isExport = (v: unknown) => isDefinition(v) || isAtomicSet(v);
    if (found.length === 0 && !Object.values(ns).some((v) => isExport(v) || (Array.isArray(v) && v.some(isExport)))) {
      this.warn(`${describe(source)} exports no node type definitions (export default defineAtomic({ ... }))`);
    }
    return {
      size: found.reduce<number>((n, v) => n + (isAtomicSet(v) ? v.entries.length : 1), 0),
      check: () =>
        found.reduce<number>((n, v) => n + (isAtomicSet(v) ? this.checkSet(v, source, owner) : this.checkDefinition(v as FabricDefinition, source, owner) ? 1 : 0), 0),
    };
  }

  /** Checks one definition; keeps it when it has no problem and says whether it did. `owner` undefined: a definition given in memory. */
  checkDefinition(definition: FabricDefinition, source: HandlerSource, owner: Owner | undefined): boolean {
    const nt = definition.nodeType;
    const name = `${String(nt.node_type_id)}@${String(nt.version)}`;
    const sdk = sdkProblem(definition.sdkVersion);
    if (sdk) {
      this.problems.add(owner, `node type ${name} from ${describe(source)} ${sdk}`, `node type ${name} ${sdk}`, source.path);
      return false;
    }
    const problem = nodeTypeProblem(nt);
    if (problem) {
      const message = problem.startsWith("is ") ? `node type ${name} from ${describe(source)} ${problem}` : `node type ${name} from ${describe(source)}: ${problem}`;
      this.problems.skipNodeType(owner, source, String(nt.node_type_id), String(nt.version), message, nodeTypeReason(name, problem));
      return false;
    }
    const loaded = lazyDefinition(definition, source, (p) => this.recordCompileFailure(owner, source, nt.node_type_id, nt.version, p));
    this.definitions.push({ loaded, owner });
    return true;
  }

  /** Checks a set without reading its NodeType files: its SDK, and the id and version of each entry; returns how many entries it serves. */
  checkSet(set: AtomicSet, source: HandlerSource, owner: Owner): number {
    const sdk = sdkProblem(set.sdkVersion);
    if (sdk) {
      this.problems.add(owner, `the set of ${set.directory} from ${describe(source)} ${sdk}`, `the set of ${set.directory} ${sdk}`, source.path);
      return 0;
    }
    const loadedSet: LoadedSet = { directory: set.directory, sdkVersion: set.sdkVersion, handler: set.handler as HandlerFn<unknown, unknown>, source, owner };
    const entries: AtomicSetEntry[] = [];
    for (const entry of set.entries) {
      const ref = { node_type_id: entry.node_type_id, version: entry.version };
      const name = `${String(entry.node_type_id)}@${String(entry.version)}`;
      const versionIssue = this.refValidator(ref) ? versionProblem(entry.version) : undefined;
      if (!this.refValidator(ref) || versionIssue) {
        const issues = versionIssue ? [`/version ${versionIssue}`] : dedupeIssues(issuesFromAjv(this.refValidator.errors)).map((i) => `${i.path} ${i.message}`);
        const problem = `is not a valid node type reference in ${path.join(set.directory, "index.json")}: ${issues.join("; ")}`;
        this.problems.skipNodeType(owner, source, String(entry.node_type_id), String(entry.version), `node type ${name} from ${describe(source)} ${problem}`, nodeTypeReason(name, problem));
        continue;
      }
      entries.push(entry);
    }
    this.sets.push({ set: loadedSet, entries });
    return entries.length;
  }

  /** Lists a node type whose schema turned out not to compile at first use. */
  private recordCompileFailure(owner: Owner | undefined, source: HandlerSource, nodeTypeId: string, version: string, problem: string): void {
    const reason = nodeTypeReason(`${nodeTypeId}@${version}`, problem);
    if (this.failures.add(nodeTypeFailure(owner, source, nodeTypeId, version, reason))) {
      this.logger.warn({ node_type_id: nodeTypeId, version, package: owner?.name ?? source.package }, `${reason}; it is not served`);
    }
  }
}

/** Something that claims a (node_type_id, version): a definition or a set entry. */
interface Claim {
  nodeTypeId: string;
  version: string;
  source: HandlerSource;
  owner?: Owner;
}

/**
 * Reports every (node_type_id, version) claimed more than once. Within one discovered package that package is
 * skipped; across packages, or in named ones, the start stops: which one to serve is the operator's call.
 */
function checkDuplicates(claims: Claim[], problems: LoadProblems): void {
  const byKey = new Map<string, Claim[]>();
  for (const c of claims) {
    const key = keyOf(c.nodeTypeId, c.version);
    const list = byKey.get(key);
    if (list) list.push(c);
    else byKey.set(key, [c]);
  }
  for (const list of byKey.values()) {
    if (list.length < 2) continue;
    const name = `${list[0]!.nodeTypeId}@${list[0]!.version}`;
    const times = list.length === 2 ? "twice" : `${list.length} times`;
    const owner = list[0]!.owner;
    if (owner?.discovered && list.every((c) => c.owner?.key === owner.key)) {
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

/** Assembles the LoadedHandlers from what the collector kept; throws a HandlerLoadError listing every problem that stops the start. */
function buildLoadedHandlers(collector: Collector, setCacheSize: number, base?: Handlers): Handlers {
  const { problems } = collector;
  const baseClaims: Claim[] = base
    ? [
        ...base.parts.definitions.map((c) => ({ nodeTypeId: c.loaded.definition.nodeType.node_type_id, version: c.loaded.definition.nodeType.version, source: c.loaded.source, owner: c.owner })),
        ...base.parts.members.map((m) => ({ nodeTypeId: m.entry.node_type_id, version: m.entry.version, source: m.set.source, owner: m.set.owner })),
      ]
    : [];
  const claims: Claim[] = [
    ...baseClaims,
    ...collector.definitions
      .filter((c) => !problems.isSkipped(c.owner))
      .map((c) => ({ nodeTypeId: c.loaded.definition.nodeType.node_type_id, version: c.loaded.definition.nodeType.version, source: c.loaded.source, owner: c.owner })),
    ...collector.sets
      .filter((s) => !problems.isSkipped(s.set.owner))
      .flatMap((s) => s.entries.map((e) => ({ nodeTypeId: e.node_type_id, version: e.version, source: s.set.source, owner: s.set.owner }))),
  ];
  // A skipped package serves none of its node types, so its good ones can clash with nothing.
  checkDuplicates(claims, problems);
  if (problems.fatal.length > 0) throw new HandlerLoadError(problems.fatal);
  const failures = collector.failures;
  for (const f of problems.failedLoads()) failures.add(f);
  return new Handlers({
    definitions: [...(base?.parts.definitions ?? []), ...collector.definitions.filter((c) => !problems.isSkipped(c.owner)).map(({ loaded, owner }) => ({ loaded, owner }))],
    members: [
      ...(base?.parts.members ?? []),
      ...collector.sets.filter((s) => !problems.isSkipped(s.set.owner)).flatMap((s) => s.entries.map((entry) => ({ set: s.set, entry }))),
    ],
    warnings: [...(base?.warnings ?? []), ...collector.warnings],
    failures,
    logger: base?.parts.logger ?? collector.logger,
    setCacheSize,
  });
}

/** An item of `handlersFromDefinitions`: a definition, a set, or a definition with its source. */
export type InMemoryHandler = FabricDefinition | AtomicSet<any, any> | { definition: FabricDefinition; source: HandlerSource };

function collectInMemory(collector: Collector, definitions: readonly InMemoryHandler[]): void {
  const seen = new Set<object>();
  definitions.forEach((d, i) => {
    if (isAtomicSet(d)) {
      if (seen.has(d)) return;
      seen.add(d);
      const owner: Owner = { key: `<in-memory set ${i}>`, order: collector.nextOrder(), name: d.directory, dir: d.directory, discovered: false };
      collector.checkSet(d, { path: `<in-memory set ${i}>` }, owner);
      return;
    }
    const item = isDefinition(d)
      ? { definition: d, source: { path: `<in-memory definition ${i}>` } }
      : typeof d === "object" && d !== null && isDefinition((d as { definition?: unknown }).definition)
        ? { definition: (d as { definition: FabricDefinition }).definition, source: (d as { source: HandlerSource }).source }
        : undefined;
    if (!item) collector.problems.stop(`item ${i} is not a node type definition (make it with defineAtomic or defineAtomicSet)`);
    else if (!seen.has(item.definition)) {
      // The same object twice is one definition, as with a module exporting it twice.
      seen.add(item.definition);
      collector.checkDefinition(item.definition, item.source, undefined);
    }
  });
}

/**
 * LoadedHandlers from definitions (and sets) already in memory (tests, `runHandler`), with the checks of `loadHandlers`;
 * any problem of a definition, one that would only skip it in a package, throws a HandlerLoadError.
 */
export function handlersFromDefinitions(definitions: readonly InMemoryHandler[]): LoadedHandlers {
  const collector = new Collector(silentLogger);
  collectInMemory(collector, definitions);
  return buildLoadedHandlers(collector, DEFAULT_SET_CACHE_SIZE);
}

/**
 * `loaded` plus definitions from memory, checked together: a definition clashing with a node type `loaded` serves
 * stops the start as a duplicate would. What `loaded` skipped stays in `failed`.
 */
export function withDefinitions(loaded: LoadedHandlers, definitions: readonly InMemoryHandler[]): LoadedHandlers {
  if (definitions.length === 0) return loaded;
  if (!(loaded instanceof Handlers)) {
    return handlersFromDefinitions([...loaded.definitions.map((d) => ({ definition: d.definition, source: d.source })), ...definitions]);
  }
  const collector = new Collector(loaded.parts.logger, loaded.parts.failures);
  collectInMemory(collector, definitions);
  return buildLoadedHandlers(collector, loaded.parts.setCacheSize, loaded);
}

/**
 * Loads handler packages and modules and checks every definition. A problem with anything named in `handlers` (or a
 * discover folder that does not exist) stops the start with a HandlerLoadError; a broken package found by discovery
 * is skipped and listed in `failed`, and so is one node type that cannot load, wherever it comes from. A
 * (node_type_id, version) defined by two packages always stops the start.
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
    const dirs = discoverPackageDirs(root, claimsHandlerPackage);
    for (const dir of dirs) await collector.loadPackage(dir, path.relative(cwd, dir) || dir, "discovered");
    if (dirs.length === 0) collector.warn(`discovery in ${root} found no handler packages (packages declare "nodefabric": { "handlers": [...] } in package.json)`);
  }
  const loaded = buildLoadedHandlers(collector, options.setCacheSize ?? DEFAULT_SET_CACHE_SIZE);
  for (const d of loaded.definitions) {
    logger.info(
      { node_type_id: d.definition.nodeType.node_type_id, version: d.definition.nodeType.version, package: d.source.package, path: d.source.path },
      "handler loaded",
    );
  }
  for (const s of collector.sets) {
    if (collector.problems.isSkipped(s.set.owner)) continue;
    logger.info({ package: s.set.source.package, path: s.set.source.path, directory: s.set.directory, node_types: s.entries.length }, "handler set loaded");
  }
  return loaded;
}
