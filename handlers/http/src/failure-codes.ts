/**
 * The failure codes `http.request` raises besides the SDK's (sdk/failure-codes.ts: `upstream_error`, `egress_denied`,
 * `response_too_large`, `invalid_configuration`, …); docs/errors.md lists them all.
 */
import { defineFailureCodes, failWith } from "@nodefabric/sdk";

export const HTTP_FAILURE_CODES = defineFailureCodes({
  mapping_error: {
    meaning: "A JSONata expression of the node type (`nodefabric.http`'s request or output mapping) failed on this run's data (`details.field`, `details.expression`).",
    retryable: false,
    raisedBy: "http.request",
  },
});

/** The HandlerError of a failure of `http.request` (a code of its block or the SDK's). */
export const fail = failWith(HTTP_FAILURE_CODES);
