/**
 * What goes wrong while handler packages load, kept as small as it is: a problem that stops the start, a discovered
 * package skipped, or one node type skipped while its package serves the rest; and how each is reported.
 */
import path from "node:path";
import type { HandlerSource } from "./loaded-definition.js";

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

/** One or more problems that stop the start; `problems` lists each, the message joins them. */
export class HandlerLoadError extends Error {
  readonly problems: string[];

  constructor(problems: string[]) {
    super(problems.length === 1 ? problems[0] : `cannot load handlers:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "HandlerLoadError";
    this.problems = problems;
  }
}

/** A source as problems name it: the package, its version and the file, or the file alone. */
export function describe(source: HandlerSource): string {
  return source.package ? `package ${source.package}${source.version ? `@${source.version}` : ""} (${source.path})` : source.path;
}

/** An error's message, or whatever was thrown as text. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A package (or a module named by path) that definitions came from: what failed loads are reported under. */
export interface Owner {
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
export class FailureList {
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
export function nodeTypeFailure(owner: Owner | undefined, source: HandlerSource, nodeTypeId: string, version: string, reason: string): FailedHandlerLoad {
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
export class LoadProblems {
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
