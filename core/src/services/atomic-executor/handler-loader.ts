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
 *
 * This file finds the packages and assembles the result; the parts are files of their own: collecting a package's
 * definitions (handler-collector.ts), the problems met (load-problems.ts), a definition's lazy validators
 * (loaded-definition.ts), and the handlers served, with their cache of set members (loaded-handlers.ts).
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { isAtomicSet, isDefinition } from "@nodefabric/sdk";
import type { AtomicSet, FabricDefinition } from "@nodefabric/sdk";
import { discoverPackageDirs, findPackageDir, hasKeyword, hasNodefabricField, isDirectory, looksLikePath, type PackageJson } from "../../package-discovery.js";
import { Collector } from "./handler-collector.js";
import { keyOf, type HandlerSource } from "./loaded-definition.js";
import { Handlers, type LoadedHandlers } from "./loaded-handlers.js";
import { describe, HandlerLoadError, type LoaderLogger, type LoadProblems, type Owner } from "./load-problems.js";

// What the rest of the fabric imports of the loader, from whichever part holds it.
export { PROGRESS_THRESHOLD } from "./handler-collector.js";
export type { HandlerSource, LoadedDefinition } from "./loaded-definition.js";
export type { LoadedHandlers, NodeTypeStream, ServedNodeType } from "./loaded-handlers.js";
export { HandlerLoadError, type FailedHandlerLoad, type LoaderLogger } from "./load-problems.js";

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

const DEFAULT_SET_CACHE_SIZE = 256;

/** Warnings go to stderr; of the info lines only progress (`{ progress: true }`), so a large package's load is visible. */
const stderrLogger: LoaderLogger = {
  info: (obj, msg) => {
    if ((obj as { progress?: unknown }).progress === true) process.stderr.write(`nodefabric: ${msg ?? JSON.stringify(obj)}\n`);
  },
  warn: (obj, msg) => process.stderr.write(`nodefabric: ${msg ?? JSON.stringify(obj)}\n`),
};

const silentLogger: LoaderLogger = { info: () => undefined, warn: () => undefined };

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
