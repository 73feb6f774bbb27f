/**
 * The tasks that ask which skill to run: a message naming no skill, on a fabric without a model, is a task in
 * INPUT_REQUIRED that runs nothing yet. It is kept durably in `a2a-ask-tasks.json` in the fabric's data folder (by
 * its caller), so it is listed, read with its history, continued, canceled and given push configs like any task.
 * A reply naming a skill turns it into a run whose id is the task's id, and it leaves this file: the run is the task
 * from then on. A search (search.ts) is kept here too, as a task COMPLETED at once with its answer.
 */
import fs from "node:fs";
import path from "node:path";
import { createHash, randomBytes } from "node:crypto";
import type { CallerInfo } from "@nodefabric/core";

export interface AskTask {
  id: string;
  owner: string;
  contextId: string;
  state: "input_required" | "canceled" | "completed";
  /** A completed search's answer (the artifact's data part). */
  answer?: unknown;
  /** The messages sent to it (A2A 1.0 JSON). */
  history: unknown[];
  created: string;
  updated: string;
}

/** Most ask tasks kept; past it the oldest go first. */
const MAX = 5000;
export const ASK_ID = /^a2a-ask-[0-9a-f]{32}$/;

export const ownerOf = (caller: CallerInfo): string => createHash("sha256").update(caller.digest).digest("hex").slice(0, 16);

export class AskTasks {
  private readonly file: string | undefined;
  private tasks: AskTask[] | undefined;

  constructor(dataDir: string | undefined) {
    this.file = dataDir ? path.join(dataDir, "a2a-ask-tasks.json") : undefined;
  }

  private load(): AskTask[] {
    if (this.tasks) return this.tasks;
    this.tasks = [];
    if (this.file && fs.existsSync(this.file)) {
      try {
        this.tasks = JSON.parse(fs.readFileSync(this.file, "utf8")) as AskTask[];
      } catch {
        this.tasks = [];
      }
    }
    return this.tasks;
  }

  private save(): void {
    if (!this.file) return;
    const tmp = `${this.file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(this.tasks ?? []), { mode: 0o600 });
    fs.renameSync(tmp, this.file);
  }

  create(caller: CallerInfo, contextId: string, message: unknown): AskTask {
    const now = new Date().toISOString();
    const t: AskTask = { id: `a2a-ask-${ownerOf(caller)}${randomBytes(8).toString("hex")}`, owner: caller.digest, contextId, state: "input_required", history: [message], created: now, updated: now };
    const all = this.load();
    all.push(t);
    if (all.length > MAX) all.splice(0, all.length - MAX);
    this.save();
    return t;
  }

  /** The caller's ask task of this id. */
  get(caller: CallerInfo, id: string): AskTask | undefined {
    if (!ASK_ID.test(id)) return undefined;
    return this.load().find((t) => t.id === id && t.owner === caller.digest);
  }

  list(caller: CallerInfo): AskTask[] {
    return this.load()
      .filter((t) => t.owner === caller.digest)
      .reverse();
  }

  update(t: AskTask, change: Partial<Pick<AskTask, "state" | "history" | "answer">>): AskTask {
    Object.assign(t, change, { updated: new Date().toISOString() });
    this.save();
    return t;
  }

  /** The task became a run (of the same id): the run holds it from now on. */
  remove(t: AskTask): void {
    this.tasks = this.load().filter((x) => x.id !== t.id);
    this.save();
  }
}
