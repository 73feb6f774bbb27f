/**
 * Following a run's events to its end, for the commands that show a run as it goes (`fabric run`, `fabric runs
 * follow`): a module of its own so both import it rather than each other.
 */
import { setTimeout as delay } from "node:timers/promises";
import type { RunEvent } from "@nodefabric/schemas";
import type { GatewayClient } from "../clients/gateway-client.js";
import { FabricError } from "../http/errors.js";

/** Reconnections in a row that bring no new event before `fabric run` gives up following. */
const MAX_FRUITLESS_RECONNECTS = 5;

/**
 * Follows a run's events until run_completed, resuming with after_seq when the stream breaks off; each event is
 * handed to `onEvent` once, in seq order.
 */
export async function followRun(client: GatewayClient, runId: string, onEvent: (e: RunEvent) => void, signal?: AbortSignal): Promise<void> {
  let afterSeq: number | undefined;
  let fruitless = 0;
  for (;;) {
    let progressed = false;
    try {
      for await (const e of client.events(runId, { afterSeq, signal })) {
        if (afterSeq !== undefined && e.seq <= afterSeq) continue;
        afterSeq = e.seq;
        progressed = true;
        onEvent(e);
        if (e.type === "run_completed") return;
      }
    } catch (err) {
      if (signal?.aborted) throw err;
      // A refusal (404, 401, …) will not change by asking again; a broken connection may.
      if (FabricError.is(err) && err.statusCode < 500) throw err;
      if (!progressed && fruitless + 1 >= MAX_FRUITLESS_RECONNECTS) throw err;
    }
    // The stream ended or broke before run_completed: resume after the last event seen.
    fruitless = progressed ? 0 : fruitless + 1;
    if (fruitless >= MAX_FRUITLESS_RECONNECTS) {
      throw new FabricError("upstream_unavailable", `the event stream of ${runId} keeps closing before the run ends`);
    }
    await delay(Math.min(2000, 100 * 2 ** fruitless), undefined, { signal });
  }
}
