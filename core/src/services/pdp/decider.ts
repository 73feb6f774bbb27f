/**
 * Turns a PolicyDecisionRequest into a PolicyDecision with the pre-parsed Cedar policy set.
 * Every path ends in a decision: when Cedar cannot evaluate a request, the answer is a deny that says why.
 *
 * Decision cache: when the policy set's reads are bounded (read-analysis.ts), Cedar is asked with the request cut
 * down to what the policies can read (the principal, action and resource, the context keys and entity attributes
 * they read), and its outcome is remembered under the canonical JSON of exactly that cut-down request. A hit is
 * therefore the answer Cedar gave to an identical input. Only Cedar's outcome is cached; every decision (and every
 * approval id) is built afresh from it.
 */
import { setFlagsFromString } from "node:v8";
import type { AuthorizationAnswer, CedarValueJson, Context, EntityJson, TypeAndId } from "@cedar-policy/cedar-wasm/nodejs";
import type { PolicyDecision, PolicyDecisionRequest } from "@nodefabric/schemas";
import { newId } from "../../ids.js";
import { trackCache } from "../../observe/caches.js";
import { toCedarRequest, type CedarRequest } from "./request-mapping.js";
import { DEFAULT_POLICY_TEXT, loadPolicyText, type LoadedPolicySet } from "./policy-set.js";
import { cedarEngine } from "./cedar.js";

/** At most this many dropped context values are listed in a decision. */
const MAX_DROPPED_LISTED = 20;

/**
 * Works around a V8 fault (seen with Node 20's V8 11.3): TurboFan inlines the JS-to-Wasm call of
 * `statefulIsAuthorized` into its caller, and when that caller's code is thrown away while Cedar runs (a GC that
 * changes an allocation site's pretenuring decision is enough, and cached outcomes that live long make that likely),
 * V8 aborts the whole process with "Fatal error … unreachable code" in Deoptimizer::DoComputeBuiltinContinuation.
 * Without the inlining the call goes through V8's generic wrapper, which deoptimizes cleanly; decisions measured no
 * slower. The flag is process-wide and only turns that one optimization off. Newer V8s are left alone (an unknown
 * flag makes V8 print an error).
 */
let wasmCallInliningOff = false;
function turnOffJsToWasmInlining(): void {
  if (wasmCallInliningOff) return;
  wasmCallInliningOff = true;
  const major = Number(process.versions.v8.split(".")[0]);
  if (major >= 9 && major <= 13) setFlagsFromString("--no-turbo-inline-js-wasm-calls");
}

/** A UTF-16 surrogate that is not half of a pair: with the `u` flag a pair is one code point, never matched. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Whether every string of a value (keys included) is well-formed UTF-16. Cedar reads its input as JSON text, which
 * refuses a lone surrogate, so it fails any request that holds one, whatever its policies say.
 */
function wellFormed(value: unknown): boolean {
  if (typeof value === "string") return !LONE_SURROGATE.test(value);
  if (Array.isArray(value)) return value.every(wellFormed);
  if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) if (LONE_SURROGATE.test(key) || !wellFormed(item)) return false;
  }
  return true;
}

/** Outcomes the decision cache holds by default. */
export const DEFAULT_DECISION_CACHE_SIZE = 10_000;

export interface DeciderOptions {
  /** How many Cedar outcomes the decision cache keeps (least recently used go first); 0 turns it off. Default 10,000. */
  decisionCacheSize?: number;
}

/** The decision cache's state, for health and tests. */
export interface DecisionCacheStats {
  /** `"on"`, or `"off (<reason>)"`. */
  status: string;
  hits: number;
  misses: number;
  entries: number;
  capacity: number;
}

/** Makes decisions against one loaded policy set and optional static entities. */
export interface Decider {
  decide(request: PolicyDecisionRequest): PolicyDecision;
  stats(): DecisionCacheStats;
}

/** What Cedar answered, without anything that belongs to one request; this is what the cache holds. */
type Outcome =
  | { type: "failure"; messages: string[] }
  | { type: "success"; decision: "allow" | "deny"; reasons: string[]; errors: Array<{ policy_id: string; message: string }> };

function uidKey(type: string, id: string): string {
  return `${type}\u0000${id}`;
}

function uidOf(e: EntityJson): { type: string; id: string } {
  return e.uid as { type: string; id: string };
}

function sameUid(a: { type: string; id: string }, b: TypeAndId): boolean {
  return a.type === b.type && a.id === b.id;
}

/** Names a list of policy ids for a message: `policy a` or `policies a, b`. */
function naming(ids: string[]): string {
  return ids.length === 1 ? `policy ${ids[0]}` : `policies ${ids.join(", ")}`;
}

/** A value whose JSON text is the same for equal values: record keys sorted at every level. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (typeof value === "object" && value !== null) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) out[key] = canonical((value as Record<string, unknown>)[key]);
    return out;
  }
  return value;
}

/** Copies the named own properties that are present, in the given (sorted) order, and adds them to the key parts. */
function pick(from: Record<string, CedarValueJson>, names: readonly string[], keyParts: unknown[]): Record<string, CedarValueJson> {
  const out: Record<string, CedarValueJson> = {};
  for (const name of names) {
    if (!Object.hasOwn(from, name)) continue;
    const value = from[name]!;
    out[name] = value;
    keyParts.push(name, canonical(value));
  }
  return out;
}

/** Creates the decision function for a loaded policy set and the entities of an entities file. */
export function createDecider(policySet: LoadedPolicySet, staticEntities: EntityJson[] = [], options: DeciderOptions = {}): Decider {
  // The built-in set's one policy permits every request without a condition: Cedar answers every request it can
  // read "allow, because of it", so it is asked only about one it cannot (a lone surrogate in a string), and loaded
  // then. core/test/pdp.test.ts compares the two on many requests.
  const allowsAll = policySet.allowsAll === true;
  let preparsed = !allowsAll;
  if (!allowsAll) turnOffJsToWasmInlining();
  const staticIndex = new Map<string, number>();
  staticEntities.forEach((e, i) => {
    const uid = uidOf(e);
    staticIndex.set(uidKey(uid.type, uid.id), i);
  });
  const order = new Map<string, number>(policySet.policies.map((p, i) => [p.id, i]));

  const capacity = Math.max(0, Math.floor(options.decisionCacheSize ?? DEFAULT_DECISION_CACHE_SIZE));
  const reads = policySet.reads;
  // Why the cache is off; undefined when it is on. The entities file needs no rule of its own: it is fixed for the
  // decider's life, request entities bring no parents (so `in` depends only on the uids in the key), and attributes
  // of entities other than the principal and resource leave the reads unbounded.
  const offReason = capacity === 0 ? "turned off by the decisionCacheSize option" : reads.bounded ? undefined : reads.reason;
  const contextKeys = reads.bounded ? [...reads.context].sort() : [];
  const principalAttrs = reads.bounded ? [...reads.principal].sort() : [];
  const resourceAttrs = reads.bounded ? [...reads.resource].sort() : [];
  const bothAttrs = [...new Set([...principalAttrs, ...resourceAttrs])].sort();
  const usesPrincipal = reads.bounded && reads.vars.has("principal");
  const usesAction = reads.bounded && reads.vars.has("action");
  const usesResource = reads.bounded && reads.vars.has("resource");
  const cache = new Map<string, Outcome & { type: "success" }>();
  trackCache("pdp.decisions", cache, (c) => ({ entries: c.size }), { max_entries: capacity });
  let hits = 0;
  let misses = 0;

  /** The request's entities over the file's: the file gives parents and static attributes, the request its own attributes. */
  function entitiesFor(requestEntities: EntityJson[]): EntityJson[] {
    if (staticEntities.length === 0) return requestEntities;
    let merged: EntityJson[] | undefined;
    const extra: EntityJson[] = [];
    for (const e of requestEntities) {
      const uid = uidOf(e);
      const at = staticIndex.get(uidKey(uid.type, uid.id));
      if (at === undefined) {
        extra.push(e);
        continue;
      }
      merged ??= staticEntities.slice();
      const known = staticEntities[at]!;
      merged[at] = { ...known, attrs: { ...known.attrs, ...e.attrs } };
    }
    return (merged ?? staticEntities).concat(extra);
  }

  function byFileOrder(a: string, b: string): number {
    return (order.get(a) ?? Number.MAX_SAFE_INTEGER) - (order.get(b) ?? Number.MAX_SAFE_INTEGER);
  }

  function evaluate(mapped: CedarRequest, context: Context, requestEntities: EntityJson[]): Outcome {
    const entities = entitiesFor(requestEntities);
    if (allowsAll) {
      // The entities file's own strings passed Cedar at load (checkParseEntities), so only the request's are looked at.
      if (wellFormed([mapped.principal, mapped.action, mapped.resource, context, requestEntities])) {
        return { type: "success", decision: "allow", reasons: policySet.policies.map((p) => p.id), errors: [] };
      }
      if (!preparsed) {
        // The same text under the same cache id (pdp.test.ts checks), now in Cedar's cache too.
        loadPolicyText(DEFAULT_POLICY_TEXT, "default");
        turnOffJsToWasmInlining();
        preparsed = true;
      }
    }
    let answer: AuthorizationAnswer;
    try {
      answer = cedarEngine().statefulIsAuthorized({
        principal: mapped.principal,
        action: mapped.action,
        resource: mapped.resource,
        context,
        entities,
        preparsedPolicySetId: policySet.cacheId,
      });
    } catch (err) {
      // The wasm side panics on input it cannot take; it stays usable afterwards, and the request is denied.
      return { type: "failure", messages: [(err as Error).message] };
    }
    if (answer.type === "failure") return { type: "failure", messages: answer.errors.map((e) => e.message) };
    const { decision, diagnostics } = answer.response;
    return {
      type: "success",
      decision,
      reasons: [...diagnostics.reason].sort(byFileOrder),
      errors: diagnostics.errors
        .map((e) => ({ policy_id: e.policyId, message: e.error.message }))
        .sort((a, b) => byFileOrder(a.policy_id, b.policy_id)),
    };
  }

  /** Cedar's outcome for the request, from the cache when the same cut-down request was answered before. */
  function outcomeFor(mapped: CedarRequest): Outcome {
    if (offReason !== undefined) return evaluate(mapped, mapped.context, mapped.entities);

    // A uid no policy mentions is left out: nothing can then reach it or its attributes (reads through other
    // entities are unbounded), and request entities bring no parents, so `in` on an entity literal cannot tell.
    const keyParts: unknown[] = [
      usesPrincipal ? [mapped.principal.type, mapped.principal.id] : null,
      usesAction ? [mapped.action.type, mapped.action.id] : null,
      usesResource ? [mapped.resource.type, mapped.resource.id] : null,
    ];
    const context = pick(mapped.context, contextKeys, keyParts);
    const entities: EntityJson[] = mapped.entities.map((e) => {
      const uid = uidOf(e);
      const isPrincipal = sameUid(uid, mapped.principal);
      const isResource = sameUid(uid, mapped.resource);
      const names = isPrincipal && isResource ? bothAttrs : isPrincipal ? principalAttrs : isResource ? resourceAttrs : [];
      // The principal's and resource's uids are in the key above when a policy mentions them; any other request
      // entity, or one that brings parents or tags, is keyed by its uid here.
      const hasMore = e.parents.length > 0 || (e.tags !== undefined && Object.keys(e.tags).length > 0);
      keyParts.push("entity", isPrincipal, isResource, (!isPrincipal && !isResource) || hasMore ? [uid.type, uid.id] : null);
      const attrs = pick(e.attrs, names, keyParts);
      // Parents and tags go into the key whole (the mapping gives request entities none today).
      keyParts.push(canonical(e.parents), canonical(e.tags ?? null));
      const cut: EntityJson = { uid: e.uid, attrs, parents: e.parents };
      if (e.tags !== undefined) cut.tags = e.tags;
      return cut;
    });
    const key = JSON.stringify(keyParts);

    const cached = cache.get(key);
    if (cached !== undefined) {
      hits++;
      cache.delete(key);
      cache.set(key, cached);
      return cached;
    }
    misses++;
    const outcome = evaluate(mapped, context, entities);
    if (outcome.type === "success") {
      cache.set(key, outcome);
      if (cache.size > capacity) cache.delete(cache.keys().next().value as string);
    }
    return outcome;
  }

  return {
    decide(request) {
      const mapped = toCedarRequest(request);
      const extensions: Record<string, unknown> = {};
      if (mapped.dropped.length > 0) extensions["nodefabric.context_dropped"] = mapped.dropped.slice(0, MAX_DROPPED_LISTED);

      const outcome = outcomeFor(mapped);
      if (outcome.type === "failure") {
        extensions["nodefabric.errors"] = outcome.messages.map((message) => ({ message }));
        return {
          decision: "deny",
          reason_code: "evaluation_failed",
          message: `the policy engine could not evaluate ${request.action}: ${outcome.messages[0] ?? "unknown error"}`,
          extensions,
        };
      }

      // Copies: the outcome may be a cached one, and a caller must not be able to change it.
      const reasons = outcome.reasons.slice();
      if (outcome.errors.length > 0) extensions["nodefabric.errors"] = outcome.errors.map((e) => ({ ...e }));
      extensions["nodefabric.policies"] = reasons;

      if (outcome.decision === "deny") {
        if (reasons.length === 0) {
          const failed = outcome.errors.length;
          const note = failed > 0 ? ` (${failed} ${failed === 1 ? "policy" : "policies"} failed to evaluate)` : "";
          return { decision: "deny", reason_code: "no_permit", message: `no policy permits ${request.action}${note}`, extensions };
        }
        return { decision: "deny", reason_code: `denied_by:${reasons[0]}`, message: `denied by ${naming(reasons)}`, extensions };
      }

      const approvers = reasons.filter((id) => policySet.byId.get(id)?.requiresApproval === true);
      if (approvers.length > 0) {
        return {
          decision: "require_approval",
          reason_code: `approval_required_by:${approvers[0]}`,
          message: `${naming(approvers)} ${approvers.length === 1 ? "requires" : "require"} approval for ${request.action}`,
          approval_ref: { approval_id: newId("apr") },
          extensions,
        };
      }
      return { decision: "allow", reason_code: `policy:${reasons[0] ?? "unknown"}`, message: `allowed by ${naming(reasons)}`, extensions };
    },

    stats() {
      return { status: offReason === undefined ? "on" : `off (${offReason})`, hits, misses, entries: cache.size, capacity: offReason === undefined ? capacity : 0 };
    },
  };
}
