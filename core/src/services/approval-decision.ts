/**
 * The optional body of POST /v1/approvals/{approval_id}:approve and :reject (schema approval_decision_request),
 * shared by the coordinator and the gateway so that both accept and refuse the same bodies (the gateway before it
 * forwards anything). No body, or an empty one, decides without a reason, as before the body existed.
 */
import type { FastifyRequest } from "fastify";
import type { ApprovalDecisionRequest } from "@nodefabric/schemas";
import { ref } from "../http/validation.js";
import { approvalParams } from "./run-api-schemas.js";

/** Route options of both decision routes: their params and body schemas. */
export const approvalDecisionRoute = {
  schema: { params: approvalParams, body: ref("approval_decision_request") },
  // The API documents say so: the body may be left out.
  config: { bodyOptional: true },
  // Fastify checks an absent body against the schema as well, where it would fail `type: object`: none means `{}`.
  preValidation: async (req: FastifyRequest) => {
    if (req.body === undefined) req.body = {};
  },
};

/** The reason a person gave with the decision, if any. */
export function decisionReason(req: FastifyRequest): string | undefined {
  return (req.body as ApprovalDecisionRequest | undefined)?.reason;
}

/** The body to pass the decision on with: none without a reason, so the request upstream is the one it was before. */
export function decisionBody(reason: string | undefined): ApprovalDecisionRequest | undefined {
  return reason === undefined ? undefined : { reason };
}
