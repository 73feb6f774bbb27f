/**
 * The live view of `fabric run` in a terminal: the run's NodeRuns as a tree (indented by parent), each with its
 * node type, state and duration, redrawn in place with ANSI cursor movement as events arrive; above it, one line for
 * each thing a person wants to read back (a retry, a progress message, an approval, a failure); below it at the end,
 * the outputs (formatOutputs).
 */
import type { RunEvent } from "@nodefabric/schemas";
import { clock } from "../clock.js";

interface NodeRow {
  id: string;
  parent?: string;
  type: string;
  state: string;
  note?: string;
  createdAt?: number;
  startedAt?: number;
  endedAt?: number;
  children: string[];
}

const TERMINAL = new Set(["completed", "failed", "canceled"]);
/** Characters of a NodeRun's streamed text kept for its note. */
const STREAMED_TAIL = 60;
const ICON: Record<string, string> = { queued: "·", assigned: "○", running: "▶", completed: "✓", failed: "✗", canceled: "⊘" };
const COLOR: Record<string, number> = { running: 36, completed: 32, failed: 31, canceled: 33 };

/** A duration for people: 840ms, 3.2s, 2m05s. */
export function formatDuration(ms: number): string {
  const v = Math.max(0, Math.round(ms));
  if (v < 1000) return `${v}ms`;
  if (v < 60_000) return `${(v / 1000).toFixed(1)}s`;
  const m = Math.floor(v / 60_000);
  const s = Math.floor((v % 60_000) / 1000);
  return `${m}m${String(s).padStart(2, "0")}s`;
}

function timeOf(e: RunEvent): number {
  const t = Date.parse(e.time);
  return Number.isNaN(t) ? clock.now() : t;
}

function refText(ref: unknown): string | undefined {
  const r = ref as { node_type_id?: unknown; version?: unknown } | undefined;
  if (!r || typeof r.node_type_id !== "string") return undefined;
  return typeof r.version === "string" ? `${r.node_type_id}@${r.version}` : r.node_type_id;
}

/** One piece of a line, optionally coloured (an SGR code). */
type Part = [text: string, sgr?: number];

/** Control characters: a line break would throw the redraw's line count off, an escape sequence would reach the terminal. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

/**
 * Joins parts into one line no wider than `width` columns, colouring only when asked. What handlers wrote (messages,
 * error texts) is shown with its control characters as spaces.
 */
function fit(parts: Part[], width: number, color: boolean): string {
  let room = Math.max(1, width);
  let out = "";
  for (const [raw, sgr] of parts) {
    if (room <= 0) break;
    const text = raw.replace(CONTROL, " ");
    const chars = Array.from(text);
    let piece = chars.length > room ? chars.slice(0, Math.max(0, room - 1)).join("") + "…" : text;
    room -= Math.min(chars.length, room);
    if (color && sgr !== undefined) piece = `\x1b[${sgr}m${piece}\x1b[0m`;
    out += piece;
  }
  return out;
}

/** The local time of day of an event, HH:MM:SS. */
function clockTime(t: number): string {
  const d = new Date(t);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
}

/** An error object's `code: message`, or what there is of it. */
function errorText(error: unknown): string | undefined {
  const e = error as { code?: unknown; message?: unknown } | undefined;
  const code = typeof e?.code === "string" ? e.code : undefined;
  const message = typeof e?.message === "string" ? e.message : undefined;
  return code && message ? `${code}: ${message}` : (code ?? message);
}

/** A line for the record: when, which NodeRun, what happened (coloured as its state). */
interface Message {
  time: number;
  node: string;
  text: string;
  sgr?: number;
}

/** The state of one run as learnt from its events, and its rendering as lines. */
export class RunTreeView {
  runState = "queued";
  private runStartedAt?: number;
  private runEndedAt?: number;
  private readonly nodes = new Map<string, NodeRow>();
  private readonly roots: string[] = [];
  private messages: Message[] = [];
  /** The last progress message recorded per NodeRun, so a repeated one is not recorded again. */
  private readonly lastProgress = new Map<string, string>();
  /** The end of the text each NodeRun is writing (node_run_output_delta), shown as its note while it runs. */
  private readonly streamed = new Map<string, string>();

  constructor(readonly runId: string) {}

  private row(id: string, e: RunEvent): NodeRow {
    let r = this.nodes.get(id);
    if (!r) {
      // A stream resumed with after_seq may name NodeRuns whose creation it did not carry.
      r = { id, type: "?", state: "queued", createdAt: timeOf(e), children: [] };
      this.nodes.set(id, r);
      this.roots.push(id);
    }
    return r;
  }

  private record(r: NodeRow, t: number, text: string, sgr?: number): void {
    this.messages.push({ time: t, node: r.type, text, sgr });
  }

  /**
   * The lines recorded since the last call (`HH:MM:SS  <node type>  <what happened>`), each at most `width` columns:
   * printed once, above the tree.
   */
  takeMessages(width: number, color: boolean): string[] {
    const taken = this.messages;
    this.messages = [];
    return taken.map((m) => fit([[clockTime(m.time), 2], ["  "], [m.node, 1], ["  "], [m.text, m.sgr]], width, color));
  }

  /** Learns from one event. */
  apply(e: RunEvent): void {
    const data = e.data ?? {};
    const t = timeOf(e);
    switch (e.type) {
      case "run_started":
        this.runStartedAt ??= t;
        return;
      case "run_completed":
        this.runState = typeof data.state === "string" ? data.state : "completed";
        this.runEndedAt = t;
        return;
    }
    if (!e.node_run_id) return;
    if (e.type === "node_run_created" && !this.nodes.has(e.node_run_id)) {
      const parent = typeof data.parent_node_run_id === "string" ? data.parent_node_run_id : undefined;
      const r: NodeRow = { id: e.node_run_id, parent, type: refText(data.node_type_ref) ?? "?", state: "queued", createdAt: t, children: [] };
      this.nodes.set(r.id, r);
      const p = parent ? this.nodes.get(parent) : undefined;
      if (p) p.children.push(r.id);
      else this.roots.push(r.id);
      this.runStartedAt ??= t;
      return;
    }
    const r = this.row(e.node_run_id, e);
    switch (e.type) {
      case "node_run_assigned":
        if (!TERMINAL.has(r.state)) r.state = "assigned";
        return;
      case "node_run_started":
        if (TERMINAL.has(r.state)) return;
        r.state = "running";
        r.startedAt ??= t;
        r.note = undefined;
        if (this.runState === "queued") this.runState = "running";
        return;
      case "node_run_retrying": {
        if (TERMINAL.has(r.state)) return;
        r.state = "queued";
        r.note = typeof data.attempt === "number" ? `retry, attempt ${data.attempt}` : "retrying";
        const why = data.reason === "lease_expired" ? "its executor's lease expired" : errorText(data.error);
        const wait = typeof data.delay_ms === "number" ? ` in ${formatDuration(data.delay_ms)}` : "";
        this.record(r, t, `retrying${wait}${typeof data.attempt === "number" ? ` (attempt ${data.attempt})` : ""}${why ? `: ${why}` : ""}`, 33);
        return;
      }
      case "node_run_progress": {
        if (TERMINAL.has(r.state)) return;
        const of = typeof data.total === "number" ? `/${data.total}` : "";
        const count = typeof data.progress === "number" ? `${data.progress}${of}` : undefined;
        r.note = typeof data.message === "string" ? data.message : count !== undefined ? `progress ${count}` : undefined;
        if (typeof data.message === "string" && this.lastProgress.get(r.id) !== data.message) {
          this.lastProgress.set(r.id, data.message);
          this.record(r, t, count !== undefined ? `${data.message} (${count})` : data.message);
        }
        return;
      }
      case "node_run_output_delta": {
        // The end of the text being written, as the row's note (the whole text is in the outputs at the end).
        if (TERMINAL.has(r.state) || typeof data.text !== "string") return;
        const before = data.index === 0 ? "" : (this.streamed.get(r.id) ?? "");
        const text = (before + data.text).slice(-STREAMED_TAIL);
        this.streamed.set(r.id, text);
        r.note = `“…${text.replace(/\s+/g, " ").trimStart()}”`;
        return;
      }
      case "approval_requested": {
        const id = typeof data.approval_id === "string" ? data.approval_id : undefined;
        r.note = id ? `awaiting approval ${id}` : "awaiting approval";
        this.record(r, t, `awaits approval${id ? ` ${id}` : ""}${typeof data.message === "string" ? `: ${data.message}` : ""}`, 33);
        return;
      }
      case "approval_resolved": {
        r.note = typeof data.decision === "string" ? `approval ${data.decision}` : undefined;
        const reason = typeof data.reason === "string" ? `: ${data.reason}` : "";
        this.record(r, t, `approval ${typeof data.decision === "string" ? data.decision : "resolved"}${reason}`, data.decision === "approved" ? 32 : 33);
        return;
      }
      case "recovery_applied": {
        const action = (data.recovery_action as { type?: unknown } | undefined)?.type;
        this.record(r, t, `recovery applied${typeof action === "string" ? `: ${action}` : ""}`, 33);
        return;
      }
      case "node_run_completed": {
        r.state = typeof data.state === "string" ? data.state : "completed";
        r.endedAt = t;
        const code = (data.error as { code?: unknown } | undefined)?.code;
        r.note = typeof code === "string" ? code : undefined;
        const why = errorText(data.error);
        if (r.state !== "completed" && why) this.record(r, t, `${r.state}: ${why}`, COLOR[r.state]);
        return;
      }
      default:
        return;
    }
  }

  /** Whether run_completed has been seen. */
  get ended(): boolean {
    return this.runEndedAt !== undefined;
  }

  /** The view as at most `maxLines` lines, each at most `width` columns. */
  lines(now: number, width: number, maxLines: number, color: boolean): string[] {
    const ordered: Array<{ row: NodeRow; depth: number }> = [];
    const visit = (id: string, depth: number) => {
      const row = this.nodes.get(id);
      if (!row) return;
      ordered.push({ row, depth });
      for (const c of row.children) visit(c, depth + 1);
    };
    for (const id of this.roots) visit(id, 0);

    const runMs = this.runStartedAt === undefined ? 0 : (this.runEndedAt ?? now) - this.runStartedAt;
    // On a narrow terminal the run id is cut, so that its state and duration stay in sight.
    const after = `  ${this.runState}  ${formatDuration(runMs)}`;
    const idRoom = width - "run ".length - after.length;
    const id = this.runId.length > idRoom && idRoom >= 6 ? `${this.runId.slice(0, idRoom - 1)}…` : this.runId;
    const out = [fit([["run ", 1], [id, 1], ["  "], [this.runState, COLOR[this.runState]], [`  ${formatDuration(runMs)}`, 2]], width, color)];

    const labels = ordered.map(({ row, depth }) => `${"  ".repeat(depth + 1)}${ICON[row.state] ?? "?"} ${row.type}`);
    const labelWidth = Math.min(Math.max(0, ...labels.map((l) => Array.from(l).length)), Math.floor(width / 2));
    const room = Math.max(1, maxLines - 1);
    const shown = ordered.length > room ? room - 1 : ordered.length;
    for (let i = 0; i < shown; i++) {
      const { row } = ordered[i];
      const from = row.startedAt ?? row.createdAt;
      const ms = from === undefined ? 0 : (row.endedAt ?? now) - from;
      const label = Array.from(labels[i]);
      const padded = label.length > labelWidth ? label.slice(0, labelWidth - 1).join("") + "…" : labels[i].padEnd(labelWidth + labels[i].length - label.length);
      const parts: Part[] = [[padded], ["  "], [row.state, COLOR[row.state]], [`  ${formatDuration(ms)}`, 2]];
      if (row.note) parts.push([`  ${row.note}`, 2]);
      out.push(fit(parts, width, color));
    }
    if (shown < ordered.length) {
      const counts = new Map<string, number>();
      for (const { row } of ordered.slice(shown)) counts.set(row.state, (counts.get(row.state) ?? 0) + 1);
      const summary = [...counts].map(([s, n]) => `${n} ${s}`).join(", ");
      out.push(fit([[`  … ${ordered.length - shown} more node runs (${summary})`, 2]], width, color));
    }
    return out;
  }
}

/** Redraws a RunTreeView in place on a terminal, throttled, with running durations ticking. */
export class TerminalTreeRenderer {
  private drawn = 0;
  private pending: NodeJS.Timeout | undefined;
  private ticker: NodeJS.Timeout | undefined;
  private readonly color: boolean;

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly view: RunTreeView,
  ) {
    this.color = !process.env.NO_COLOR && out.hasColors?.() !== false;
  }

  /** Hides the cursor and starts the clock of running durations. */
  start(): void {
    this.out.write("\x1b[?25l");
    this.draw();
    this.ticker = setInterval(() => this.draw(), 250);
  }

  /** Asks for a redraw soon (many events in a burst become one redraw). */
  update(): void {
    this.pending ??= setTimeout(() => {
      this.pending = undefined;
      this.draw();
    }, 40);
  }

  /** Draws the final state and gives the cursor back. */
  stop(): void {
    if (this.pending) clearTimeout(this.pending);
    if (this.ticker) clearInterval(this.ticker);
    this.pending = this.ticker = undefined;
    this.draw();
    this.out.write("\x1b[?25h");
  }

  private draw(): void {
    const width = Math.max(20, (this.out.columns || 80) - 1);
    const height = Math.max(3, (this.out.rows || 24) - 1);
    // What was recorded since the last draw stays where it is written; the tree below it is drawn again each time.
    const record = this.view.takeMessages(width, this.color);
    const lines = this.view.lines(clock.now(), width, height, this.color);
    // Back to the first line drawn last time (cursor up, then to column 1: CUU and CR, which every terminal knows),
    // clear everything below, draw again.
    const up = this.drawn > 0 ? `\x1b[${this.drawn}A\r` : "";
    this.out.write(`${up}\x1b[J${[...record, ...lines].join("\n")}\n`);
    this.drawn = lines.length;
  }
}

/** How much of a run's outputs `fabric run` prints on a terminal; the rest is one `fabric runs get` away. */
export interface OutputLimits {
  /** Lines of pretty-printed JSON (default 60). */
  maxLines?: number;
  /** Characters of one string value (default 300). */
  maxString?: number;
  /** Items of one array, or keys of one object (default 20). */
  maxItems?: number;
  /** Levels of nesting shown; deeper values become `{…}` or `[…]` (default 6). */
  maxDepth?: number;
}

const count = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`;

/** A copy of `value` with long strings, long arrays, many keys and deep nesting cut, each cut saying how much. */
function shorten(value: unknown, l: Required<OutputLimits>, depth: number): unknown {
  if (typeof value === "string") {
    const chars = Array.from(value);
    return chars.length > l.maxString ? `${chars.slice(0, l.maxString).join("")}… (${count(chars.length - l.maxString, "more character")})` : value;
  }
  if (Array.isArray(value)) {
    if (depth >= l.maxDepth) return value.length === 0 ? [] : `[… ${count(value.length, "item")}]`;
    const kept = value.slice(0, l.maxItems).map((v) => shorten(v, l, depth + 1));
    return value.length > l.maxItems ? [...kept, `… ${count(value.length - l.maxItems, "more item")}`] : kept;
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value);
    if (depth >= l.maxDepth) return entries.length === 0 ? {} : `{… ${count(entries.length, "key")}}`;
    const out: Record<string, unknown> = {};
    for (const [k, v] of entries.slice(0, l.maxItems)) out[k] = shorten(v, l, depth + 1);
    if (entries.length > l.maxItems) out["…"] = count(entries.length - l.maxItems, "more key");
    return out;
  }
  return value;
}

/**
 * A run's outputs for a person: pretty-printed JSON, with long strings, arrays and objects cut and at most
 * `maxLines` lines; `truncated` says whether anything was left out.
 */
export function formatOutputs(outputs: unknown, limits: OutputLimits = {}): { lines: string[]; truncated: boolean } {
  const l: Required<OutputLimits> = { maxLines: 60, maxString: 300, maxItems: 20, maxDepth: 6, ...limits };
  const full = JSON.stringify(outputs ?? {}, null, 2);
  const text = JSON.stringify(shorten(outputs ?? {}, l, 0), null, 2);
  const lines = text.split("\n");
  if (lines.length <= l.maxLines) return { lines, truncated: text !== full };
  const kept = lines.slice(0, l.maxLines - 1);
  return { lines: [...kept, `… ${count(lines.length - kept.length, "more line")}`], truncated: true };
}
