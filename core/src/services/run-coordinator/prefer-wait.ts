/**
 * `Prefer: wait=<seconds>` (RFC 7240) on POST /v1/runs: hold the answer until the run ends or the wait runs out.
 */
import type { Run } from "@nodefabric/schemas";
import type { RunEngine } from "../../engine/run-engine.js";
import type { RunStore } from "../../store/run-store.js";

export const MAX_WAIT_SECONDS = 60;

/** The honoured wait in seconds (capped at 60), or undefined when the header asks for none. */
export function parsePreferWait(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  const text = Array.isArray(header) ? header.join(",") : header;
  for (const pref of text.split(",")) {
    const m = /^\s*wait\s*=\s*"?(\d+)"?\s*(;.*)?$/i.exec(pref);
    if (m) return Math.min(MAX_WAIT_SECONDS, Number(m[1]));
  }
  return undefined;
}

function ended(run: Run): boolean {
  return run.state === "completed" || run.state === "failed" || run.state === "canceled";
}

/** Resolves with the Run once it has ended, or as it stands when `ms` have passed. */
export async function waitForRunEnd(engine: RunEngine, store: RunStore, run: Run, ms: number): Promise<Run> {
  if (ended(run) || ms <= 0) return run;
  let unsubscribe: () => void = () => undefined;
  let timer: NodeJS.Timeout | undefined;
  const end = new Promise<void>((resolve) => {
    unsubscribe = engine.hub.subscribe(run.run_id, (e) => {
      if (e.event.type === "run_completed") resolve();
    });
    timer = setTimeout(resolve, ms);
  });
  try {
    // The run may have ended between the start and the subscription.
    const now = await store.getRun(run.run_id);
    if (now && ended(now.run)) return now.run;
    await end;
  } finally {
    unsubscribe();
    if (timer) clearTimeout(timer);
  }
  return (await store.getRun(run.run_id))?.run ?? run;
}
