/**
 * `ctx.reportOutputDelta`: the text a handler writes as it comes (an LLM's answer, token by token), passed on to the
 * coordinator in order, coalesced and bounded, to become `node_run_output_delta` run events (docs/runs.md).
 *
 * - Coalesced: what is written within OUTPUT_DELTA_INTERVAL_MS is sent as one delta (sooner once
 *   OUTPUT_DELTA_FLUSH_CHARS are waiting), and one delta is in flight at a time, so deltas arrive in order.
 * - Numbered: each delta carries its `index` (0, 1, 2… in this execution), its `offset` (the characters before it, as
 *   a JavaScript string counts them) and the execution's `attempt`; a delta sent twice is recorded once.
 * - Bounded: at most OUTPUT_DELTA_MAX_EVENTS deltas and OUTPUT_DELTA_MAX_CHARS characters an execution; the delta that
 *   reaches a bound says `truncated: true` and nothing more is sent. The handler's outputs are not bounded by this.
 * - Best effort: a delta the coordinator could not be reached for is tried again twice, then the stream stops.
 *   Before the result goes back, what is still waiting is sent (for at most OUTPUT_DELTA_CLOSE_MS), so readers get
 *   the last delta before the NodeRun's end.
 */

/** One delta as it goes to the coordinator (`POST /v1/node-runs/{id}:output-delta`). */
export interface OutputDelta {
  text: string;
  index: number;
  offset: number;
  attempt: number;
  truncated?: true;
}

/** Sends one delta; resolves once the coordinator took it. */
export type OutputDeltaSender = (delta: OutputDelta) => Promise<void>;

export const OUTPUT_DELTA_INTERVAL_MS = 100;
export const OUTPUT_DELTA_FLUSH_CHARS = 4096;
export const OUTPUT_DELTA_MAX_EVENTS = 500;
export const OUTPUT_DELTA_MAX_CHARS = 256 * 1024;
export const OUTPUT_DELTA_CLOSE_MS = 2_000;
/** The most characters one delta carries (the coordinator takes 64 Ki); what is left waits for the next. */
const OUTPUT_DELTA_MAX_SEND_CHARS = 16 * 1024;
const MAX_FAILURES = 3;

export class OutputDeltaStream {
  private pending = "";
  private index = 0;
  private offset = 0;
  private chars = 0;
  private failures = 0;
  private lastSent = 0;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  /** A delta whose sending failed, sent again as it was. */
  private retry: OutputDelta | undefined;
  /** No more deltas: a bound was reached, the coordinator could not be reached, or the execution ended. */
  private done = false;
  private readonly idle = new Set<() => void>();

  constructor(
    private readonly send: OutputDeltaSender | undefined,
    private readonly attempt: number,
  ) {}

  write(text: string): void {
    if (this.done || !this.send || text === "") return;
    this.pending += text;
    this.schedule();
  }

  /** True when nothing was written that is not sent yet (most executions write nothing). */
  get idleNow(): boolean {
    return !this.pending && !this.inFlight && !this.retry;
  }

  /** Sends what is waiting and resolves once nothing is in flight, or after `waitMs`; nothing is sent after it. */
  async close(waitMs = OUTPUT_DELTA_CLOSE_MS): Promise<void> {
    if (!this.send) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, Math.max(0, waitMs));
      timer.unref?.();
    });
    const drained = new Promise<void>((resolve) => {
      const check = () => {
        if (this.inFlight) return;
        if ((this.pending || this.retry) && !this.done) return void this.flush();
        this.idle.delete(check);
        resolve();
      };
      this.idle.add(check);
      check();
    });
    await Promise.race([drained, gaveUp]);
    clearTimeout(timer);
    this.stop();
  }

  /** Drops what is waiting; nothing more is sent. */
  stop(): void {
    this.done = true;
    this.pending = "";
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    for (const f of [...this.idle]) f();
  }

  private schedule(): void {
    if (this.inFlight || this.timer || this.done) return;
    const wait = this.pending.length >= OUTPUT_DELTA_FLUSH_CHARS ? 0 : this.lastSent + OUTPUT_DELTA_INTERVAL_MS - Date.now();
    if (wait <= 0) return void this.flush();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush();
    }, wait);
    this.timer.unref?.();
  }

  private flush(): void {
    if (this.inFlight || this.done || !this.send) return;
    if (this.retry) return this.sendDelta(this.retry);
    if (!this.pending) return;
    let text = this.pending;
    this.pending = "";
    if (text.length > OUTPUT_DELTA_MAX_SEND_CHARS) {
      let cut = OUTPUT_DELTA_MAX_SEND_CHARS;
      if (/[\uD800-\uDBFF]/.test(text[cut - 1])) cut--;
      this.pending = text.slice(cut);
      text = text.slice(0, cut);
    }
    let truncated = false;
    if (this.chars + text.length >= OUTPUT_DELTA_MAX_CHARS) {
      let cut = OUTPUT_DELTA_MAX_CHARS - this.chars;
      // Never split a surrogate pair.
      if (cut > 0 && cut < text.length && /[\uD800-\uDBFF]/.test(text[cut - 1])) cut--;
      text = text.slice(0, Math.max(0, cut));
      truncated = true;
    }
    if (this.index + 1 >= OUTPUT_DELTA_MAX_EVENTS) truncated = true;
    this.sendDelta({ text, index: this.index, offset: this.offset, attempt: this.attempt, ...(truncated ? { truncated: true as const } : {}) });
  }

  private sendDelta(delta: OutputDelta): void {
    this.retry = undefined;
    this.lastSent = Date.now();
    const sent = (async () => this.send!(delta))();
    this.inFlight = sent
      .then(
        () => {
          this.failures = 0;
          this.index++;
          this.offset += delta.text.length;
          this.chars += delta.text.length;
          if (delta.truncated) this.done = true;
        },
        () => {
          // The same delta again: the coordinator records an index once, should the first have arrived after all.
          if (++this.failures >= MAX_FAILURES) this.done = true;
          else this.retry = delta;
        },
      )
      .finally(() => {
        this.inFlight = undefined;
        if (this.done) this.pending = "";
        for (const f of [...this.idle]) f();
        if ((this.pending || this.retry) && !this.done) this.schedule();
      });
  }
}
