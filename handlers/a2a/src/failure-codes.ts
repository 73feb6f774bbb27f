/**
 * The failure codes `a2a.send` raises besides the SDK's (sdk/failure-codes.ts: `upstream_unavailable`,
 * `invalid_configuration`, `egress_denied`, …) and the two it shares with `mcp.call` (`upstream_unauthorized`,
 * `upstream_protocol_error`, in handlers/mcp/src/failure-codes.ts); docs/errors.md lists them all.
 */
import { defineFailureCodes, failWith } from "@nodefabric/sdk";

export const A2A_FAILURE_CODES = defineFailureCodes({
  agent_task_failed: {
    meaning: "The remote A2A agent ran the task and it ended TASK_STATE_FAILED; the agent's status message is in the error.",
    retryable: false,
    raisedBy: "a2a.send",
  },
  agent_task_rejected: {
    meaning: "The remote A2A agent refused the task (TASK_STATE_REJECTED); the agent's status message says why.",
    retryable: false,
    raisedBy: "a2a.send",
  },
  agent_task_canceled: {
    meaning: "The remote A2A agent's task ended TASK_STATE_CANCELED without this NodeRun having canceled it.",
    retryable: false,
    raisedBy: "a2a.send",
  },
  agent_input_required: {
    meaning:
      "The remote A2A agent's task stopped in TASK_STATE_INPUT_REQUIRED or TASK_STATE_AUTH_REQUIRED: it waits for an answer a NodeRun cannot give (the error names the task, so a person can answer it at the agent).",
    retryable: false,
    raisedBy: "a2a.send",
  },
  skill_definition_changed: {
    meaning: "The remote A2A agent's card no longer lists the skill, or lists it with another definition than the one imported (pinned); it is not called. Import the agent again.",
    retryable: false,
    raisedBy: "a2a.send",
  },
});

/** The HandlerError of a failure of `a2a.send` (a code of its block or the SDK's). */
export const fail = failWith(A2A_FAILURE_CODES);
