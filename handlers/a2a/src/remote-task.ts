/**
 * One call of a remote agent's skill as one execution of a NodeRun: send the message (the NodeRun's input as a data
 * part, or its `text` as a text part; `metadata.skillId` the skill), follow the task it makes (SendStreamingMessage
 * when the card says the agent streams, else GetTask with a growing interval), and turn its end into outputs or a
 * HandlerError (docs/a2a-import.md has the table):
 * - COMPLETED → the outputs its artifacts hold (outputs.ts);
 * - FAILED → `agent_task_failed`; REJECTED → `agent_task_rejected`; CANCELED (not by this NodeRun) →
 *   `agent_task_canceled`; INPUT_REQUIRED or AUTH_REQUIRED → `agent_input_required`, not retryable: a NodeRun
 *   cannot answer the agent, and an executor's handler has no way to ask a person (the SDK's context has no approval
 *   to wait on), so the failure names the task for a person to answer at the agent.
 *
 * The remote task's id is saved with the NodeRun (`ctx.saveCheckpoint`) as soon as the agent names it: a later
 * execution (after a crash, or a retry) resumes that task (GetTask, then SubscribeToTask or polling) instead of
 * sending the message again. A canceled NodeRun sends CancelTask.
 */
import { HandlerError, type AtomicContext, type JsonObject } from "@nodefabric/sdk";
import { Role, TaskState, taskStateToJSON, type Artifact, type Message, type Part, type Task } from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import type { A2aConfig } from "./a2a-config.js";
import { agentFetch, checkSkill, clientFor, fetchCard, mapFailure, nameOf } from "./agent-connection.js";
import { outputsOf, textOfMessage } from "./outputs.js";
import { fail } from "./failure-codes.js";

/** What is saved with the NodeRun while the remote task runs (`ctx.checkpoint.a2a_task`). */
export interface RemoteTaskCheckpoint {
  card_url: string;
  skill: string;
  task_id: string;
  context_id?: string;
}

/** The task an earlier execution of this NodeRun started for the skill, from `ctx.checkpoint`. */
export function savedTask(ctx: AtomicContext, config: A2aConfig): RemoteTaskCheckpoint | undefined {
  const t = (ctx.checkpoint as { a2a_task?: Partial<RemoteTaskCheckpoint> } | undefined)?.a2a_task;
  if (!t || t.card_url !== config.cardUrl || t.skill !== config.skill || typeof t.task_id !== "string" || t.task_id === "") return undefined;
  return { card_url: config.cardUrl, skill: config.skill, task_id: t.task_id, ...(typeof t.context_id === "string" && t.context_id ? { context_id: t.context_id } : {}) };
}

const TERMINAL = new Set([TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED]);
const INTERRUPTED = new Set([TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED]);
/** Where following a task stops: it ended, or it waits for an answer a NodeRun cannot give. */
const isFinal = (s: TaskState | undefined) => s !== undefined && (TERMINAL.has(s) || INTERRUPTED.has(s));

/** The polling interval: from 250 ms, half as long again each time, at most 5 s. */
const FIRST_POLL_MS = 250;
const MAX_POLL_MS = 5_000;

/** The remote task as far as this execution followed it. */
interface Followed {
  taskId?: string;
  contextId?: string;
  state?: TaskState;
  statusMessage?: Message;
  artifacts: Map<string, Artifact>;
  /** The agent answered with a message and made no task. */
  reply?: Message;
}

function part(content: NonNullable<Part["content"]>, mediaType = ""): Part {
  return { content, metadata: undefined, filename: "", mediaType };
}

/** The message that asks for the skill: deterministic id per NodeRun, so an agent can tell a resend from a new ask. */
function messageFor(config: A2aConfig, inputs: JsonObject, ctx: AtomicContext): Message {
  const parts =
    config.input === "text"
      ? [part({ $case: "text", value: typeof inputs.text === "string" ? inputs.text : JSON.stringify(inputs) }, "text/plain")]
      : [part({ $case: "data", value: inputs }, "application/json")];
  return { messageId: `nf-${ctx.node_run_id}`, contextId: "", taskId: "", role: Role.ROLE_USER, parts, metadata: { skillId: config.skill }, extensions: [], referenceTaskIds: [] };
}

function adoptTask(f: Followed, task: Task): void {
  f.taskId = task.id || f.taskId;
  f.contextId = task.contextId || f.contextId;
  if (task.status) {
    f.state = task.status.state;
    f.statusMessage = task.status.message;
  }
  if (task.artifacts?.length) {
    f.artifacts.clear();
    for (const a of task.artifacts) f.artifacts.set(a.artifactId, a);
  }
}

function adoptArtifact(f: Followed, artifact: Artifact | undefined, append: boolean): void {
  if (!artifact) return;
  const before = f.artifacts.get(artifact.artifactId);
  f.artifacts.set(artifact.artifactId, append && before ? { ...before, parts: [...before.parts, ...artifact.parts] } : artifact);
}

/** Passes the agent's status messages on as the NodeRun's progress. */
function progressReporter(ctx: AtomicContext): (m: Message | undefined) => void {
  let stage = 0;
  let last: string | undefined;
  return (m) => {
    const text = m ? textOfMessage(m) : "";
    if (!text || text === last) return;
    last = text;
    if (typeof ctx.reportProgress === "function") ctx.reportProgress(++stage, undefined, text.slice(0, 500));
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
  });
}

/** Runs one execution: calls the skill `config` names with `inputs`, or resumes the task an earlier one started. */
export async function callAgentSkill(config: A2aConfig, inputs: JsonObject, ctx: AtomicContext): Promise<JsonObject> {
  const agent = config.cardUrl;
  const fetch = agentFetch(config, ctx);
  const fetched = await fetchCard(config, ctx, fetch);
  const resumed = savedTask(ctx, config);
  // A resumed task was checked when its message was sent; what the card says now does not change what runs.
  if (!resumed) checkSkill(config, fetched, ctx);
  const client = await clientFor(fetched, fetch, ctx, agent);
  const streaming = config.streaming === "auto" && fetched.card.capabilities?.streaming === true;
  const f: Followed = { artifacts: new Map() };
  const report = progressReporter(ctx);

  let saved = false;
  const save = async () => {
    if (saved || !f.taskId) return;
    saved = true;
    const checkpoint: RemoteTaskCheckpoint = { card_url: config.cardUrl, skill: config.skill, task_id: f.taskId, ...(f.contextId ? { context_id: f.contextId } : {}) };
    try {
      await ctx.saveCheckpoint({ a2a_task: { ...checkpoint } });
    } catch (err) {
      // Without it a later execution would send the message again; this one still follows the task.
      ctx.log.warn({ err: (err as Error).message, task_id: f.taskId }, "could not save the remote A2A task's id with the NodeRun");
    }
  };
  const cancel = () => {
    if (!f.taskId || isFinal(f.state)) return;
    ctx.log.info({ task_id: f.taskId }, "canceling the remote A2A task");
    void client.cancelTask({ tenant: "", id: f.taskId, metadata: undefined }).catch(() => undefined);
  };
  ctx.signal.addEventListener("abort", cancel, { once: true });
  try {
    if (resumed) {
      f.taskId = resumed.task_id;
      f.contextId = resumed.context_id;
      saved = true;
      ctx.log.info({ task_id: f.taskId }, "resuming the remote A2A task this NodeRun started earlier");
      try {
        adoptTask(f, await client.getTask({ tenant: "", id: f.taskId }, { signal: ctx.signal }));
      } catch (err) {
        throw mapFailure(err, "resume", ctx, agent);
      }
      report(f.statusMessage);
      if (!isFinal(f.state) && streaming) await follow(client.resubscribeTask({ tenant: "", id: f.taskId }, { signal: ctx.signal }), f, ctx, save, report, "resume", agent);
    } else {
      const request = { tenant: "", message: messageFor(config, inputs, ctx), configuration: undefined, metadata: undefined };
      if (streaming) {
        await follow(client.sendMessageStream(request, { signal: ctx.signal }), f, ctx, save, report, "send", agent);
      } else {
        let result: Task | Message;
        try {
          result = await client.sendMessage(request, { signal: ctx.signal });
        } catch (err) {
          throw mapFailure(err, "send", ctx, agent);
        }
        if ("messageId" in result) f.reply = result;
        else adoptTask(f, result);
        await save();
        report(f.statusMessage);
      }
    }
    // Polling: until the task ends (a stream that ended early is followed this way too).
    let pollMs = FIRST_POLL_MS;
    while (!f.reply && !isFinal(f.state)) {
      if (!f.taskId) throw new HandlerError("upstream_protocol_error", `${nameOf(ctx)}: the A2A agent ${agent} answered the message with neither a task nor a reply`, { retryable: false, details: { phase: "send" } });
      await sleep(pollMs, ctx.signal);
      if (ctx.signal.aborted) throw ctx.signal.reason ?? new Error("canceled");
      pollMs = Math.min(MAX_POLL_MS, Math.round(pollMs * 1.5));
      try {
        adoptTask(f, await client.getTask({ tenant: "", id: f.taskId }, { signal: ctx.signal }));
      } catch (err) {
        throw mapFailure(err, "follow", ctx, agent);
      }
      report(f.statusMessage);
    }
  } catch (err) {
    if (ctx.signal.aborted) throw ctx.signal.reason ?? err;
    throw err;
  } finally {
    ctx.signal.removeEventListener("abort", cancel);
  }
  return endOf(f, config, ctx);
}

/** Reads a stream of task events into `f` until the task ends or waits; the stream may end earlier (then polled). */
async function follow(
  stream: AsyncGenerator<import("@a2a-js/sdk").StreamResponse, void, undefined>,
  f: Followed,
  ctx: AtomicContext,
  save: () => Promise<void>,
  report: (m: Message | undefined) => void,
  phase: "send" | "resume",
  agent: string,
): Promise<void> {
  try {
    for await (const event of stream) {
      const p = event.payload;
      if (!p) continue;
      switch (p.$case) {
        case "message":
          f.reply = p.value;
          break;
        case "task":
          adoptTask(f, p.value);
          break;
        case "statusUpdate":
          f.taskId ||= p.value.taskId;
          f.contextId ||= p.value.contextId;
          if (p.value.status) {
            f.state = p.value.status.state;
            f.statusMessage = p.value.status.message;
          }
          break;
        case "artifactUpdate":
          f.taskId ||= p.value.taskId;
          f.contextId ||= p.value.contextId;
          adoptArtifact(f, p.value.artifact, p.value.append);
          break;
      }
      await save();
      report(f.statusMessage);
      if (f.reply || isFinal(f.state)) break;
    }
  } catch (err) {
    if (ctx.signal.aborted) throw ctx.signal.reason ?? err;
    // Once the task is known, a broken stream is followed by polling; before, the send failed.
    if (!f.taskId) throw mapFailure(err, phase, ctx, agent);
    ctx.log.warn({ task_id: f.taskId, err: (err as Error).message }, "the A2A agent's stream broke; polling the task");
  }
}

/** The outputs of the task's end, or the HandlerError it stands for. */
function endOf(f: Followed, config: A2aConfig, ctx: AtomicContext): JsonObject {
  if (f.reply) return outputsOf([{ artifactId: "reply", name: "", description: "", parts: f.reply.parts, metadata: undefined, extensions: [] }]);
  const state = f.state!;
  const said = f.statusMessage ? textOfMessage(f.statusMessage).slice(0, 500) : "";
  const details = { task_id: f.taskId, ...(f.contextId ? { context_id: f.contextId } : {}), skill: config.skill, agent: config.cardUrl, state: taskStateToJSON(state), ...(said ? { status_message: said } : {}) };
  const where = `${nameOf(ctx)}: the task ${f.taskId} of the A2A agent ${config.cardUrl} (skill ${config.skill})`;
  switch (state) {
    case TaskState.TASK_STATE_COMPLETED:
      return outputsOf([...f.artifacts.values()]);
    case TaskState.TASK_STATE_FAILED:
      throw fail("agent_task_failed", `${where} failed${said ? `: ${said}` : ""}`, { retryable: false, details });
    case TaskState.TASK_STATE_REJECTED:
      throw fail("agent_task_rejected", `${where} was rejected by the agent${said ? `: ${said}` : ""}`, { retryable: false, details });
    case TaskState.TASK_STATE_CANCELED:
      throw fail("agent_task_canceled", `${where} was canceled at the agent${said ? `: ${said}` : ""}`, { retryable: false, details });
    default:
      throw fail(
        "agent_input_required",
        `${where} stopped in ${taskStateToJSON(state)}: the agent asks for ${state === TaskState.TASK_STATE_AUTH_REQUIRED ? "credentials" : "input"} a NodeRun cannot give${said ? ` (${said})` : ""}; answer it at the agent, or send the whole input at once`,
        { retryable: false, details },
      );
  }
}
