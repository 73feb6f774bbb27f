/**
 * The failure codes `llm.chat`, `llm.planner` and `llm.agent` raise besides the SDK's (sdk/failure-codes.ts: `budget_exceeded`,
 * `upstream_unavailable`, `invalid_configuration`, `no_candidate`, …); docs/errors.md lists them all.
 */
import { defineFailureCodes, failWith } from "@nodefabric/sdk";

export const LLM_FAILURE_CODES = defineFailureCodes({
  llm_auth_error: {
    meaning: "The LLM endpoint refused the credentials (HTTP 401/403): check FABRIC_LLM_API_KEY or the profile's key.",
    retryable: false,
    raisedBy: "llm.chat",
  },
  llm_bad_request: {
    meaning: "The LLM endpoint refused the request (another 4xx), or answered a redirect, which is never followed.",
    retryable: false,
    raisedBy: "llm.chat",
  },
  llm_schema_rejected: {
    meaning: "The LLM endpoint refused the request's structured output mode (json_schema, json_object), or the profile takes none.",
    retryable: false,
    raisedBy: "llm.chat",
  },
  llm_refusal: {
    meaning: "The model refused the task, or its answer was withheld by a content filter.",
    retryable: false,
    raisedBy: "llm.chat",
  },
  llm_output_truncated: {
    meaning: "The answer was cut at max_output_tokens (finish_reason \"length\").",
    retryable: false,
    raisedBy: "llm.chat",
  },
  llm_invalid_output: {
    meaning: "The model's answer is empty, not JSON, or does not match response_schema (`details.errors`).",
    retryable: false,
    raisedBy: "llm.chat",
  },
  upstream_timeout: {
    meaning: "The LLM endpoint did not answer within the call's timeout.",
    retryable: true,
    raisedBy: "llm.chat",
  },
  planner_invalid_output: {
    meaning: "The model's plan or decision was still invalid after the planner's repair attempts (`details.errors`, `details.calls`).",
    retryable: false,
    raisedBy: "llm.planner",
  },
  planner_bound_exceeded: {
    meaning: "The plan asked for more than a bound allows (max_steps, max_children_per_composite): model output never widens a bound (`details.bound`, `limit`, `planned`).",
    retryable: false,
    raisedBy: "llm.planner",
  },
  planner_aborted: {
    meaning: "The planner's evaluation of a failed subtask chose to abort the plan (`details.subtask_id`).",
    retryable: false,
    raisedBy: "llm.planner",
  },
  agent_invalid_output: {
    meaning: "The agent's final answer did not match its output_schema, even when asked once more under the schema (`details.errors`).",
    retryable: false,
    raisedBy: "llm.agent",
  },
  dependency_failed: {
    meaning: "In the planner's results: a subtask was not run because a subtask it needs did not complete.",
    retryable: false,
    raisedBy: "llm.planner",
  },
});

/** The HandlerError of a failure of `llm.chat`, `llm.planner` or `llm.agent` (a code of its block or the SDK's). */
export const fail = failWith(LLM_FAILURE_CODES);
