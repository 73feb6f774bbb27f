/**
 * A run as an A2A task: the task id is the run id, its state is the run's (and its approvals'), its artifacts are the
 * run's outputs, and its history is the message that started it (kept on the run, so it survives a restart). What
 * A2A needs that a run does not hold (the caller it is bound to, the conversation, the skill) rides on the run as
 * labels and annotations, set when the run starts and never changed.
 */
import { Role, TaskState, type Artifact, type Message, type Part, type Task, type TaskStatus } from "@a2a-js/sdk";
import type { Run, RunEvent } from "@nodefabric/schemas";

export const CALLER_LABEL = "nodefabric.a2a.caller";
export const CONTEXT_LABEL = "nodefabric.a2a.context";
export const SKILL_LABEL = "nodefabric.a2a.skill";
/** The message that started the task (A2A JSON), so GetTask answers it as the task's history. */
export const MESSAGE_ANNOTATION = "nodefabric.a2a.message";
/** Push notification configs the client gave with its SendMessage (JSON array). */
export const PUSH_ANNOTATION = "nodefabric.a2a.push";

/** The run id prefix of an A2A task. */
export const RUN_PREFIX = "a2a";
/** A task id that may be a run: a2a- and 128 random bits (a2a-ask-… once a task that asked for a skill runs one). */
export const TASK_ID = /^a2a-(ask-)?[0-9a-f]{32}$/;

export interface RunMetadata {
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export function metadataOf(run: Run): RunMetadata {
  const m = (run.extensions?.["nodefabric.metadata"] ?? {}) as Partial<RunMetadata>;
  return { labels: m.labels ?? {}, annotations: m.annotations ?? {} };
}

/** Whether the run is an A2A task of this caller (anything else is "not found" to them, never "forbidden"). */
export function isTaskOf(run: Run, digest: string): boolean {
  const { labels } = metadataOf(run);
  return labels[CALLER_LABEL] === digest && labels[SKILL_LABEL] !== undefined;
}

export const textPart = (text: string): Part => ({ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" });
export const dataPart = (data: unknown): Part => ({ content: { $case: "data", value: data }, metadata: undefined, filename: "", mediaType: "application/json" });

export function agentMessage(taskId: string, contextId: string, parts: Part[], id = `${taskId}-status`): Message {
  return { messageId: id, contextId, taskId, role: Role.ROLE_AGENT, parts, metadata: undefined, extensions: [], referenceTaskIds: [] };
}

/** The run's error, as its Run says it. */
function errorOf(run: Run): { code?: string; message?: string } {
  return ((run.extensions ?? {}) as Record<string, unknown>)["nodefabric.error"] as { code?: string; message?: string } | undefined ?? {};
}

/** Failures that are a refusal to do the task (the policy, a budget, a rejected approval), not a fault in it. */
const REFUSALS = new Set(["policy_denied", "node_type_denied", "node_type_not_allowed", "approval_rejected", "budget_exceeded"]);

/** A2A's state for a run's state; `pendingApprovals` when it waits for a person. */
export function stateOf(run: Pick<Run, "state"> & Partial<Run>, pendingApprovals: number): TaskState {
  switch (run.state) {
    case "queued":
      // A run whose NodeRun waits for an approval before it is dispatched is still queued.
      return pendingApprovals > 0 ? TaskState.TASK_STATE_INPUT_REQUIRED : TaskState.TASK_STATE_SUBMITTED;
    case "running":
      return pendingApprovals > 0 ? TaskState.TASK_STATE_INPUT_REQUIRED : TaskState.TASK_STATE_WORKING;
    case "completed":
      return TaskState.TASK_STATE_COMPLETED;
    case "canceled":
      return TaskState.TASK_STATE_CANCELED;
    default: {
      const code = run.extensions ? errorOf(run as Run).code : undefined;
      return code !== undefined && REFUSALS.has(code) ? TaskState.TASK_STATE_REJECTED : TaskState.TASK_STATE_FAILED;
    }
  }
}

/** The run's outputs as one artifact: a data part, and a text part where the outputs are text. */
export function artifactsOf(run: Run): Artifact[] {
  if (run.state !== "completed") return [];
  const outputs = ((run.extensions ?? {}) as Record<string, unknown>)["nodefabric.outputs"];
  if (outputs === undefined) return [];
  const parts: Part[] = [dataPart(outputs)];
  const text = textOf(outputs);
  if (text !== undefined) parts.push(textPart(text));
  return [{ artifactId: `${run.run_id}-outputs`, name: "outputs", description: "The run's outputs", parts, metadata: undefined, extensions: [] }];
}

/** Fields that hold the text answer of outputs with other fields too (llm.chat's `text`, llm.agent's `answer`, llm.planner's summary). */
const TEXT_FIELDS = ["text", "answer", "planner_summary"];

/** The text of outputs that are text: a string, or an object whose only string field (or a TEXT_FIELDS one) holds it. */
function textOf(outputs: unknown): string | undefined {
  if (typeof outputs === "string") return outputs;
  if (outputs === null || typeof outputs !== "object" || Array.isArray(outputs)) return undefined;
  const o = outputs as Record<string, unknown>;
  for (const k of TEXT_FIELDS) if (typeof o[k] === "string" && o[k] !== "") return o[k] as string;
  const strings = Object.values(o).filter((v): v is string => typeof v === "string");
  return strings.length === 1 && Object.keys(o).length === 1 ? strings[0] : undefined;
}

/** What the status message says for a state. */
export function statusText(run: Run, state: TaskState, approvals: readonly { approval_id: string; reason?: string }[]): string | undefined {
  if (state === TaskState.TASK_STATE_INPUT_REQUIRED) {
    const ids = approvals.map((a) => a.approval_id).join(", ");
    return `waiting for approval ${ids}: reply to this task with a data part {"decision":"approve"} or {"decision":"reject","reason":"..."} (or the text "approve" / "reject"), as someone allowed to decide it`;
  }
  if (state === TaskState.TASK_STATE_FAILED || state === TaskState.TASK_STATE_REJECTED) {
    const e = errorOf(run);
    return `${e.code ?? "failed"}: ${e.message ?? `the run ended ${run.state}`}`;
  }
  if (state === TaskState.TASK_STATE_CANCELED) return "the run was canceled";
  return undefined;
}

export function statusOf(run: Run, approvals: readonly { approval_id: string; reason?: string }[]): TaskStatus {
  const state = stateOf(run, approvals.length);
  const contextId = metadataOf(run).labels[CONTEXT_LABEL] ?? "";
  const text = statusText(run, state, approvals);
  return {
    state,
    message: text !== undefined ? agentMessage(run.run_id, contextId, [textPart(text)]) : undefined,
    timestamp: run.ended_at ?? run.started_at ?? new Date().toISOString(),
  };
}

/** The message that started the task, as kept on the run. */
export function startingMessage(run: Run, parse: (json: unknown) => Message): Message | undefined {
  const json = metadataOf(run).annotations[MESSAGE_ANNOTATION];
  if (json === undefined) return undefined;
  try {
    return parse(JSON.parse(json));
  } catch {
    return undefined;
  }
}

export function taskOf(run: Run, approvals: readonly { approval_id: string; reason?: string }[], history: Message[], historyLength?: number): Task {
  const { labels } = metadataOf(run);
  const kept = historyLength === undefined ? history : historyLength <= 0 ? [] : history.slice(-historyLength);
  return {
    id: run.run_id,
    contextId: labels[CONTEXT_LABEL] ?? "",
    status: statusOf(run, approvals),
    artifacts: artifactsOf(run),
    history: kept,
    metadata: { "dev.nodefabric/run_id": run.run_id, "dev.nodefabric/node_type_id": labels[SKILL_LABEL] ?? "" },
  };
}

/** A handler's progress, or a NodeRun's step, as a line of a WORKING status message (undefined: not worth one). */
export function progressText(e: RunEvent): string | undefined {
  const data = (e.data ?? {}) as Record<string, unknown>;
  if (e.type === "node_run_progress") {
    const of = typeof data.total === "number" ? `/${data.total}` : "";
    return typeof data.message === "string" ? data.message : typeof data.progress === "number" ? `progress ${data.progress}${of}` : "progress";
  }
  if (e.type === "node_run_started") return `NodeRun ${e.node_run_id ?? ""} started`;
  if (e.type === "node_run_retrying") return `NodeRun ${e.node_run_id ?? ""} retrying`;
  if (e.type === "approval_resolved") return `approval ${String(data.approval_id ?? "")} ${String(data.decision ?? data.state ?? "resolved")}`;
  return undefined;
}

export const isTerminal = (s: TaskState): boolean =>
  s === TaskState.TASK_STATE_COMPLETED || s === TaskState.TASK_STATE_FAILED || s === TaskState.TASK_STATE_CANCELED || s === TaskState.TASK_STATE_REJECTED;

/** Whether a stream ends at this state: a terminal one, or one waiting for the client. */
export const isFinal = (s: TaskState): boolean => isTerminal(s) || s === TaskState.TASK_STATE_INPUT_REQUIRED || s === TaskState.TASK_STATE_AUTH_REQUIRED;
