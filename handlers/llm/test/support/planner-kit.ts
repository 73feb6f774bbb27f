/**
 * What the planner's tests share: the node types a plan runs (each records when it started), and a scripted model
 * that answers by the planner's purpose (the schema name) and what the prompt holds.
 */
import { defineAtomic, HandlerError } from "@nodefabric/sdk";
import type { ChatRequestBody, StandInStep } from "@nodefabric/sdk/testing";

export type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

export const started: Record<string, number[]> = {};

/**
 * Side by side, without reading a clock: the node types named here wait (up to 20 s) at their start until all of them
 * have started, and `together()` then says whether they met. Run one after the other, the first waits out the 20 s
 * alone and they did not. Set before a run with `expectTogether`; cleared by `resetTogether`.
 */
let meeting: { ids: Set<string>; arrived: Set<string>; met: boolean; open: () => void; opened: Promise<void> } | undefined;
export function expectTogether(ids: string[]): void {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  meeting = { ids: new Set(ids), arrived: new Set(), met: false, open, opened };
}
export function together(): boolean {
  return meeting?.met ?? false;
}
export function resetTogether(): void {
  meeting = undefined;
}
async function meet(id: string): Promise<void> {
  const m = meeting;
  if (!m || !m.ids.has(id)) return;
  m.arrived.add(id);
  if (m.arrived.size === m.ids.size) {
    m.met = true;
    m.open();
  }
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([m.opened, new Promise<void>((r) => (timer = setTimeout(r, 20_000)))]);
  clearTimeout(timer);
}
function tool(id: string, side: "read" | "write" | "irreversible", props: Record<string, unknown>, description: string, run: (i: Json) => Json, delayMs = 0) {
  return defineAtomic<Json, Json>({
    nodeType: {
      node_type_id: id,
      version: "1.0.0",
      description,
      input_schema: { type: "object", properties: props, required: Object.keys(props), additionalProperties: false },
      output_schema: { type: "object" },
      constraints: { gates: { side_effect_class: side } },
    },
    async handler(inputs) {
      (started[id] ??= []).push(Date.now());
      await meet(id);
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      return run(inputs);
    },
  });
}

export const weather = tool("test.weather", "read", { city: { type: "string", minLength: 1 } }, "Current weather in a city: temperature in celsius", (i) => ({ temp_c: i.city.length }), 300);
export const fx = tool("test.fx", "read", { from: { type: "string" }, to: { type: "string" } }, "Exchange rate between two currencies", () => ({ rate: 1.1 }), 300);
export const report = tool("test.report", "write", { text: { type: "string" } }, "Write a report from a text", (i) => ({ chars: i.text.length }));
export const broken = defineAtomic<Json, Json>({
  nodeType: {
    node_type_id: "test.broken",
    version: "1.0.0",
    description: "Deliver a text, but always fails",
    input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"], additionalProperties: false },
    output_schema: { type: "object" },
    constraints: { gates: { side_effect_class: "read" } },
  },
  handler() {
    throw new HandlerError("broken", "this tool always fails", { retryable: false });
  },
});
let flakyCalls = 0;
/** Makes test.flaky fail its next call again. */
export function resetFlaky(): void {
  flakyCalls = 0;
}
export const flaky = defineAtomic<Json, Json>({
  nodeType: {
    node_type_id: "test.flaky",
    version: "1.0.0",
    description: "Deliver a text; fails the first time",
    input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"], additionalProperties: false },
    output_schema: { type: "object" },
    constraints: { gates: { side_effect_class: "read" } },
  },
  handler() {
    if (flakyCalls++ === 0) throw new HandlerError("flaky", "failed the first time", { retryable: false });
    return { delivered: true };
  },
});
export const pay = tool("test.pay", "irreversible", { amount: { type: "number" } }, "Send a payment of an amount", () => ({ sent: true }));

export const TOOLS = ["test.weather", "test.fx", "test.report"];
export const PLAN3 = {
  subtasks: [
    { id: "w", goal: "current weather in Oslo", after: [] },
    { id: "x", goal: "exchange rate EUR to NOK", after: [] },
    { id: "r", goal: "write a report of weather and rate", after: ["w", "x"] },
  ],
};

/** What the scripted model answers, by the planner's purpose (the schema name) and what the prompt holds. */
export function brain(overrides: Partial<Record<string, (body: ChatRequestBody, first: Json) => StandInStep | undefined>> = {}) {
  return (body: ChatRequestBody): StandInStep | undefined => {
    const name = body.response_format?.json_schema?.name ?? body.tools?.[0]?.function.name;
    const firstUser = (body.messages ?? []).find((m) => m.role === "user");
    let first: Json = {};
    try {
      first = JSON.parse(String(firstUser?.content ?? "{}"));
    } catch {
      /* not JSON */
    }
    const o = overrides[name ?? ""]?.(body, first);
    if (o) return o;
    switch (name) {
      case "plan":
        return { content: PLAN3 };
      case "choose": {
        const id = first.subtask.id as string;
        return { content: { choice: { w: "test.weather@1.0.0", x: "test.fx@1.0.0", r: "test.report@1.0.0" }[id] ?? first.tools[0].name, reason: "fits" } };
      }
      case "inputs": {
        const sys = String(body.messages?.[0]?.content ?? "");
        if (sys.includes("test.weather")) return { content: { city: "Oslo" } };
        if (sys.includes("test.fx")) return { content: { from: "EUR", to: "NOK" } };
        if (sys.includes("test.report")) return { content: { text: JSON.stringify(first.earlier_results) } };
        return { content: {} };
      }
      case "evaluate":
        return { content: { summary: "Oslo is mild and the rate is 1.1.", success: true, recovery: [] } };
    }
    return undefined;
  };
}
