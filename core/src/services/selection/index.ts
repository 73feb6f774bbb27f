/**
 * Selection: bounded, ranked CandidateSets for a subtask's goal (`POST /v1/candidate-sets`), stored so
 * bindings can be checked against them later (`GET /v1/candidate-sets/{id}`, an extension).
 */
import type { FastifyInstance } from "fastify";
import { validatorFor, type CandidateSet, type CandidateSetRequest, type ConstraintEnvelope, type NodeType } from "@nodefabric/schemas";
import { FabricError, invalidRequest } from "../../http/errors.js";
import type { ServiceSecurityOptions } from "../../http/auth-plugin.js";
import { bearerHeaders, type ServiceTokens } from "../../clients/service-tokens.js";
import { createService, type HealthCheck } from "../../http/service.js";
import { issuesFromAjv, ref } from "../../http/validation.js";
import { clock } from "../../clock.js";
import { newId } from "../../ids.js";
import { RegistryClient } from "../../clients/registry-client.js";
import { mergeConstraints, type SideEffectClass } from "../../engine/constraints.js";
import type { CandidateSetStore } from "../../store/candidate-set-store.js";
import { SqliteCandidateSetStore } from "../../store/candidate-set-sqlite-store.js";
import { Catalogue, type NodeTypeSource } from "./catalogue.js";
import type { CandidateFilter } from "./ranking.js";

export interface SelectionOptions extends ServiceSecurityOptions {
  /** pino options, `false` to silence. */
  logger?: boolean | Record<string, unknown>;
  /** The SQLite file holding candidate sets (created when missing; unused when `store` is given). */
  dbPath: string;
  /** A store to use instead of the SQLite file (a plugin's); its opener closes it. */
  store?: CandidateSetStore;
  /** The Node Registry's base URL; not needed when `nodeTypes` is given. */
  registryUrl?: string;
  /** Where node types come from instead of the registry over HTTP (e.g. in-process); every version may be returned. */
  nodeTypes?: () => Promise<NodeType[]>;
  /** How long a loaded catalogue is used before it is read again (default 2000 ms). */
  cacheTtlMs?: number;
}

/** Candidates per set when no constraint says otherwise. */
export const DEFAULT_MAX_CANDIDATES = 5;
/** The hard ceiling on candidates per set, whatever the constraints ask. */
export const MAX_CANDIDATES = 50;
const DEFAULT_CACHE_TTL_MS = 2000;
/** A miss refreshes early, but never more often than this. */
const MISS_REFRESH_FLOOR_MS = 250;
const KIND_EXTENSION = "nodefabric.kind";
const RUN_CONSTRAINTS_EXTENSION = "nodefabric.constraints";

const candidateSetParams = {
  type: "object",
  properties: { candidate_set_id: { type: "string", minLength: 1, maxLength: 256 } },
  required: ["candidate_set_id"],
} as const;

/** Constraints a run context carries in `extensions["nodefabric.constraints"]` (the v1 RunContext has no field for them). */
function runContextConstraints(body: CandidateSetRequest): ConstraintEnvelope | undefined {
  const value = body.run_context?.extensions?.[RUN_CONSTRAINTS_EXTENSION];
  if (value === undefined) return undefined;
  const validate = validatorFor("constraint_envelope");
  if (!validate(value)) {
    const issues = issuesFromAjv(validate.errors).map((i) => ({
      ...i,
      path: `/run_context/extensions/${RUN_CONSTRAINTS_EXTENSION}${i.path === "/" ? "" : i.path}`,
    }));
    throw invalidRequest(`run_context.extensions["${RUN_CONSTRAINTS_EXTENSION}"] is not a ConstraintEnvelope`, issues);
  }
  return value as ConstraintEnvelope;
}

function kindOf(body: CandidateSetRequest): "atomic" | "composite" | undefined {
  const value = body.extensions?.[KIND_EXTENSION];
  if (value === undefined) return undefined;
  if (value !== "atomic" && value !== "composite") {
    throw invalidRequest(`extensions["${KIND_EXTENSION}"] must be "atomic" or "composite"`, [
      { path: `/extensions/${KIND_EXTENSION}`, message: 'must be one of "atomic", "composite"' },
    ]);
  }
  return value;
}

function registrySource(registryUrl: string, tokens: ServiceTokens | undefined): { source: NodeTypeSource; close: () => Promise<void> } {
  const client = new RegistryClient(registryUrl, { headersTimeoutMs: 10_000, bodyTimeoutMs: 10_000, headers: bearerHeaders(tokens, "node-registry") });
  return { source: () => client.listAll(), close: () => client.close() };
}

/** Builds the Selection service; candidate sets live in a SQLite file, node types come from the registry. */
export async function buildSelection(options: SelectionOptions): Promise<FastifyInstance> {
  let source: NodeTypeSource;
  let closeSource: () => Promise<void> = async () => undefined;
  if (options.nodeTypes) {
    source = options.nodeTypes;
  } else if (options.registryUrl) {
    ({ source, close: closeSource } = registrySource(options.registryUrl, options.tokens));
  } else {
    throw new Error("buildSelection needs registryUrl or nodeTypes");
  }
  const ttl = options.cacheTtlMs ?? DEFAULT_CACHE_TTL_MS;
  const catalogue = new Catalogue(source, ttl);
  const store: CandidateSetStore = options.store ?? new SqliteCandidateSetStore(options.dbPath);

  const health = async (): Promise<HealthCheck[]> => {
    const checks: HealthCheck[] = [];
    try {
      await store.ping();
      checks.push({ name: "store", status: "ok" });
    } catch (err) {
      checks.push({ name: "store", status: "down", message: `the store cannot be read: ${(err as Error).message}` });
    }
    const r = catalogue.lastRefresh();
    const check: HealthCheck = { name: "registry", status: r.ok ? "ok" : "degraded" };
    if (r.message) check.message = r.message;
    if (r.at !== undefined) check.details = { last_refresh_at: new Date(r.at).toISOString(), ...(r.nodeTypes !== undefined ? { node_types: r.nodeTypes } : {}) };
    checks.push(check);
    return checks;
  };

  const app = createService({ name: "selection", logger: options.logger, health, auth: options.auth, limits: options.limits });
  app.addHook("onClose", async () => {
    await closeSource();
    if (!options.store) await store.close();
  });

  app.post<{ Body: CandidateSetRequest }>("/v1/candidate-sets", { schema: { body: ref("candidate_set_request") } }, async (req, reply) => {
    const body = req.body;
    const kind = kindOf(body);
    // Outermost first: the run, then the caller's request, then the subtask itself.
    const constraints = mergeConstraints(runContextConstraints(body), body.constraints, body.subtask_spec.constraints);
    const bound = Math.min(constraints.candidates?.max_candidates_per_subtask ?? DEFAULT_MAX_CANDIDATES, MAX_CANDIDATES);
    const allowed = constraints.candidates?.allowed_node_type_ids;
    const filter: CandidateFilter = {
      kind,
      allowed: allowed ? new Set(allowed) : undefined,
      denied: new Set(constraints.candidates?.denied_node_type_ids ?? []),
      sideEffectCap: constraints.gates?.side_effect_class as SideEffectClass | undefined,
    };

    let index = await catalogue.current();
    let candidates = index.rank(body.subtask_spec.goal, filter, bound);
    // Something just published may not be in the cached index yet: a miss looks again, sooner than the TTL.
    if (candidates.length === 0 || (allowed && allowed.some((id) => !index.has(id)))) {
      const fresher = await catalogue.afterMiss(Math.min(ttl, MISS_REFRESH_FLOOR_MS));
      if (fresher) {
        index = fresher;
        candidates = index.rank(body.subtask_spec.goal, filter, bound);
      }
    }

    const set: CandidateSet = {
      candidate_set_id: newId("cs"),
      subtask_id: body.subtask_spec.subtask_id,
      candidates,
      top_k: bound,
      generated_at: clock.isoNow(),
      constraints,
    };
    if (kind) set.extensions = { [KIND_EXTENSION]: kind };
    const json = JSON.stringify(set);
    await store.insertCandidateSet({ candidate_set_id: set.candidate_set_id, subtask_id: set.subtask_id, json, created_at: set.generated_at as string });
    return reply.type("application/json; charset=utf-8").send(json);
  });

  app.get<{ Params: { candidate_set_id: string } }>(
    "/v1/candidate-sets/:candidate_set_id",
    { schema: { params: candidateSetParams } },
    async (req, reply) => {
      const json = await store.getCandidateSetJson(req.params.candidate_set_id);
      if (json === undefined) {
        throw new FabricError("candidate_set_not_found", `no candidate set "${req.params.candidate_set_id}"`, {
          details: { candidate_set_id: req.params.candidate_set_id },
        });
      }
      return reply.type("application/json; charset=utf-8").send(json);
    },
  );

  return app;
}
