/**
 * The A2A methods over the fabric's runs (the SDK's A2ARequestHandler, which its JSON-RPC and HTTP+JSON transports
 * call): every method reads or acts on a run through the gateway with the caller's own identity (GatewayCalls), so
 * tenants, scopes, the PDP, budgets and approvals apply as on the Run API, and nothing is kept only in memory: a task
 * is its run, and survives a restart of the fabric.
 */
import { randomUUID } from "node:crypto";
import { Message as MessageCodec, TaskState, type AgentCard, type Message, type Task, type StreamResponse, type SendMessageRequest, type ListTasksRequest, type ListTasksResponse, type TaskPushNotificationConfig, type ListTaskPushNotificationConfigsResponse } from "@a2a-js/sdk";
import type { A2ARequestHandler, ServerCallContext } from "@a2a-js/sdk/server";
import { RequestMalformedError, TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError } from "@a2a-js/sdk/errors";
import { newFaceRunId, type CallerInfo, type CatalogueSearchAnswer, type Catalogue, type GatewayCalls, type PolicyFilter } from "@nodefabric/core";
import type { NodeType, Run } from "@nodefabric/schemas";
import { PLANNER, checkInput, decisionOf, inputOf, skillOf, textOfParts } from "./message-run.js";
import { CALLER_LABEL, CONTEXT_LABEL, MESSAGE_ANNOTATION, PUSH_ANNOTATION, RUN_PREFIX, SKILL_LABEL, TASK_ID, agentMessage, dataPart, isTaskOf, startingMessage, stateOf, taskOf, textPart } from "./task-mapping.js";
import { followTask } from "./task-stream.js";
import type { PushConfigs } from "./push.js";
import type { AskTask, AskTasks } from "./ask-tasks.js";
import { SEARCH_SKILL, foundSkills, queryOf } from "./search.js";

/** Where a method finds its caller: the route puts it in the call context's state. */
export const CALLER_KEY = "nodefabric.caller";

export interface HandlerDeps {
  calls: GatewayCalls;
  catalogue: Catalogue;
  policy?: PolicyFilter;
  push: PushConfigs;
  asks: AskTasks;
  /** The public card and the caller's extended card. */
  card(caller?: CallerInfo): Promise<AgentCard>;
  /** Longest a blocking SendMessage holds (s). */
  waitSeconds: number;
  /** Whether a message naming no skill goes to the planner (when it is a skill). */
  planner: boolean;
  /** Searches the catalogue for a query, keeping what this caller may start (the `fabric.search` skill). */
  search(caller: CallerInfo, query: string, limit: number): Promise<CatalogueSearchAnswer>;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i;

export function callerOf(ctx: ServerCallContext): CallerInfo {
  const c = ctx.state.get(CALLER_KEY) as CallerInfo | undefined;
  if (!c) throw new Error("the A2A route put no caller in the call context");
  return c;
}

/** A task that asks which skill to run (ask-tasks.ts), as A2A shows it. */
function askView(t: AskTask, skills: readonly NodeType[], historyLength?: number): Task {
  const names = skills.slice(0, 25).map((n) => `${n.node_type_id}${n.description ? ` (${n.description.slice(0, 80)})` : ""}`);
  const more = skills.length > names.length ? `, and ${skills.length - names.length} more (see the Agent Card)` : "";
  const text =
    `Which skill should run? Reply to this task (or send a new message) with metadata.skillId set to a skill's id (a node_type_id, optionally @version) and its input as a data part. ` +
    `Skills: ${names.join("; ")}${more}.`;
  const canceled = t.state === "canceled";
  const completed = t.state === "completed";
  const found = completed ? ((t.answer as { skills?: unknown[] } | undefined)?.skills?.length ?? 0) : 0;
  const history = t.history.map((m) => MessageCodec.fromJSON(m));
  return {
    id: t.id,
    contextId: t.contextId,
    status: {
      state: canceled ? TaskState.TASK_STATE_CANCELED : completed ? TaskState.TASK_STATE_COMPLETED : TaskState.TASK_STATE_INPUT_REQUIRED,
      message: agentMessage(t.id, t.contextId, [textPart(canceled ? "the task was canceled" : completed ? `found ${found} skill(s): name one in metadata.skillId` : text)]),
      timestamp: t.updated,
    },
    artifacts: completed ? [{ artifactId: `${t.id}-skills`, name: "skills", description: "The skills found, best first", parts: [dataPart(t.answer)], metadata: undefined, extensions: [] }] : [],
    history: historyLength === undefined ? history : historyLength <= 0 ? [] : history.slice(-historyLength),
    metadata: undefined,
  };
}

export class FabricRequestHandler implements A2ARequestHandler {
  readonly calls: GatewayCalls;

  constructor(private readonly d: HandlerDeps) {
    this.calls = d.calls;
  }

  getAgentCard(): Promise<AgentCard> {
    return this.d.card();
  }

  async getAuthenticatedExtendedAgentCard(_params: unknown, ctx: ServerCallContext): Promise<AgentCard> {
    return this.d.card(callerOf(ctx));
  }

  /** The skills this caller may run. */
  async skills(caller: CallerInfo): Promise<NodeType[]> {
    const all = await this.d.catalogue.list();
    return this.d.policy ? this.d.policy.filter(caller, all) : all;
  }

  /** The run behind a task id, when it is a task of this caller (else TaskNotFound, never "forbidden"). */
  async runOf(caller: CallerInfo, taskId: string): Promise<Run> {
    if (typeof taskId !== "string" || taskId.trim() === "") throw new RequestMalformedError("the task id is missing");
    if (!TASK_ID.test(taskId)) throw new TaskNotFoundError(`Task not found: ${taskId.slice(0, 100)}`);
    const res = await this.d.calls.getRun(taskId, caller.headers);
    if (res.status !== 200 || !isTaskOf(res.body, caller.digest)) throw new TaskNotFoundError(`Task not found: ${taskId}`);
    return res.body;
  }

  async taskOfRun(caller: CallerInfo, run: Run, historyLength?: number): Promise<Task> {
    const pending = run.state === "running" || run.state === "queued" ? await this.d.calls.pendingApprovals(run.run_id, caller.headers) : [];
    const first = startingMessage(run, (j) => MessageCodec.fromJSON(j));
    return taskOf(run, pending, first ? [first] : [], historyLength);
  }

  private askOf(caller: CallerInfo, taskId: unknown): AskTask | undefined {
    return typeof taskId === "string" ? this.d.asks.get(caller, taskId) : undefined;
  }

  private async askViewOf(caller: CallerInfo, t: AskTask, historyLength?: number): Promise<Task> {
    return askView(t, t.state !== "input_required" ? [] : await this.skills(caller), historyLength);
  }

  /** Starts the run a message asks for, or answers the task it continues; the run is stored before this resolves. */
  private async begin(params: SendMessageRequest, caller: CallerInfo, blocking: boolean): Promise<{ task: Task; run?: Run }> {
    const message = params.message;
    if (!message || message.parts.length === 0) throw new RequestMalformedError("a message with at least one part is required");
    if (message.taskId) return this.continueTask(params, message, caller, blocking);
    const contextId = message.contextId || randomUUID();
    const skill = skillOf(message, params.metadata as Record<string, unknown> | undefined);
    if (!skill) {
      const planner = this.d.planner ? await this.d.catalogue.get(PLANNER) : undefined;
      if (!planner) {
        const t = this.d.asks.create(caller, contextId, {});
        this.d.asks.update(t, { history: [MessageCodec.toJSON({ ...message, taskId: t.id, contextId })] });
        const push = params.configuration?.taskPushNotificationConfig;
        if (push && push.url) await this.d.push.create(caller, t.id, undefined, { ...push, taskId: t.id });
        return { task: await this.askViewOf(caller, t, params.configuration?.historyLength) };
      }
      const goal = textOfParts(message.parts);
      if (goal === "") throw new RequestMalformedError("a message naming no skill is a goal for the planner: give it a text part");
      return this.startSkill(params, message, caller, contextId, newFaceRunId(RUN_PREFIX), planner, { goal }, blocking);
    }
    if (skill.id === SEARCH_SKILL) return this.searchTask(params, message, caller, contextId);
    const t = await this.nodeTypeOf(skill);
    return this.startSkill(params, message, caller, contextId, newFaceRunId(RUN_PREFIX), t, inputOf(message.parts, t), blocking);
  }

  /** A message to the search skill: a task completed at once, its artifact the skills found (search.ts). */
  private async searchTask(params: SendMessageRequest, message: Message, caller: CallerInfo, contextId: string): Promise<{ task: Task }> {
    const { query, limit } = queryOf(message.parts);
    const answer = await this.d.search(caller, query, limit);
    if (!answer.ok) throw new RequestMalformedError(`unavailable: Selection answered ${answer.status}`);
    const t = this.d.asks.create(caller, contextId, {});
    this.d.asks.update(t, { state: "completed", answer: foundSkills(answer.found), history: [MessageCodec.toJSON({ ...message, taskId: t.id, contextId })] });
    return { task: await this.askViewOf(caller, t, params.configuration?.historyLength) };
  }

  private async nodeTypeOf(skill: { id: string; version?: string }): Promise<NodeType> {
    if (!this.d.catalogue.exposes(skill.id)) throw new RequestMalformedError(`unknown skill: ${skill.id} is not a skill of this agent`);
    const t = skill.version ? await this.versionOf(skill.id, skill.version) : await this.d.catalogue.get(skill.id);
    if (!t) throw new RequestMalformedError(`unknown skill: ${skill.id}${skill.version ? `@${skill.version}` : ""} is not a skill of this agent`);
    return t;
  }

  /** Starts the run of `t` for a message (its input checked first: an invalid one starts nothing). */
  private async startSkill(params: SendMessageRequest, message: Message, caller: CallerInfo, contextId: string, runId: string, t: NodeType, input: Record<string, unknown>, blocking: boolean): Promise<{ task: Task; run?: Run }> {
    checkInput(t, input);
    if (!caller.mayRun) throw new RequestMalformedError("sending a message starts a run, and the token lacks the scope runs:write");
    const stored: Message = { ...message, taskId: runId, contextId };
    const annotations: Record<string, string> = { [MESSAGE_ANNOTATION]: JSON.stringify(MessageCodec.toJSON(stored)) };
    const push = params.configuration?.taskPushNotificationConfig;
    if (push && push.url) annotations[PUSH_ANNOTATION] = JSON.stringify([this.d.push.checked({ ...push, taskId: runId, id: push.id || "default" })]);
    // A blocking call holds briefly in the gateway (Prefer: wait), which most runs of a quick node type outlive;
    // one still going is then followed until it ends or waits for someone.
    const started = await this.d.calls.startRun(
      {
        run_id: runId,
        root_node_type_ref: { node_type_id: t.node_type_id, version: t.version },
        input,
        metadata: { labels: { [CALLER_LABEL]: caller.digest, [CONTEXT_LABEL]: contextId, [SKILL_LABEL]: t.node_type_id }, annotations },
      },
      caller,
      blocking ? Math.min(1, this.d.waitSeconds) : 0,
    );
    if (started.status >= 300) {
      const e = started.body.error ?? {};
      throw new RequestMalformedError(`${e.code ?? `http_${started.status}`}: ${e.message ?? `the Run API answered ${started.status}`}`);
    }
    if (annotations[PUSH_ANNOTATION] || this.d.push.has(caller, runId)) this.d.push.watch(caller, runId);
    return { task: await this.taskOfRun(caller, started.body), run: started.body };
  }

  private async versionOf(id: string, version: string): Promise<NodeType | undefined> {
    const latest = await this.d.catalogue.get(id);
    if (latest?.version === version) return latest;
    return latest ? { ...latest, version } : undefined;
  }

  /** A message to an existing task: a skill for a task that asked for one, or the decision on an approval. */
  private async continueTask(params: SendMessageRequest, message: Message, caller: CallerInfo, blocking: boolean): Promise<{ task: Task; run?: Run }> {
    const ask = this.askOf(caller, message.taskId);
    if (ask) {
      if (ask.state !== "input_required") throw new UnsupportedOperationError(`task ${ask.id} has ended (${ask.state})`);
      if (message.contextId && message.contextId !== ask.contextId) throw new RequestMalformedError(`task ${ask.id} belongs to context ${ask.contextId}, not ${message.contextId}`);
      const json = MessageCodec.toJSON({ ...message, taskId: ask.id, contextId: ask.contextId });
      const skill = skillOf(message, params.metadata as Record<string, unknown> | undefined);
      if (!skill) {
        this.d.asks.update(ask, { history: [...ask.history, json] });
        return { task: await this.askViewOf(caller, ask, params.configuration?.historyLength) };
      }
      // The skill named: the task becomes its run, under the same id.
      const t = await this.nodeTypeOf(skill);
      const started = await this.startSkill(params, message, caller, ask.contextId, ask.id, t, inputOf(message.parts, t), blocking);
      this.d.asks.remove(ask);
      return started;
    }
    const run = await this.runOf(caller, message.taskId);
    const pending = run.state === "running" || run.state === "queued" ? await this.d.calls.pendingApprovals(run.run_id, caller.headers) : [];
    if (stateOf(run, pending.length) !== TaskState.TASK_STATE_INPUT_REQUIRED) {
      throw new UnsupportedOperationError(`task ${run.run_id} is ${run.state} and waits for no input`);
    }
    const decision = decisionOf(message.parts);
    if (!decision) throw new RequestMalformedError(`task ${run.run_id} waits for an approval: send a data part {"decision":"approve"} or {"decision":"reject"}`);
    for (const a of pending) {
      const res = await this.d.calls.decideApproval(a.approval_id, decision.decision, caller.headers, decision.reason);
      if (res.status >= 300) {
        const e = res.body?.error ?? {};
        throw new RequestMalformedError(`${e.code ?? `http_${res.status}`}: ${e.message ?? `the approvals API answered ${res.status}`}`);
      }
    }
    const after = await this.runOf(caller, run.run_id);
    return { task: await this.taskOfRun(caller, after), run: after };
  }

  async sendMessage(params: SendMessageRequest, ctx: ServerCallContext): Promise<Message | Task> {
    const caller = callerOf(ctx);
    const blocking = params.configuration?.returnImmediately !== true;
    const { task, run } = await this.begin(params, caller, blocking);
    const history = params.configuration?.historyLength;
    if (!run || !blocking) return trim(task, history);
    // Blocking: follow the run until it ends or waits for someone.
    let last = task;
    const ac = new AbortController();
    for await (const ev of followTask(this, caller, run.run_id, last, ac.signal, { skipSnapshot: true })) {
      if (ev.payload?.$case === "task") last = ev.payload.value;
    }
    return trim(last, history);
  }

  async *sendMessageStream(params: SendMessageRequest, ctx: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const caller = callerOf(ctx);
    const { task, run } = await this.begin(params, caller, false);
    yield { payload: { $case: "task", value: task } };
    if (!run) return;
    const ac = new AbortController();
    try {
      yield* followTask(this, caller, run.run_id, task, ac.signal, { skipSnapshot: true, events: true });
    } finally {
      ac.abort();
    }
  }

  async getTask(params: { id: string; historyLength?: number }, ctx: ServerCallContext): Promise<Task> {
    const caller = callerOf(ctx);
    if (params.historyLength !== undefined && params.historyLength < 0) throw new RequestMalformedError("historyLength must not be negative");
    const ask = this.askOf(caller, params.id);
    if (ask) return this.askViewOf(caller, ask, params.historyLength);
    return this.taskOfRun(caller, await this.runOf(caller, params.id), params.historyLength);
  }

  async listTasks(params: ListTasksRequest, ctx: ServerCallContext): Promise<ListTasksResponse> {
    const caller = callerOf(ctx);
    const pageSize = params.pageSize ?? 50;
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100) throw new RequestMalformedError("pageSize must be an integer from 1 to 100");
    if (params.historyLength !== undefined && params.historyLength < 0) throw new RequestMalformedError("historyLength must not be negative");
    if ((params.status as number) < 0) throw new RequestMalformedError("status is not a task state");
    if (params.statusTimestampAfter && (!RFC3339.test(params.statusTimestampAfter) || Number.isNaN(Date.parse(params.statusTimestampAfter)))) throw new RequestMalformedError("statusTimestampAfter is not an RFC 3339 timestamp");
    const wanted = params.status ? params.status : undefined;
    const historyLength = params.historyLength ?? 0;
    const tasks: Task[] = [];
    // The tasks that ask for a skill come first, on the first page.
    if (!params.pageToken) {
      for (const a of this.d.asks.list(caller)) {
        if (params.contextId && a.contextId !== params.contextId) continue;
        if (params.statusTimestampAfter && a.updated <= new Date(params.statusTimestampAfter).toISOString()) continue;
        const task = await this.askViewOf(caller, a, historyLength);
        if (wanted !== undefined && task.status?.state !== wanted) continue;
        tasks.push(task);
        if (tasks.length >= pageSize) return { tasks, nextPageToken: "", pageSize: tasks.length, totalSize: tasks.length };
      }
    }
    const query: Record<string, string> = { limit: String(Math.min(1000, pageSize * 4)) };
    if (params.pageToken) query.page_token = params.pageToken;
    if (params.statusTimestampAfter) query.created_after = new Date(params.statusTimestampAfter).toISOString();
    const res = await this.d.calls.listRuns(query, caller.headers);
    if (res.status !== 200) throw new RequestMalformedError(`invalid page token or filter: ${res.body?.error?.message ?? res.status}`);
    for (const run of res.body as Run[]) {
      if (!isTaskOf(run, caller.digest)) continue;
      if (params.contextId && (run.extensions?.["nodefabric.metadata"] as { labels?: Record<string, string> } | undefined)?.labels?.[CONTEXT_LABEL] !== params.contextId) continue;
      const task = await this.taskOfRun(caller, run, historyLength);
      if (wanted !== undefined && task.status?.state !== wanted) continue;
      if (params.includeArtifacts !== true) task.artifacts = [];
      tasks.push(task);
      if (tasks.length >= pageSize) break;
    }
    const next = res.headers["x-next-page-token"];
    return { tasks, nextPageToken: typeof next === "string" ? next : "", pageSize: tasks.length, totalSize: tasks.length };
  }

  async cancelTask(params: { id: string }, ctx: ServerCallContext): Promise<Task> {
    const caller = callerOf(ctx);
    const ask = this.askOf(caller, params.id);
    if (ask) {
      if (ask.state !== "input_required") throw new TaskNotCancelableError(`task ${ask.id} has already ended (${ask.state})`);
      return this.askViewOf(caller, this.d.asks.update(ask, { state: "canceled" }));
    }
    const run = await this.runOf(caller, params.id);
    if (run.state === "completed" || run.state === "failed" || run.state === "canceled") throw new TaskNotCancelableError(`task ${run.run_id} has already ended (${run.state})`);
    const res = await this.d.calls.cancelRun(run.run_id, caller.headers);
    if (res.status >= 300) {
      if (res.status === 409) throw new TaskNotCancelableError(`task ${run.run_id} cannot be canceled now`);
      throw new RequestMalformedError(`${res.body?.error?.code ?? res.status}: ${res.body?.error?.message ?? "the run could not be canceled"}`);
    }
    // The cancel is recorded at once; its end may follow a moment later.
    let after = res.body as Run;
    for (let i = 0; i < 50 && after.state !== "canceled" && after.state !== "completed" && after.state !== "failed"; i++) {
      await new Promise((r) => setTimeout(r, 40));
      after = await this.runOf(caller, run.run_id);
    }
    return this.taskOfRun(caller, after);
  }

  async *resubscribe(params: { id: string }, ctx: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const caller = callerOf(ctx);
    const since = Date.now();
    const ask = this.askOf(caller, params.id);
    if (ask) {
      if (ask.state !== "input_required") throw new UnsupportedOperationError(`task ${ask.id} has ended (${ask.state}): read it with GetTask`);
      // It waits for the client's next message; nothing happens to it until then.
      yield { payload: { $case: "task", value: await this.askViewOf(caller, ask) } };
      return;
    }
    const run = await this.runOf(caller, params.id);
    const task = await this.taskOfRun(caller, run);
    if (run.state === "completed" || run.state === "failed" || run.state === "canceled") throw new UnsupportedOperationError(`task ${run.run_id} has ended (${run.state}): read it with GetTask`);
    const ac = new AbortController();
    try {
      yield* followTask(this, caller, run.run_id, task, ac.signal, { events: true, since });
    } finally {
      ac.abort();
    }
  }

  /** The run of a task for its push configs, or undefined for a task that asks for a skill (TaskNotFound for neither). */
  private async pushTarget(caller: CallerInfo, taskId: string): Promise<Run | undefined> {
    if (this.askOf(caller, taskId)) return undefined;
    return this.runOf(caller, taskId);
  }

  async createTaskPushNotificationConfig(params: TaskPushNotificationConfig, ctx: ServerCallContext): Promise<TaskPushNotificationConfig> {
    const caller = callerOf(ctx);
    return this.d.push.create(caller, params.taskId, await this.pushTarget(caller, params.taskId), params);
  }

  async getTaskPushNotificationConfig(params: { taskId: string; id: string }, ctx: ServerCallContext): Promise<TaskPushNotificationConfig> {
    const caller = callerOf(ctx);
    return this.d.push.get(caller, params.taskId, await this.pushTarget(caller, params.taskId), params.id);
  }

  async listTaskPushNotificationConfigs(params: { taskId: string }, ctx: ServerCallContext): Promise<ListTaskPushNotificationConfigsResponse> {
    const caller = callerOf(ctx);
    return this.d.push.list(caller, params.taskId, await this.pushTarget(caller, params.taskId));
  }

  async deleteTaskPushNotificationConfig(params: { taskId: string; id: string }, ctx: ServerCallContext): Promise<void> {
    const caller = callerOf(ctx);
    await this.pushTarget(caller, params.taskId);
    this.d.push.delete(caller, params.taskId, params.id);
  }
}

function trim(task: Task, historyLength: number | undefined): Task {
  if (historyLength === undefined) return task;
  return { ...task, history: historyLength <= 0 ? [] : task.history.slice(-historyLength) };
}
