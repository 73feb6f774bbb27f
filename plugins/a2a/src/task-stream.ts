/**
 * A task's updates as A2A stream responses, from its run's events read through the gateway (GET /v1/runs/{id}/events,
 * followed, with the caller's identity): a handler's progress and a NodeRun's steps as WORKING status updates, an
 * approval asked for as INPUT_REQUIRED, the end as the outputs' artifact and the final status. Everything comes from
 * the run, so a stream opened after a restart of the fabric picks the run up where it is.
 */
import { TaskState, type StreamResponse, type Task } from "@a2a-js/sdk";
import type { CallerInfo } from "@nodefabric/core";
import type { Run, RunEvent } from "@nodefabric/schemas";
import { agentMessage, isFinal, isTerminal, progressText, textPart } from "./task-mapping.js";

/** What the stream needs of the request handler: the run of a task, and the task a run is. */
export interface TaskReader {
  runOf(caller: CallerInfo, taskId: string): Promise<Run>;
  taskOfRun(caller: CallerInfo, run: Run): Promise<Task>;
  readonly calls: { followEvents(runId: string, caller: Record<string, string>, afterSeq: number | undefined, onEvent: (e: RunEvent) => void, signal: AbortSignal): Promise<void> };
}

export interface FollowOptions {
  /** The snapshot was sent already (SendStreamingMessage sends its task first). */
  skipSnapshot?: boolean;
  /** Send status and artifact updates (a stream); without, only the task at the end (a blocking send). */
  events?: boolean;
  /** Events before this instant (ms) are in the snapshot already (SubscribeToTask); 0: none are. */
  since?: number;
}

/** Events into an async queue, since the gateway's follow calls back. */
function eventQueue(reader: TaskReader, caller: CallerInfo, runId: string, afterSeq: number | undefined, signal: AbortSignal) {
  const queue: RunEvent[] = [];
  let done = false;
  let wake: (() => void) | undefined;
  const finished = reader.calls
    .followEvents(runId, caller.headers, afterSeq, (e) => {
      queue.push(e);
      wake?.();
    }, signal)
    .finally(() => {
      done = true;
      wake?.();
    });
  return {
    async *[Symbol.asyncIterator](): AsyncGenerator<RunEvent> {
      for (;;) {
        while (queue.length > 0) yield queue.shift()!;
        if (done) break;
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
      }
      await finished;
    },
  };
}

const status = (task: Task, state: TaskState, text?: string): StreamResponse => ({
  payload: {
    $case: "statusUpdate",
    value: {
      taskId: task.id,
      contextId: task.contextId,
      status: text !== undefined ? { state, message: agentMessage(task.id, task.contextId, [textPart(text)], `${task.id}-${Date.now()}`), timestamp: new Date().toISOString() } : { ...task.status!, state },
      metadata: undefined,
    },
  },
});

/**
 * Follows a task until it ends, or waits for someone (INPUT_REQUIRED) in a state it did not start in, or `signal`
 * aborts. Yields the snapshot first (unless skipped), then updates; a blocking send reads the last `task` payload.
 */
export async function* followTask(reader: TaskReader, caller: CallerInfo, runId: string, snapshot: Task, signal: AbortSignal, o: FollowOptions = {}): AsyncGenerator<StreamResponse> {
  const since = o.since ?? 0;
  const startState = snapshot.status?.state ?? TaskState.TASK_STATE_SUBMITTED;
  let current = snapshot;
  if (!o.skipSnapshot) yield { payload: { $case: "task", value: snapshot } };
  const settle = async function* (task: Task): AsyncGenerator<StreamResponse, boolean> {
    const state = task.status?.state ?? TaskState.TASK_STATE_WORKING;
    const changed = state !== current.status?.state;
    current = task;
    if (isTerminal(state)) {
      if (o.events) {
        for (const artifact of task.artifacts) yield { payload: { $case: "artifactUpdate", value: { taskId: task.id, contextId: task.contextId, artifact, append: false, lastChunk: true, metadata: undefined } } };
        yield status(task, state);
      } else yield { payload: { $case: "task", value: task } };
      return true;
    }
    if (state === TaskState.TASK_STATE_INPUT_REQUIRED && (changed || startState !== state)) {
      if (o.events) yield status(task, state);
      else yield { payload: { $case: "task", value: task } };
      return true;
    }
    if (changed && o.events) yield status(task, state);
    return false;
  };
  // A send's task that already ended or waits for someone is its whole answer; a subscriber to a waiting task waits on.
  if (isTerminal(startState) || (isFinal(startState) && o.skipSnapshot)) return;
  let lastSeq: number | undefined;
  for (let round = 0; round < 10_000 && !signal.aborted; round++) {
    let ended = false;
    for await (const e of eventQueue(reader, caller, runId, lastSeq, signal)) {
      lastSeq = e.seq;
      // A subscriber opened mid-run gets the run as it is (the snapshot), then what happens from then on.
      if (since > 0 && Date.parse(e.time) < since) continue;
      if (e.type === "run_completed" || e.type === "approval_requested" || e.type === "approval_resolved" || (e.type === "run_started" && current.status?.state === TaskState.TASK_STATE_SUBMITTED)) {
        const task = await reader.taskOfRun(caller, await reader.runOf(caller, runId));
        if (yield* settle(task)) return;
        if (e.type === "run_completed") ended = true;
        continue;
      }
      const text = o.events ? progressText(e) : undefined;
      if (text !== undefined) {
        if (current.status?.state === TaskState.TASK_STATE_SUBMITTED) current = { ...current, status: { ...current.status!, state: TaskState.TASK_STATE_WORKING } };
        yield status(current, current.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED ? TaskState.TASK_STATE_INPUT_REQUIRED : TaskState.TASK_STATE_WORKING, text);
      }
    }
    if (signal.aborted) return;
    // The events stream closed (the run's end, or the gateway going away): the run says where it is.
    const task = await reader.taskOfRun(caller, await reader.runOf(caller, runId));
    if (yield* settle(task)) return;
    if (ended) return;
    await new Promise((r) => setTimeout(r, 200));
  }
}
