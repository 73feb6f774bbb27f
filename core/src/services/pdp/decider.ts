/**
 * Turns a PolicyDecisionRequest into a PolicyDecision with the pre-parsed Cedar policy set.
 * Every path ends in a decision: when Cedar cannot evaluate a request, the answer is a deny that says why.
 */
import * as cedar from "@cedar-policy/cedar-wasm/nodejs";
import type { AuthorizationAnswer, EntityJson } from "@cedar-policy/cedar-wasm/nodejs";
import type { PolicyDecision, PolicyDecisionRequest } from "@nodefabric/schemas";
import { newId } from "../../ids.js";
import { toCedarRequest } from "./request-mapping.js";
import type { LoadedPolicySet } from "./policy-set.js";

/** At most this many dropped context values are listed in a decision. */
const MAX_DROPPED_LISTED = 20;

/** Makes decisions against one loaded policy set and optional static entities. */
export interface Decider {
  decide(request: PolicyDecisionRequest): PolicyDecision;
}

function uidKey(type: string, id: string): string {
  return `${type}\u0000${id}`;
}

function uidOf(e: EntityJson): { type: string; id: string } {
  return e.uid as { type: string; id: string };
}

/** Names a list of policy ids for a message: `policy a` or `policies a, b`. */
function naming(ids: string[]): string {
  return ids.length === 1 ? `policy ${ids[0]}` : `policies ${ids.join(", ")}`;
}

/** Creates the decision function for a loaded policy set and the entities of an entities file. */
export function createDecider(policySet: LoadedPolicySet, staticEntities: EntityJson[] = []): Decider {
  const staticIndex = new Map<string, number>();
  staticEntities.forEach((e, i) => {
    const uid = uidOf(e);
    staticIndex.set(uidKey(uid.type, uid.id), i);
  });
  const order = new Map<string, number>(policySet.policies.map((p, i) => [p.id, i]));

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

  function sortByFileOrder(ids: string[]): string[] {
    return [...ids].sort((a, b) => (order.get(a) ?? Number.MAX_SAFE_INTEGER) - (order.get(b) ?? Number.MAX_SAFE_INTEGER));
  }

  return {
    decide(request) {
      const mapped = toCedarRequest(request);
      const extensions: Record<string, unknown> = {};
      if (mapped.dropped.length > 0) extensions["nodefabric.context_dropped"] = mapped.dropped.slice(0, MAX_DROPPED_LISTED);

      let answer: AuthorizationAnswer;
      try {
        answer = cedar.statefulIsAuthorized({
          principal: mapped.principal,
          action: mapped.action,
          resource: mapped.resource,
          context: mapped.context,
          entities: entitiesFor(mapped.entities),
          preparsedPolicySetId: policySet.cacheId,
        });
      } catch (err) {
        // The wasm side panics on input it cannot take; it stays usable afterwards, and the request is denied.
        answer = { type: "failure", errors: [{ message: (err as Error).message, help: null, code: null, url: null, severity: null }], warnings: [] };
      }

      if (answer.type === "failure") {
        extensions["nodefabric.errors"] = answer.errors.map((e) => ({ message: e.message }));
        return {
          decision: "deny",
          reason_code: "evaluation_failed",
          message: `the policy engine could not evaluate ${request.action}: ${answer.errors[0]?.message ?? "unknown error"}`,
          extensions,
        };
      }

      const { decision, diagnostics } = answer.response;
      const reasons = sortByFileOrder(diagnostics.reason);
      if (diagnostics.errors.length > 0) {
        extensions["nodefabric.errors"] = diagnostics.errors.map((e) => ({ policy_id: e.policyId, message: e.error.message }));
      }
      extensions["nodefabric.policies"] = reasons;

      if (decision === "deny") {
        if (reasons.length === 0) {
          const failed = diagnostics.errors.length;
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
  };
}
