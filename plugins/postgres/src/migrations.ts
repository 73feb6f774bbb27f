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
  /**
   * Set on a migration that releases before it must not meet: a switch to a new way of writing that older code would
   * misread. Such a migration is applied at start only to a database with no migration yet (no older process can be
   * using it); on a database in use, only when an operator asks for it by this name (`fabric postgres migrate
   * --enable <name>`), once every process of an earlier release is gone. The migrations after it wait for it.
   */
  optIn?: string;
}

// The non-terminal states, spelled as in the partial indexes: PostgreSQL uses a partial index only when the query's
// WHERE implies the index's, so the store's queries repeat these terms exactly.
const OPEN_RUN = `state IN ('queued', 'running')`;
const OPEN_NODE_RUN = `state IN ('queued', 'assigned', 'running')`;

/**
 * The name of the settings row by which a coordinator says it reads grouped event rows (written at every announce;
 * the coordinator's instance id follows): migration 4 is refused while a live coordinator has none.
 */
export const GROUPED_EVENTS_READER = "reads grouped events: ";

/** The migration that turns grouped event rows on: the store writes them once the database has it. */
export const GROUPED_EVENTS_VERSION = 4;

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
  {
    version: GROUPED_EVENTS_VERSION,
    name: "the events of a transaction in one row",
    optIn: "grouped-events",
    sql: `
-- From this migration on, a row of events holds every event one transaction wrote for one run: seq to last_seq, its
-- payload a JSON array of them, node_run_id, type and at its first event's. Rows with last_seq NULL hold one event
-- each, their payload the event, as every release before this one wrote them; they are read as they are. A release
-- before the one that brought this migration would hand out a whole array as one event, so it is applied only once
-- none of them runs: refused while the coordinator directory lists a live coordinator that has not said it reads
-- grouped rows (see GROUPED_EVENTS_READER), and no such release starts on the database afterwards (it stops at a
-- migration it does not know).
DO $do$
DECLARE
  older text;
BEGIN
  SELECT string_agg(c.instance_id, ', ' ORDER BY c.instance_id) INTO older FROM coordinators c
  WHERE c.expires_at > now()
    AND NOT EXISTS (SELECT 1 FROM nodefabric_settings s WHERE s.name = '${GROUPED_EVENTS_READER}' || c.instance_id);
  IF older IS NOT NULL THEN
    RAISE EXCEPTION 'grouped events need every coordinator to read them, and these live coordinators run an earlier release: %', older
      USING HINT = 'replace them with this release first (or wait until their entries in the coordinator directory expire)';
  END IF;
END
$do$;
-- Nullable, without a default: PostgreSQL adds it without rewriting the table.
ALTER TABLE events ADD COLUMN last_seq bigint;
COMMENT ON COLUMN events.last_seq IS 'the last seq of the events this row holds (payload a JSON array from seq); NULL: one event, payload the event';
`,
  },
];
