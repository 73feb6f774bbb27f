/**
 * The PostgreSQL schema of the fabric's stores, as numbered migrations. An applied migration is never edited (its
 * checksum is recorded and checked at every start); a change is a new migration at the end of the list.
 */

/** One step of the schema: applied once, in order, inside the migration transaction. */
export interface Migration {
  /** 1, 2, 3…: the order of application; never reused. */
  version: number;
  /** A short name, shown in errors and kept in `nodefabric_migrations`. */
  name: string;
  /** The statements; several, separated by semicolons, without parameters. */
  sql: string;
}

// The non-terminal states, spelled as in the partial indexes: PostgreSQL uses a partial index only when the query's
// WHERE implies the index's, so the store's queries repeat these terms exactly.
const OPEN_RUN = `state IN ('queued', 'running')`;
const OPEN_NODE_RUN = `state IN ('queued', 'assigned', 'running')`;

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "run, node type and candidate set stores",
    sql: `
-- RunStore. Documents are jsonb (the store reads fields of them and never serves their text verbatim); times are
-- timestamptz where SQLite keeps epoch ms.
CREATE TABLE runs (
  run_id text PRIMARY KEY,
  tenant_id text,
  state text NOT NULL,
  doc jsonb NOT NULL,
  request_hash text NOT NULL,
  deadline_at timestamptz,
  created_at timestamptz NOT NULL,
  -- The last seq given to an event of this run. A batch takes its seqs with UPDATE … SET last_seq = last_seq + n
  -- RETURNING last_seq: the row lock orders writers of one run across processes, and a rolled-back batch rolls its
  -- seqs back with it, so seqs stay gapless.
  last_seq bigint NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
  -- Which coordinator drives the run, until when, and the fencing token: every claim bumps lease_epoch, and every
  -- write of a holder carries the epoch it claimed with (WHERE lease_epoch = $epoch), so a holder whose lease expired
  -- and was taken over writes nothing.
  lease_owner text,
  lease_expires_at timestamptz,
  lease_epoch bigint NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_tenant ON runs (tenant_id, run_id);
CREATE INDEX runs_by_state ON runs (state, run_id);
CREATE INDEX runs_overdue ON runs (deadline_at) WHERE ${OPEN_RUN} AND deadline_at IS NOT NULL;
CREATE INDEX runs_lease_expired ON runs (lease_expires_at) WHERE ${OPEN_RUN} AND lease_owner IS NOT NULL;

CREATE TABLE node_runs (
  node_run_id text PRIMARY KEY,
  run_id text NOT NULL REFERENCES runs (run_id),
  parent_node_run_id text,
  state text NOT NULL,
  doc jsonb NOT NULL,
  attempt integer NOT NULL CHECK (attempt >= 0),
  available_at timestamptz NOT NULL,
  lease_owner text,
  lease_expires_at timestamptz,
  -- The fencing token of the node run's claim (see runs.lease_epoch).
  lease_epoch bigint NOT NULL DEFAULT 0,
  approval_id text,
  idempotency_key text,
  spec_hash text,
  depth integer NOT NULL CHECK (depth >= 0),
  created_at timestamptz NOT NULL
);
CREATE INDEX node_runs_by_run ON node_runs (run_id, created_at, node_run_id);
-- A child's key is unique within (run, parent); NULLs are distinct here as in SQLite's index.
CREATE UNIQUE INDEX node_runs_idempotency ON node_runs (run_id, parent_node_run_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
-- The claim: SELECT … WHERE <these terms> AND available_at <= now() ORDER BY created_at, node_run_id
-- LIMIT k FOR UPDATE SKIP LOCKED, then the UPDATE that leases what it got.
CREATE INDEX node_runs_unleased ON node_runs (created_at, node_run_id)
  WHERE lease_owner IS NULL AND approval_id IS NULL AND ${OPEN_NODE_RUN};
CREATE INDEX node_runs_leased ON node_runs (lease_expires_at)
  WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN};

-- Keyed by (run_id, seq): reading a run's events in order is one index range. No foreign key: a batch proves its
-- run exists once, by the UPDATE of runs.last_seq that gives it its seqs, not once per event.
CREATE TABLE events (
  run_id text NOT NULL,
  seq bigint NOT NULL CHECK (seq >= 1),
  node_run_id text,
  type text NOT NULL,
  at timestamptz NOT NULL,
  payload jsonb NOT NULL,
  PRIMARY KEY (run_id, seq)
);

CREATE TABLE approvals (
  approval_id text PRIMARY KEY,
  run_id text NOT NULL REFERENCES runs (run_id),
  node_run_id text NOT NULL REFERENCES node_runs (node_run_id),
  state text NOT NULL,
  doc jsonb NOT NULL,
  created_at timestamptz NOT NULL,
  resolved_at timestamptz
);
CREATE INDEX approvals_by_run ON approvals (run_id);

-- NodeTypeStore. A node type's JSON is served byte for byte as it was published, so it is json (checked, kept
-- verbatim), not jsonb (which reorders keys). version_key sorts versions by plain byte order, as SQLite compares
-- text, hence COLLATE "C" whatever the database's collation.
CREATE TABLE node_types (
  node_type_id text NOT NULL,
  version text NOT NULL,
  version_key text COLLATE "C" NOT NULL,
  kind text NOT NULL CHECK (kind IN ('atomic', 'composite')),
  doc json NOT NULL,
  published_at timestamptz NOT NULL,
  published_seq integer NOT NULL DEFAULT 0,
  PRIMARY KEY (node_type_id, version)
);
CREATE UNIQUE INDEX node_types_by_order ON node_types (node_type_id, version_key);
CREATE INDEX node_types_by_kind ON node_types (kind, node_type_id);

CREATE TABLE executors (
  executor_instance_id text PRIMARY KEY,
  doc jsonb NOT NULL,
  registered_at timestamptz NOT NULL,
  -- Refreshed by heartbeats; an executor not seen for a while is dropped from the directory.
  last_seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX executors_by_last_seen ON executors (last_seen_at);

CREATE TABLE executor_node_types (
  node_type_id text NOT NULL,
  version text NOT NULL,
  executor_instance_id text NOT NULL REFERENCES executors (executor_instance_id) ON DELETE CASCADE,
  PRIMARY KEY (node_type_id, version, executor_instance_id)
);
CREATE INDEX executor_node_types_by_executor ON executor_node_types (executor_instance_id);

-- CandidateSetStore: the set's JSON is served verbatim (json, as node types).
CREATE TABLE candidate_sets (
  candidate_set_id text PRIMARY KEY,
  subtask_id text NOT NULL,
  doc json NOT NULL,
  created_at timestamptz NOT NULL
);
`,
  },
  {
    version: 2,
    name: "coordinator directory, shared settings, byte-ordered ids",
    sql: `
-- Event seqs start at 0 per run (the RunStore contract), so runs.last_seq counts the seqs given: a batch of n events
-- takes last_seq + n and its seqs are (new last_seq - n) .. (new last_seq - 1).
ALTER TABLE events DROP CONSTRAINT events_seq_check;
ALTER TABLE events ADD CONSTRAINT events_seq_check CHECK (seq >= 0);
COMMENT ON COLUMN runs.last_seq IS 'how many event seqs the run has given; the next event gets this seq';

-- Ids are ordered and paged by byte order, as SQLite compares text, whatever the database's collation.
ALTER TABLE runs ALTER COLUMN run_id TYPE text COLLATE "C";
ALTER TABLE node_runs ALTER COLUMN node_run_id TYPE text COLLATE "C";
ALTER TABLE node_runs ALTER COLUMN run_id TYPE text COLLATE "C";
ALTER TABLE events ALTER COLUMN run_id TYPE text COLLATE "C";
ALTER TABLE approvals ALTER COLUMN run_id TYPE text COLLATE "C";
ALTER TABLE approvals ALTER COLUMN node_run_id TYPE text COLLATE "C";
ALTER TABLE node_types ALTER COLUMN node_type_id TYPE text COLLATE "C";
ALTER TABLE executors ALTER COLUMN executor_instance_id TYPE text COLLATE "C";

-- The open runs each coordinator holds: renew, and the attached claim and listings, read this range.
CREATE INDEX runs_by_owner ON runs (lease_owner, run_id) WHERE ${OPEN_RUN};
-- Open runs nobody holds (created before any coordinator attached): takeovers read this range.
CREATE INDEX runs_unowned ON runs (run_id) WHERE lease_owner IS NULL AND ${OPEN_RUN};

-- The coordinator directory: who is alive, and where to forward requests for its runs.
CREATE TABLE coordinators (
  instance_id text COLLATE "C" PRIMARY KEY,
  endpoint text,
  expires_at timestamptz NOT NULL
);

-- Values every process of the database shares, such as secrets made by the first to ask.
CREATE TABLE nodefabric_settings (
  name text PRIMARY KEY,
  value text NOT NULL
);
`,
  },
  {
    version: 3,
    name: "listings: runs by root node type, approvals newest first",
    sql: `
-- GET /v1/runs?node_type_id=: the node type of each run's root NodeRun, written with the run, backfilled here.
ALTER TABLE runs ADD COLUMN root_node_type_id text COLLATE "C";
UPDATE runs SET root_node_type_id = n.doc->'node_type_ref'->>'node_type_id'
  FROM node_runs n WHERE n.node_run_id = runs.doc->>'root_node_run_id';
CREATE INDEX runs_by_root_type ON runs (root_node_type_id, run_id);

-- GET /v1/approvals: newest first by (created_at, approval_id), the ids in byte order as SQLite compares them.
ALTER TABLE approvals ALTER COLUMN approval_id TYPE text COLLATE "C";
CREATE INDEX approvals_by_created ON approvals (created_at, approval_id);
CREATE INDEX approvals_by_state ON approvals (state, created_at, approval_id);
DROP INDEX approvals_by_run;
CREATE INDEX approvals_by_run ON approvals (run_id, created_at, approval_id);
`,
  },
];
