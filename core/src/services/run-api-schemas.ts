/**
 * Path and query schemas of the run API, shared by the coordinator and the gateway so that both refuse the same
 * bad requests (the gateway before it forwards anything).
 */
const ID = { type: "string", minLength: 1, maxLength: 256 } as const;

export const runParams = { type: "object", required: ["run_id"], properties: { run_id: ID } } as const;
export const nodeRunParams = { type: "object", required: ["node_run_id"], properties: { node_run_id: ID } } as const;
export const approvalParams = { type: "object", required: ["approval_id"], properties: { approval_id: ID } } as const;

/**
 * `after_seq` resumes a stream; `follow` (default true) keeps it open until the run's last event; `types` (an
 * extension: comma-separated event types) sends only those, so a follower that needs few kinds is not sent the rest.
 */
export const eventsQuery = {
  type: "object",
  additionalProperties: false,
  properties: {
    after_seq: { type: "integer", minimum: -1 },
    follow: { type: "boolean", default: true },
    types: { type: "string", pattern: "^[a-z_]+(,[a-z_]+)*$", maxLength: 512 },
  },
} as const;

/** The body of `POST /v1/node-runs/{id}:checkpoint` (an extension): what the NodeRun's next execution resumes from. */
export const checkpointBody = {
  type: "object",
  additionalProperties: false,
  required: ["checkpoint"],
  properties: { checkpoint: { type: "object" } },
} as const;

/** The largest checkpoint kept, as JSON. */
export const MAX_CHECKPOINT_BYTES = 16_384;

/**
 * The body of `POST /v1/node-runs/{id}:progress` (an extension): how far an execution is, as MCP progress
 * notifications say it (`progress` grows; `total` when known; a short `message`).
 */
/** `POST /v1/node-runs/{id}:output-delta` (an extension): text an execution wrote, in order (core/engine/output-deltas.ts). */
export const outputDeltaBody = {
  type: "object",
  additionalProperties: false,
  required: ["text", "index", "offset", "attempt"],
  properties: {
    text: { type: "string", maxLength: 65536 },
    index: { type: "integer", minimum: 0 },
    offset: { type: "integer", minimum: 0 },
    attempt: { type: "integer", minimum: 1 },
    truncated: { type: "boolean" },
  },
} as const;

export const progressBody = {
  type: "object",
  additionalProperties: false,
  required: ["progress"],
  properties: {
    progress: { type: "number", minimum: 0 },
    total: { type: "number", minimum: 0 },
    message: { type: "string", maxLength: 1024 },
  },
} as const;
