/**
 * Output deltas: text an atomic execution writes as it comes (`ctx.reportOutputDelta`, an LLM's answer as it streams),
 * recorded as `node_run_output_delta` run events (an extension event type, docs/runs.md). They are durable events
 * with seqs like any other, so a reader that resumes after a seq gets the rest once, in order.
 *
 * - Only while the NodeRun is running, and only from its current attempt: a late delta of an earlier attempt is
 *   dropped.
 * - Once per index: a delta sent again (its first sending got through after all) is dropped; a NodeRun's next index
 *   is kept in memory, so a delta of an attempt this coordinator has not seen starts from what it says.
 * - Bounded: at most OUTPUT_DELTA_EVENTS_LIMIT events and OUTPUT_DELTA_CHARS_LIMIT characters per attempt, whatever an
 *   executor sends (the SDK's own bounds are lower).
 * - Counted: each attempt whose text was streamed adds one to the NodeRun's `extensions["nodefabric.output_stream"]`
 *   (`{ streams, restarts, attempt }`), so a call made again after a crash mid-stream (and billed again) shows as a
 *   restart, and its first delta says `restarted: true` (readers drop the text of the earlier attempt).
 */
import type { EngineCore } from "./engine-core.js";
import { sumOf, trackCache } from "../observe/caches.js";
import { assignmentRefused, event, type Caller } from "./engine-types.js";

/** What `POST /v1/node-runs/{id}:output-delta` carries. */
export interface OutputDeltaReport {
  text: string;
  index: number;
  offset: number;
  attempt: number;
  truncated?: boolean;
}

/** The NodeRun extension counting the attempts that streamed text. */
export const OUTPUT_STREAM_KEY = "nodefabric.output_stream";
export const OUTPUT_DELTA_EVENTS_LIMIT = 1000;
export const OUTPUT_DELTA_CHARS_LIMIT = 1024 * 1024;
/** NodeRuns whose next delta index is remembered (oldest forgotten first). */
const MAX_REMEMBERED = 10_000;

interface Seen {
  attempt: number;
  next: number;
  events: number;
  chars: number;
}

export class OutputDeltas {
  private readonly seen = new Map<string, Seen>();

  constructor(private readonly core: EngineCore) {
    trackCache("engine.output_deltas_seen", this, (d) => ({ entries: d.seen.size, chars: sumOf(d.seen.values(), (s) => s.chars) }), { max_entries: MAX_REMEMBERED });
  }

  /** Records one delta; true when an event was written. */
  async record(nodeRunId: string, delta: OutputDeltaReport, caller: Caller = {}): Promise<boolean> {
    if (caller.assignment && caller.assignment.node_run_id !== nodeRunId) throw assignmentRefused(caller, `node run ${nodeRunId}`);
    const found = await this.core.getNodeRunRecord(nodeRunId, caller);
    return this.core.withLock(found.run_id, async () => {
      const nr = await this.core.store.getNodeRun(nodeRunId);
      if (!nr || nr.state !== "running" || nr.attempt !== delta.attempt) return false;
      let seen = this.seen.get(nodeRunId);
      if (!seen || seen.attempt !== delta.attempt) seen = { attempt: delta.attempt, next: delta.index, events: 0, chars: 0 };
      if (delta.index < seen.next) return false; // sent again
      if (seen.events >= OUTPUT_DELTA_EVENTS_LIMIT || seen.chars >= OUTPUT_DELTA_CHARS_LIMIT) return false;
      let text = delta.text;
      let truncated = delta.truncated === true || seen.events + 1 >= OUTPUT_DELTA_EVENTS_LIMIT;
      if (seen.chars + text.length >= OUTPUT_DELTA_CHARS_LIMIT) {
        text = text.slice(0, OUTPUT_DELTA_CHARS_LIMIT - seen.chars);
        truncated = true;
      }
      const data: Record<string, unknown> = { text, index: delta.index, offset: delta.offset, attempt: delta.attempt };
      if (truncated) data.truncated = true;
      const batch: Parameters<EngineCore["write"]>[0] = { events: [] };
      if (delta.index === 0) {
        // One more attempt streamed: counted on the NodeRun, durable across restarts of this coordinator.
        const before = nr.node_run.extensions?.[OUTPUT_STREAM_KEY] as { streams?: number; attempt?: number } | undefined;
        if (before?.attempt !== delta.attempt) {
          const streams = (before?.streams ?? 0) + 1;
          nr.node_run.extensions = { ...nr.node_run.extensions, [OUTPUT_STREAM_KEY]: { streams, restarts: streams - 1, attempt: delta.attempt } };
          batch.nodeRuns = [nr];
          if (streams > 1) data.restarted = true;
        }
      }
      batch.events!.push(event("node_run_output_delta", nr.run_id, nr.node_run_id, data));
      await this.core.write(batch);
      this.seen.set(nodeRunId, { attempt: delta.attempt, next: delta.index + 1, events: seen.events + 1, chars: seen.chars + text.length });
      if (this.seen.size > MAX_REMEMBERED) this.seen.delete(this.seen.keys().next().value!);
      return true;
    });
  }
}
