/**
 * The live view of `fabric run` in a terminal: the run's NodeRuns as a tree (indented by parent), each with its
 * node type, state and duration, redrawn in place with ANSI cursor movement as events arrive.
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

/** Joins parts into one line no wider than `width` columns, colouring only when asked. */
function fit(parts: Part[], width: number, color: boolean): string {
  let room = Math.max(1, width);
  let out = "";
  for (const [text, sgr] of parts) {
    if (room <= 0) break;
    const chars = Array.from(text);
    let piece = chars.length > room ? chars.slice(0, Math.max(0, room - 1)).join("") + "…" : text;
    room -= Math.min(chars.length, room);
    if (color && sgr !== undefined) piece = `\x1b[${sgr}m${piece}\x1b[0m`;
    out += piece;
  }
  return out;
}

/** The state of one run as learnt from its events, and its rendering as lines. */
export class RunTreeView {
  runState = "queued";
  private runStartedAt?: number;
  private runEndedAt?: number;
  private readonly nodes = new Map<string, NodeRow>();
  private readonly roots: string[] = [];

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
      case "node_run_retrying":
        if (TERMINAL.has(r.state)) return;
        r.state = "queued";
        r.note = typeof data.attempt === "number" ? `retry, attempt ${data.attempt}` : "retrying";
        return;
      case "node_run_progress": {
        if (TERMINAL.has(r.state)) return;
        const of = typeof data.total === "number" ? `/${data.total}` : "";
        r.note = typeof data.message === "string" ? data.message : typeof data.progress === "number" ? `progress ${data.progress}${of}` : undefined;
        return;
      }
      case "approval_requested":
        r.note = typeof data.approval_id === "string" ? `awaiting approval ${data.approval_id}` : "awaiting approval";
        return;
      case "approval_resolved":
        r.note = typeof data.decision === "string" ? `approval ${data.decision}` : undefined;
        return;
      case "node_run_completed": {
        r.state = typeof data.state === "string" ? data.state : "completed";
        r.endedAt = t;
        const code = (data.error as { code?: unknown } | undefined)?.code;
        r.note = typeof code === "string" ? code : undefined;
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
    const out = [fit([["run ", 1], [this.runId, 1], ["  "], [this.runState, COLOR[this.runState]], [`  ${formatDuration(runMs)}`, 2]], width, color)];

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
    const lines = this.view.lines(clock.now(), width, height, this.color);
    // Back to the first line drawn last time, clear everything below, draw again.
    const up = this.drawn > 0 ? `\x1b[${this.drawn}F` : "";
    this.out.write(`${up}\x1b[J${lines.join("\n")}\n`);
    this.drawn = lines.length;
  }
}
