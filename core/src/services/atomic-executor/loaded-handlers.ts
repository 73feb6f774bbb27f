/**
 * The handlers an executor serves from (LoadedHandlers): the definitions held in memory, and the members of sets,
 * each read, checked and kept (least recently used dropped first) the first time it is asked for.
 */
import type { NodeType } from "@nodefabric/schemas";
import { DEFINITION_BRAND } from "@nodefabric/sdk";
import { nodeTypeReason, readSetMember } from "@nodefabric/sdk/runtime";
import type { AtomicSetEntry, DefinitionKind, FabricDefinition, HandlerFn } from "@nodefabric/sdk";
import { keyOf, lazyDefinition, nodeTypeProblem, type HandlerSource, type LoadedDefinition } from "./loaded-definition.js";
import { messageOf, nodeTypeFailure, type FailedHandlerLoad, type FailureList, type LoaderLogger, type Owner } from "./load-problems.js";

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

/** A set's problem-free node types, as the loader keeps them: where to read each, and whom to blame. */
export interface LoadedSet {
  directory: string;
  sdkVersion: string;
  handler: HandlerFn<unknown, unknown>;
  source: HandlerSource;
  owner?: Owner;
}

export interface Member {
  set: LoadedSet;
  entry: AtomicSetEntry;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** A checked definition with whom to blame for it. */
export interface CheckedDefinition {
  loaded: LoadedDefinition;
  owner?: Owner;
}

/** What the Handlers are made of: checked definitions, the members of sets, and the failures so far. */
export interface HandlersParts {
  definitions: CheckedDefinition[];
  members: Member[];
  warnings: string[];
  failures: FailureList;
  logger: LoaderLogger;
  setCacheSize: number;
}

/** The LoadedHandlers an executor serves from. */
export class Handlers implements LoadedHandlers {
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
