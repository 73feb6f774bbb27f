/**
 * Push notifications: a task's updates POSTed to the URL its client gave, as the stream would carry them.
 *
 * - Configs are kept durably: one given with SendMessage rides on the run (an annotation, written with the run), one
 *   created later is written to `a2a-push-configs.json` in the fabric's data folder, keyed by the caller's digest
 *   and the task, so only that caller lists, reads or deletes it.
 * - Delivery goes through the executor's egress policy (`executor.egress`: no loopback, private or metadata address
 *   unless the operator allows it), carries the client's token (`X-A2A-Notification-Token`) or credentials
 *   (`Authorization`), and is retried with backoff. What is sent is read with the task owner's identity, so it never
 *   holds another tenant's data.
 */
import fs from "node:fs";
import path from "node:path";
import { StreamResponse as StreamCodec, TaskState, type Task, type TaskPushNotificationConfig, type StreamResponse, type ListTaskPushNotificationConfigsResponse } from "@a2a-js/sdk";
import { RequestMalformedError, TaskNotFoundError } from "@a2a-js/sdk/errors";
import { EgressPolicy, egressFetch, type CallerInfo } from "@nodefabric/core";
import type { Run } from "@nodefabric/schemas";
import { PUSH_ANNOTATION, isTerminal, metadataOf } from "./task-mapping.js";
import { followTask, type TaskReader } from "./task-stream.js";

interface Stored {
  owner: string;
  taskId: string;
  config: TaskPushNotificationConfig;
}

export interface PushOptions {
  egress?: { allowPrivate?: boolean; allowCidrs?: readonly string[]; allowHosts?: readonly string[] };
  /** Where configs created after the message are kept; none: the process's memory only. */
  dataDir?: string;
  log?: { warn(o: unknown, msg: string): void };
  /** Attempts per notification (the first and its retries). */
  attempts?: number;
  /** The first retry's delay (ms); each next one doubles. */
  backoffMs?: number;
}

const MAX_CONFIGS_PER_TASK = 10;

/** The updates that tell an ended task's end: its artifacts, then its final status. */
async function* endOf(task: Task): AsyncGenerator<StreamResponse> {
  for (const artifact of task.artifacts) yield { payload: { $case: "artifactUpdate", value: { taskId: task.id, contextId: task.contextId, artifact, append: false, lastChunk: true, metadata: undefined } } };
  yield { payload: { $case: "statusUpdate", value: { taskId: task.id, contextId: task.contextId, status: task.status, metadata: undefined } } };
}

export class PushConfigs {
  private readonly file: string | undefined;
  private stored: Stored[] | undefined;
  private readonly watching = new Set<string>();
  private egress: ReturnType<typeof egressFetch> | undefined;
  private reader: TaskReader | undefined;

  constructor(private readonly o: PushOptions) {
    this.file = o.dataDir ? path.join(o.dataDir, "a2a-push-configs.json") : undefined;
  }

  async close(): Promise<void> {
    await this.egress?.close();
  }

  /** Where deliveries read their tasks (the request handler, once it exists). */
  attach(reader: TaskReader): void {
    this.reader = reader;
  }

  /** A config as given, checked: an http(s) URL, and at most a few per task. */
  checked(c: TaskPushNotificationConfig): TaskPushNotificationConfig {
    let url: URL;
    try {
      url = new URL(c.url);
    } catch {
      throw new RequestMalformedError("the push notification url is not a URL");
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new RequestMalformedError("the push notification url must be http or https");
    if (c.url.length > 2000 || (c.token ?? "").length > 4000) throw new RequestMalformedError("the push notification config is too large");
    return { tenant: c.tenant ?? "", id: c.id || "default", taskId: c.taskId, url: c.url, token: c.token ?? "", authentication: c.authentication };
  }

  private load(): Stored[] {
    if (this.stored) return this.stored;
    this.stored = [];
    if (this.file && fs.existsSync(this.file)) {
      try {
        this.stored = JSON.parse(fs.readFileSync(this.file, "utf8")) as Stored[];
      } catch {
        this.stored = [];
      }
    }
    return this.stored;
  }

  private save(): void {
    if (!this.file) return;
    const tmp = `${this.file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(this.stored ?? []), { mode: 0o600 });
    fs.renameSync(tmp, this.file);
  }

  /** The task's configs: the one its message gave (on the run), and those created since (this caller's only). */
  private configsOf(taskId: string, run: Run | undefined, owner: string): TaskPushNotificationConfig[] {
    const out: TaskPushNotificationConfig[] = [];
    const given = run ? metadataOf(run).annotations[PUSH_ANNOTATION] : undefined;
    if (given) {
      try {
        out.push(...(JSON.parse(given) as TaskPushNotificationConfig[]));
      } catch {
        // an annotation that does not parse holds no config
      }
    }
    for (const s of this.load()) if (s.owner === owner && s.taskId === taskId && !out.some((c) => c.id === s.config.id)) out.push(s.config);
    return out;
  }

  /** Whether configs were created for this task (a task that asked for a skill, now running one). */
  has(caller: CallerInfo, taskId: string): boolean {
    return this.load().some((s) => s.owner === caller.digest && s.taskId === taskId);
  }

  /** Keeps a config of the caller's task (`run`: the task's run, when it is one; it is then followed). */
  async create(caller: CallerInfo, taskId: string, run: Run | undefined, params: TaskPushNotificationConfig): Promise<TaskPushNotificationConfig> {
    const config = this.checked({ ...params, taskId });
    const stored = this.load().filter((s) => !(s.owner === caller.digest && s.taskId === taskId && s.config.id === config.id));
    if (stored.filter((s) => s.owner === caller.digest && s.taskId === taskId).length >= MAX_CONFIGS_PER_TASK) throw new RequestMalformedError(`a task has at most ${MAX_CONFIGS_PER_TASK} push notification configs`);
    stored.push({ owner: caller.digest, taskId, config });
    this.stored = stored;
    this.save();
    if (run && (run.state === "queued" || run.state === "running")) this.watch(caller, taskId);
    return config;
  }

  async get(caller: CallerInfo, taskId: string, run: Run | undefined, id: string): Promise<TaskPushNotificationConfig> {
    const c = this.configsOf(taskId, run, caller.digest).find((x) => x.id === (id || "default"));
    if (!c) throw new TaskNotFoundError(`no push notification config ${id} on task ${taskId}`);
    return c;
  }

  async list(caller: CallerInfo, taskId: string, run: Run | undefined): Promise<ListTaskPushNotificationConfigsResponse> {
    return { configs: this.configsOf(taskId, run, caller.digest), nextPageToken: "" };
  }

  delete(caller: CallerInfo, taskId: string, id: string): void {
    this.stored = this.load().filter((s) => !(s.owner === caller.digest && s.taskId === taskId && s.config.id === id));
    this.save();
  }

  /** Follows the task with its owner's identity and sends each update to its configs, until it ends. */
  watch(caller: CallerInfo, taskId: string): void {
    const reader = this.reader;
    if (!reader || this.watching.has(taskId)) return;
    this.watching.add(taskId);
    void (async () => {
      try {
        const run = await reader.runOf(caller, taskId);
        const task = await reader.taskOfRun(caller, run);
        const ac = new AbortController();
        // A task that ended before anyone watched (a blocking send of a quick run) still tells its end.
        const updates = isTerminal(task.status?.state ?? TaskState.TASK_STATE_WORKING) ? endOf(task) : followTask(reader, caller, taskId, task, ac.signal, { events: true, skipSnapshot: true });
        for await (const update of updates) {
          const now = await reader.runOf(caller, taskId);
          await Promise.all(this.configsOf(taskId, now, caller.digest).map((c) => this.deliver(c, update)));
        }
      } catch (err) {
        this.o.log?.warn({ err, taskId }, "a2a: push notifications for a task stopped");
      } finally {
        this.watching.delete(taskId);
      }
    })();
  }

  private async deliver(c: TaskPushNotificationConfig, update: StreamResponse): Promise<void> {
    this.egress ??= egressFetch(new EgressPolicy({ allowPrivate: this.o.egress?.allowPrivate, allowCidrs: this.o.egress?.allowCidrs, allowHosts: this.o.egress?.allowHosts }));
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (c.token) headers["x-a2a-notification-token"] = c.token;
    if (c.authentication?.scheme && c.authentication.credentials) headers.authorization = `${c.authentication.scheme} ${c.authentication.credentials}`;
    const body = JSON.stringify(StreamCodec.toJSON(update));
    const attempts = this.o.attempts ?? 4;
    let delay = this.o.backoffMs ?? 500;
    for (let i = 0; i < attempts; i++) {
      try {
        const res = await this.egress.fetch(c.url, { method: "POST", headers, body, signal: AbortSignal.timeout(10_000) });
        await res.text().catch(() => undefined);
        if (res.status < 300) return;
        if (res.status < 500 && res.status !== 408 && res.status !== 429) break;
      } catch (err) {
        if ((err as { cause?: { name?: string } }).cause?.name === "EgressDeniedError" || (err as Error).name === "EgressDeniedError") {
          this.o.log?.warn({ url: c.url }, "a2a: a push notification URL is not allowed by the egress policy");
          return;
        }
      }
      if (i + 1 < attempts) await new Promise((r) => setTimeout(r, delay));
      delay *= 2;
    }
    this.o.log?.warn({ url: c.url, taskId: c.taskId }, "a2a: a push notification could not be delivered");
  }
}
