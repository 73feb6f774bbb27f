/**
 * What the Node Registry needs from storage: immutable NodeType versions and the executor directory.
 * Implementations (SQLite now, PostgreSQL later) own ordering and pagination; nothing above this
 * interface knows which database it talks to.
 *
 * "Version order" is the one node-type-version-order.ts defines: semver versions by semver precedence, any other
 * version just above the highest semver version published before it, and those sharing that place by publication.
 * Publication order is the order the store accepted the versions of a node type; inserting identical content again
 * changes nothing. core/test/store/node-type-store-contract.ts is the suite every implementation passes.
 */

export type NodeKind = "atomic" | "composite";

/** The key of one published version. */
export interface NodeTypeKey {
  node_type_id: string;
  version: string;
}

/** One published NodeType version as stored: its canonical JSON (keys sorted) is the source of truth. */
export interface StoredNodeType extends NodeTypeKey {
  kind: NodeKind;
  /** Canonical JSON of the NodeType; byte-identical for identical content. */
  json: string;
  published_at: string;
}

export interface NodeTypeListQuery {
  /** Case-insensitive substring of node_type_id. */
  q?: string;
  kind?: NodeKind;
  /**
   * Keyset cursor: list only versions ordered after this key. A version the store does not hold stands where it would
   * be when it is semver, and after every version of its node type otherwise.
   */
  after?: NodeTypeKey;
  limit: number;
}

export interface NodeTypeListPage {
  /** Ordered by node_type_id, then by version order. */
  items: StoredNodeType[];
  /** True when more items follow the last one. */
  more: boolean;
}

/** A NodeTypeRef as an executor lists it. */
export interface ServedNodeTypeRef {
  node_type_id: string;
  version: string;
  extensions?: Record<string, unknown>;
}

/** An executor's entry in the directory; re-registering replaces it. */
export interface ExecutorRecord {
  executor_instance_id: string;
  endpoint: string;
  kind: NodeKind;
  node_types: ServedNodeTypeRef[];
  extensions?: Record<string, unknown>;
  registered_at: string;
}

export interface ExecutorFilter {
  node_type_id?: string;
  /** Only with node_type_id. */
  version?: string;
  /**
   * Only executors heard from (registered or heartbeat) at or after this instant (RFC 3339). The registry passes
   * now minus its heartbeat TTL, so a dead executor leaves the directory within seconds.
   */
  seen_since?: string;
}

export interface NodeTypeStore {
  /** Inserts a version unless (id, version) exists; either way returns what is stored now. */
  insertNodeType(record: StoredNodeType): Promise<{ inserted: boolean; stored: StoredNodeType }>;
  /** One exact version. */
  getNodeType(nodeTypeId: string, version: string): Promise<StoredNodeType | undefined>;
  /** The latest version: the last in version order. */
  latestNodeType(nodeTypeId: string): Promise<StoredNodeType | undefined>;
  /** Every version of an id in version order, lowest first (empty when the id is unknown). */
  listVersions(nodeTypeId: string): Promise<string[]>;
  /** One page of versions in (node_type_id, version order) order. */
  listNodeTypes(query: NodeTypeListQuery): Promise<NodeTypeListPage>;
  /** The latest version of every id, ordered by node_type_id; with `kind`, only ids whose latest version is of that kind. */
  latestNodeTypes(kind?: NodeKind): Promise<StoredNodeType[]>;
  /** Stores or replaces an executor's entry. */
  putExecutor(record: ExecutorRecord): Promise<ExecutorRecord>;
  /** Executors ordered by executor_instance_id, optionally only those serving a node type (version). */
  listExecutors(filter?: ExecutorFilter): Promise<ExecutorRecord[]>;
  /**
   * Records a heartbeat: the executor was alive at `at` (RFC 3339). False when the store holds no such executor
   * (it must register again). `putExecutor` counts as a heartbeat at `registered_at`.
   */
  touchExecutor(executorInstanceId: string, at: string): Promise<boolean>;
  /** Removes executors not heard from since `before` (RFC 3339); returns how many. */
  pruneExecutors(before: string): Promise<number>;
  /** A trivial round trip, for health checks. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
