/**
 * An A2A task is a durable run: `fabric dev` (which loads the A2A server by default) takes a message, the process is
 * killed with SIGKILL while the task runs, and after the restart GetTask and SubscribeToTask, with the official
 * client, see the same task through to its end, with its outputs.
 */
import { describe, it, expect, afterAll } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Role, TaskState, type Task } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";
import { freePortBase, startFabricProcess, type FabricProcess } from "./fabric-cli.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));

async function eventually<T>(read: () => Promise<T | undefined>, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await read().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe("an A2A task across a kill -9 of the fabric", () => {
  let fabric: FabricProcess | undefined;
  afterAll(async () => {
    await fabric?.stop("SIGKILL");
  });

  it("GetTask and SubscribeToTask after the restart see the task through to its end", async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-a2a-crash-"));
    const base = await freePortBase();
    const args = ["dev", "--port-base", String(base), "--data-dir", dataDir];
    fabric = await startFabricProcess(args, { cwd: repo });
    const gw = fabric.urls["run-gateway"]!;
    // The banner names the card (its line may come a moment after the services').
    await eventually(async () => (fabric!.output().includes(`a2a: ${gw}/.well-known/agent-card.json`) ? true : undefined), 10_000, "the banner's a2a line");
    const client = await eventually(async () => {
      const c = await new ClientFactory().createFromUrl(gw);
      const card = await c.getAgentCard();
      return card.skills.some((s) => s.id === "demo.sleep") ? c : undefined;
    }, 30_000, "the card listing demo.sleep");

    const message = { messageId: "m-crash", contextId: "", taskId: "", role: Role.ROLE_USER, parts: [{ content: { $case: "data" as const, value: { ms: 6000, value: "survived" } }, metadata: undefined, filename: "", mediaType: "" }], metadata: { skillId: "demo.sleep" }, extensions: [], referenceTaskIds: [] };
    const task = (await client.sendMessage({ tenant: "", message, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true }, metadata: undefined })) as Task;
    await eventually(async () => ((await client.getTask({ tenant: "", id: task.id, historyLength: undefined })).status?.state === TaskState.TASK_STATE_WORKING ? true : undefined), 30_000, "the task working");

    expect(await fabric.stop("SIGKILL")).toBe(null);
    fabric = await startFabricProcess(args, { cwd: repo });
    expect(fabric.urls["run-gateway"]).toBe(gw);
    const after = await eventually(async () => new ClientFactory().createFromUrl(gw), 30_000, "the card after the restart");

    // The task is there after the restart, as it was (not ended, or already ended by the recovered run).
    const seen = await after.getTask({ tenant: "", id: task.id, historyLength: undefined });
    expect(seen.id).toBe(task.id);
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]).toContain(seen.status?.state);
    if (seen.status?.state !== TaskState.TASK_STATE_COMPLETED) {
      const states: TaskState[] = [];
      try {
        for await (const e of after.resubscribeTask({ tenant: "", id: task.id })) {
          if (e.payload?.$case === "statusUpdate") states.push(e.payload.value.status!.state);
        }
        expect(states.at(-1)).toBe(TaskState.TASK_STATE_COMPLETED);
      } catch (err) {
        // It ended between GetTask and the subscription: A2A answers that a finished task cannot be subscribed to.
        const e = err as Error & { cause?: Error };
        expect(e.cause?.name ?? e.name).toBe("UnsupportedOperationError");
      }
    }
    const done = await eventually(async () => {
      const t = await after.getTask({ tenant: "", id: task.id, historyLength: undefined });
      return t.status?.state === TaskState.TASK_STATE_COMPLETED ? t : undefined;
    }, 60_000, "the task completed");
    expect(done.artifacts[0]!.parts[0]!.content).toEqual({ $case: "data", value: { slept_ms: 6000, value: "survived" } });
    expect(done.history[0]!.messageId).toBe("m-crash");
  }, 180_000);
});
