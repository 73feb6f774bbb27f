/**
 * Collecting handlers: finds the modules of a package, imports each once, and checks every definition and set they
 * export (the SDK that made it, a valid NodeType, a set's index), noting problems instead of stopping at the first.
 */
import { existsSync, realpathSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { validatorFor } from "@nodefabric/schemas";
import { isAtomicSet, isDefinition } from "@nodefabric/sdk";
import { nodeTypeReason, sdkProblem } from "@nodefabric/sdk/runtime";
import type { AtomicSet, AtomicSetEntry, FabricDefinition, HandlerFn } from "@nodefabric/sdk";
import { dedupeIssues, issuesFromAjv } from "../../http/validation.js";
import { versionProblem } from "../../store/node-type-version-order.js";
import { hasNodefabricField, mainEntry, nameFromDir, readPackageJson, type PackageJson } from "../../package-discovery.js";
import { lazyDefinition, nodeTypeProblem, type HandlerSource } from "./loaded-definition.js";
import { describe, FailureList, LoadProblems, messageOf, nodeTypeFailure, type LoaderLogger, type Owner } from "./load-problems.js";
import type { CheckedDefinition, LoadedSet } from "./loaded-handlers.js";

/** A package with at least this many node types gets a progress line when it loads. */
export const PROGRESS_THRESHOLD = 100;

/** Imports handler modules once each and checks what they define, noting problems instead of stopping at the first. */
export class Collector {
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
