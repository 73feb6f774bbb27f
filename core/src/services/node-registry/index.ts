/**
 * The Node Registry: the catalogue of immutable NodeType versions (`/v1/node-types`) and the
 * directory of executors and the node types they serve (`/v1/executors`, an extension). An executor stays in the
 * directory while it sends heartbeats (`POST /v1/executors/{id}:heartbeat`); one silent for `executorTtlMs` is no
 * longer listed, so coordinators stop sending it work within seconds, and one silent for long is removed.
 */
import type { FastifyInstance, FastifyReply } from "fastify";
import { schemaId, type NodeType } from "@nodefabric/schemas";
import { FabricError, invalidRequest, type ValidationIssue } from "../../http/errors.js";
import type { ServiceSecurityOptions } from "../../http/auth-plugin.js";
import { IMPLEMENTATION_EXTENSION, implementationOf } from "../../node-type-implementation.js";
import { createService, type HealthCheck } from "../../http/service.js";
import { ref } from "../../http/validation.js";
import { clock } from "../../clock.js";
import type { ExecutorRecord, NodeKind, NodeTypeStore, ServedNodeTypeRef, StoredNodeType } from "../../store/node-type-store.js";
import { SqliteNodeTypeStore } from "../../store/sqlite-node-type-store.js";
import { versionProblem } from "../../store/node-type-version-order.js";
import { canonicalJson } from "../../canonical-json.js";
import { schemaCompileIssues } from "./schema-compile-check.js";
import { decodePageToken, encodePageToken } from "./page-token.js";
import { validateNodeTypePlan } from "../composite-executor/plan/index.js";

export interface NodeRegistryOptions extends ServiceSecurityOptions {
  /** pino options, `false` to silence. */
  logger?: boolean | Record<string, unknown>;
  /** The SQLite file holding node types and executors (created when missing; unused when `store` is given). */
  dbPath: string;
  /** A store to use instead of the SQLite file (a plugin's); its opener closes it. */
  store?: NodeTypeStore;
  /**
   * How long an executor stays listed after it last registered or sent a heartbeat (default 10 s). Answers to
   * registrations and heartbeats carry it (`x-executor-ttl-ms`) so executors beat often enough whatever it is.
   */
  executorTtlMs?: number;
  /** How long an executor may stay silent before it is removed from the store (default 10 × the TTL, at least 1 min). */
  executorPruneAfterMs?: number;
}

export const DEFAULT_EXECUTOR_TTL_MS = 10_000;
/** The header telling an executor how long its registration or heartbeat keeps it listed. */
export const EXECUTOR_TTL_HEADER = "x-executor-ttl-ms";

/** Longest list of unserved node types the health check spells out. */
const UNSERVED_SHOWN = 100;
const DEFAULT_LIMIT = 1000;

const EXECUTOR_ID_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$";

// The executor directory is an extension, so its bodies are described here rather than in the v1 set.
const executorRegistrationSchema = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: {
    endpoint: { type: "string", format: "uri", minLength: 1, maxLength: 2048 },
    kind: { type: "string", enum: ["atomic", "composite"] },
    node_types: { type: "array", items: { $ref: schemaId("node_type_ref") }, maxItems: 10000 },
    extensions: { $ref: schemaId("extensions") },
  },
  required: ["endpoint", "kind", "node_types"],
  additionalProperties: false,
} as const;

const executorParamsSchema = {
  type: "object",
  properties: { executor_instance_id: { type: "string", pattern: EXECUTOR_ID_PATTERN } },
  required: ["executor_instance_id"],
} as const;

const executorQuerySchema = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: {
    node_type_id: { type: "string", minLength: 1, maxLength: 256 },
    version: { type: "string", minLength: 1, maxLength: 64 },
  },
  dependentRequired: { version: ["node_type_id"] },
  additionalProperties: false,
} as const;

const listQuerySchema = {
  type: "object",
  properties: {
    q: { type: "string", maxLength: 256 },
    kind: { type: "string", enum: ["atomic", "composite"] },
    limit: { type: "integer", minimum: 1, maximum: 1000 },
    page_token: { type: "string", minLength: 1, maxLength: 2048 },
  },
  additionalProperties: false,
} as const;

const getQuerySchema = {
  type: "object",
  properties: { version: { type: "string", minLength: 1, maxLength: 64 } },
  additionalProperties: false,
} as const;

type PublishedNodeType = Record<string, unknown> & { node_type_id: string; version: string; kind: NodeKind };

interface PublishBody {
  node_type: PublishedNodeType;
}

interface BatchPublishBody {
  node_types: PublishedNodeType[];
}

/**
 * What the body's schema cannot say about a NodeType: a version safe as an id, schemas that would compile, a valid
 * declarative plan. `at` is the NodeType's JSON Pointer in the body (`/node_type`, `/node_types/3`).
 */
function publishIssues(nodeType: PublishedNodeType, at: string): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  // Any version string safe as an id (semver or not); node-type-version-order.ts says how versions are ordered.
  const versionIssue = versionProblem(nodeType.version);
  if (versionIssue) issues.push({ path: `${at}/version`, message: versionIssue });
  issues.push(
    ...schemaCompileIssues([
      { path: `${at}/input_schema`, schema: nodeType.input_schema },
      { path: `${at}/output_schema`, schema: nodeType.output_schema },
    ]),
  );
  // A node type from the registry can never make an executor start a process: an MCP server it names by a command
  // (rather than by the name of a stdio server an operator configured) is refused here, and again by mcp.call.
  const mcp = (nodeType.extensions as Record<string, unknown> | undefined)?.["nodefabric.mcp"];
  if (typeof mcp === "object" && mcp !== null) {
    for (const key of ["command", "args", "env", "cwd", "stdio"]) {
      if (key in mcp) {
        issues.push({
          path: `${at}/extensions/nodefabric.mcp/${key}`,
          message: 'names a process to start: a published node type cannot; it names a stdio MCP server its operator configured, as "server": "<name>"',
        });
      }
    }
  }
  // Declarative composites (extensions["nodefabric.plan"]) are checked here so a broken plan is never stored; the
  // plan checker writes its paths from /node_type.
  for (const issue of validateNodeTypePlan(nodeType)) {
    issues.push({ ...issue, path: issue.path.startsWith("/node_type") ? `${at}${issue.path.slice("/node_type".length)}` : issue.path });
  }
  return issues;
}

/** Sends JSON text that is already serialized (stored canonical JSON), skipping a parse and re-encode. */
function sendJsonText(reply: FastifyReply, text: string): FastifyReply {
  return reply.type("application/json; charset=utf-8").send(text);
}

function notFound(nodeTypeId: string, version: string | undefined, available: string[]): FabricError {
  if (available.length === 0) {
    return new FabricError("node_type_not_found", `no node type "${nodeTypeId}" is published`, { details: { node_type_id: nodeTypeId } });
  }
  return new FabricError("node_type_not_found", `node type "${nodeTypeId}" has no version "${version}"`, {
    details: { node_type_id: nodeTypeId, version, available_versions: available },
  });
}

/** 409 for versions of a batch already published with other content; `partly`: the ones before were stored (a race). */
function batchConflict(conflicts: Array<{ index: number; node_type_id: string; version: string }>, partly: boolean): FabricError {
  const names = conflicts.slice(0, 5).map((c) => `${c.node_type_id}@${c.version}`);
  const more = conflicts.length > 5 ? ` and ${conflicts.length - 5} more` : "";
  return new FabricError(
    "node_type_version_conflict",
    `${names.join(", ")}${more} ${conflicts.length === 1 ? "is" : "are"} already published with different content; publish new versions ` +
      (partly ? "(a publish of the same version raced this batch; the node types before it were stored)" : "(none of the batch was published)"),
    { details: { conflicts } },
  );
}

async function healthChecks(store: NodeTypeStore, seenSince: () => string): Promise<HealthCheck[]> {
  try {
    await store.ping();
  } catch (err) {
    return [{ name: "store", status: "down", message: `the store cannot be read: ${(err as Error).message}` }];
  }
  const [atomic, executors] = await Promise.all([store.latestNodeTypes("atomic"), store.listExecutors({ seen_since: seenSince() })]);
  const served = new Set<string>();
  for (const e of executors) for (const r of e.node_types) served.add(`${r.node_type_id}\u0000${r.version}`);
  // A node type implemented by another definition (an HTTP-backed one, say) is served wherever that definition is.
  const isServed = (ref: { node_type_id: string; version: string } | undefined) => ref !== undefined && served.has(`${ref.node_type_id}\u0000${ref.version}`);
  const unserved = atomic
    .filter((t) => !isServed(t) && !(t.json.includes(IMPLEMENTATION_EXTENSION) && isServed(implementationOf(JSON.parse(t.json) as NodeType))))
    .map((t) => ({ node_type_id: t.node_type_id, version: t.version }));
  const check: HealthCheck = {
    name: "unserved_node_types",
    status: unserved.length === 0 ? "ok" : "degraded",
    details: { node_types: unserved.slice(0, UNSERVED_SHOWN), count: unserved.length },
  };
  if (unserved.length > 0) check.message = `${unserved.length} published atomic node type(s) have no registered executor`;
  return [{ name: "store", status: "ok" }, check];
}

/** Builds the Node Registry service on a SQLite file; the store is closed with the app. */
export async function buildNodeRegistry(options: NodeRegistryOptions): Promise<FastifyInstance> {
  const store: NodeTypeStore = options.store ?? new SqliteNodeTypeStore(options.dbPath);
  const ttlMs = options.executorTtlMs ?? DEFAULT_EXECUTOR_TTL_MS;
  if (!Number.isInteger(ttlMs) || ttlMs < 1) throw new Error(`node-registry: executorTtlMs must be a positive integer, not ${ttlMs}`);
  const pruneAfterMs = Math.max(options.executorPruneAfterMs ?? Math.max(10 * ttlMs, 60_000), ttlMs);
  // Everything the registry lists or counts as served sees only executors heard from within the TTL.
  const seenSince = () => new Date(clock.now() - ttlMs).toISOString();
  const app = createService({ name: "node-registry", logger: options.logger, health: () => healthChecks(store, seenSince), auth: options.auth, limits: options.limits });

  // Listing already hides silent executors; pruning only keeps the store from growing with long-dead ones.
  const prune = async () => {
    try {
      const removed = await store.pruneExecutors(new Date(clock.now() - pruneAfterMs).toISOString());
      if (removed > 0) app.log.info({ removed, silent_for_ms: pruneAfterMs }, "removed executors not heard from");
    } catch (err) {
      app.log.warn({ err }, "could not remove executors not heard from; will try again");
    }
  };
  const pruneTimer = setInterval(() => void prune(), Math.min(Math.ceil(pruneAfterMs / 2), 60_000));
  pruneTimer.unref();
  app.addHook("onClose", async () => {
    clearInterval(pruneTimer);
    if (!options.store) await store.close();
  });

  app.post<{ Body: PublishBody }>("/v1/node-types", { schema: { body: ref("node_type_publish_request") } }, async (req, reply) => {
    const nodeType = req.body.node_type;
    const issues = publishIssues(nodeType, "/node_type");
    if (issues.length > 0) throw invalidRequest("the node type cannot be published", issues);

    const json = canonicalJson(nodeType);
    const { inserted, stored } = await store.insertNodeType({
      node_type_id: nodeType.node_type_id,
      version: nodeType.version,
      kind: nodeType.kind,
      json,
      published_at: clock.isoNow(),
    });
    if (!inserted && stored.json !== json) {
      throw new FabricError(
        "node_type_version_conflict",
        `${nodeType.node_type_id}@${nodeType.version} is already published with different content; publish a new version`,
        { details: { node_type_id: nodeType.node_type_id, version: nodeType.version } },
      );
    }
    if (inserted) req.log.info({ node_type_id: stored.node_type_id, version: stored.version }, "node type published");
    return sendJsonText(reply, stored.json);
  });

  // An extension: many versions in one request (an executor announcing a package generated from a large API), checked
  // like POST /v1/node-types each, and all or nothing: one refusal and none is stored.
  app.post<{ Body: BatchPublishBody }>("/v1/node-types::batch", { schema: { body: ref("node_type_batch_publish_request") } }, async (req, reply) => {
    const items = req.body.node_types;
    const issues: ValidationIssue[] = [];
    const jsons = items.map((nt) => canonicalJson(nt));
    // The first index of each (id, version); a repeat with the same content is published once.
    const firstAt = new Map<string, number>();
    items.forEach((nt, i) => {
      issues.push(...publishIssues(nt, `/node_types/${i}`));
      const key = `${nt.node_type_id}\u0000${nt.version}`;
      const first = firstAt.get(key);
      if (first === undefined) firstAt.set(key, i);
      else if (jsons[first] !== jsons[i]) {
        issues.push({ path: `/node_types/${i}`, message: `is ${nt.node_type_id}@${nt.version} again, with content different from /node_types/${first}` });
      }
    });
    if (issues.length > 0) throw invalidRequest(`the node types cannot be published (none was)`, issues);

    const unique = [...firstAt.values()];
    const conflicts: Array<{ index: number; node_type_id: string; version: string }> = [];
    for (const i of unique) {
      const nt = items[i]!;
      const stored = await store.getNodeType(nt.node_type_id, nt.version);
      if (stored && stored.json !== jsons[i]) conflicts.push({ index: i, node_type_id: nt.node_type_id, version: nt.version });
    }
    if (conflicts.length > 0) throw batchConflict(conflicts, false);

    const published_at = clock.isoNow();
    const storedJson = new Map<number, string>();
    let inserted = 0;
    for (const i of unique) {
      const nt = items[i]!;
      const result = await store.insertNodeType({ node_type_id: nt.node_type_id, version: nt.version, kind: nt.kind, json: jsons[i]!, published_at });
      // Only a publish of the same version racing this one, with other content, gets here.
      if (!result.inserted && result.stored.json !== jsons[i]) throw batchConflict([{ index: i, node_type_id: nt.node_type_id, version: nt.version }], storedJson.size > 0);
      if (result.inserted) inserted++;
      storedJson.set(i, result.stored.json);
    }
    if (inserted > 0) req.log.info({ node_types: items.length, inserted }, "node types published");
    const answer = items.map((nt, i) => storedJson.get(firstAt.get(`${nt.node_type_id}\u0000${nt.version}`)!) ?? jsons[i]);
    return sendJsonText(reply, `{"node_types":[${answer.join(",")}]}`);
  });

  app.get<{ Querystring: { q?: string; kind?: NodeKind; limit?: number; page_token?: string } }>(
    "/v1/node-types",
    { schema: { querystring: listQuerySchema } },
    async (req, reply) => {
      const { q, kind, page_token } = req.query;
      const limit = req.query.limit ?? DEFAULT_LIMIT;
      const after = page_token === undefined ? undefined : decodePageToken(page_token);
      const page = await store.listNodeTypes({ q, kind, limit, after });
      if (page.more && page.items.length > 0) {
        const last = page.items[page.items.length - 1] as StoredNodeType;
        reply.header("x-next-page-token", encodePageToken(last));
      }
      return sendJsonText(reply, `[${page.items.map((t) => t.json).join(",")}]`);
    },
  );

  app.get<{ Params: { node_type_id: string }; Querystring: { version?: string } }>(
    "/v1/node-types/:node_type_id",
    { schema: { querystring: getQuerySchema } },
    async (req, reply) => {
      const { node_type_id } = req.params;
      const { version } = req.query;
      // Without `version`, the latest: the highest semver, unless versions that are not semver were published after it
      // (then the last of those); node-type-version-order.ts has the rule and why.
      const found = version === undefined ? await store.latestNodeType(node_type_id) : await store.getNodeType(node_type_id, version);
      if (!found) throw notFound(node_type_id, version, version === undefined ? [] : await store.listVersions(node_type_id));
      return sendJsonText(reply, found.json);
    },
  );

  app.get<{ Params: { node_type_id: string } }>("/v1/node-types/:node_type_id/versions", async (req) => {
    const versions = await store.listVersions(req.params.node_type_id);
    if (versions.length === 0) throw notFound(req.params.node_type_id, undefined, []);
    return versions;
  });

  app.put<{ Params: { executor_instance_id: string }; Body: Omit<ExecutorRecord, "executor_instance_id" | "registered_at"> }>(
    "/v1/executors/:executor_instance_id",
    { schema: { params: executorParamsSchema, body: executorRegistrationSchema } },
    async (req, reply) => {
      const body = req.body;
      const record: ExecutorRecord = {
        executor_instance_id: req.params.executor_instance_id,
        endpoint: body.endpoint,
        kind: body.kind,
        node_types: body.node_types.map((r: ServedNodeTypeRef) => ({ ...r })),
        registered_at: clock.isoNow(),
      };
      if (body.extensions !== undefined) record.extensions = body.extensions;
      const stored = await store.putExecutor(record);
      req.log.info({ executor_instance_id: stored.executor_instance_id, node_types: stored.node_types.length }, "executor registered");
      reply.header(EXECUTOR_TTL_HEADER, String(ttlMs));
      return stored;
    },
  );

  // An extension: an executor's sign of life. 404 when the directory does not hold it (never registered, pruned, or a
  // registry whose store was replaced): the executor must register again, since only it knows what it serves.
  app.post<{ Params: { executor_instance_id: string } }>(
    "/v1/executors/:executor_instance_id(.+)::heartbeat",
    { schema: { params: executorParamsSchema } },
    async (req, reply) => {
      const id = req.params.executor_instance_id;
      if (!(await store.touchExecutor(id, clock.isoNow()))) {
        throw new FabricError("route_not_found", `executor "${id}" is not registered; register it again (PUT /v1/executors/${id})`, {
          details: { executor_instance_id: id },
        });
      }
      return reply.header(EXECUTOR_TTL_HEADER, String(ttlMs)).code(204).send();
    },
  );

  app.get<{ Querystring: { node_type_id?: string; version?: string } }>(
    "/v1/executors",
    { schema: { querystring: executorQuerySchema } },
    async (req) => store.listExecutors({ node_type_id: req.query.node_type_id, version: req.query.version, seen_since: seenSince() }),
  );

  return app;
}
