/**
 * One run's NodeRuns as the page shows them, built from GET /v1/runs/{id}/node-runs and then kept current by the
 * run's events. The snapshot and the stream overlap (the stream is read from the start, so every NodeRun's events
 * are at hand for its panel), so every change is applied only forward: a state never goes back, an attempt never
 * down, a time once known is kept. Applying an event twice, or an old one over a newer snapshot, changes nothing.
 */
import type { FabricErrorBody, NodeRun, Run, RunEvent } from "./api";
import { timeOf } from "./format";

export type NodeState = NodeRun["state"];

export interface NodeView {
  id: string;
  parentId?: string;
  nodeTypeId: string;
  version: string;
  kind?: string;
  state: NodeState;
  attempt: number;
  /** Epoch ms. */
  createdAt?: number;
  startedAt?: number;
  endedAt?: number;
  error?: FabricErrorBody;
  /** The approval it waits for, while it waits. */
  approvalId?: string;
  /** Children, in the order they were created. */
  children: string[];
  /** Every event about this NodeRun, in seq order. */
  events: RunEvent[];
  /** The text it is writing (node_run_output_delta events) of its latest attempt that wrote any. */
  streamed?: { text: string; attempt: number; truncated: boolean };
}

const RANK: Record<NodeState, number> = { queued: 0, assigned: 1, running: 2, completed: 3, failed: 3, canceled: 3 };
const TERMINAL = new Set(["completed", "failed", "canceled"]);

export const isTerminal = (state: string | undefined): boolean => state !== undefined && TERMINAL.has(state);

export class RunModel {
  readonly nodes = new Map<string, NodeView>();
  rootId?: string;
  run?: Run;
  /** Events about the run as a whole (no node_run_id): run_started, run-level policy decisions, run_completed. */
  readonly runEvents: RunEvent[] = [];
  /** The highest seq applied: an event at or below it is a repeat. */
  lastSeq = -1;
  /** Bumped by every change, so views can tell a model that changed from one that did not. */
  version = 0;

  /** Counts of NodeRuns by state. */
  counts(): Record<NodeState, number> {
    const c: Record<NodeState, number> = { queued: 0, assigned: 0, running: 0, completed: 0, failed: 0, canceled: 0 };
    for (const n of this.nodes.values()) c[n.state]++;
    return c;
  }

  setRun(run: Run): void {
    this.run = run;
    this.rootId ??= run.root_node_run_id;
    this.version++;
  }

  /** Merges the NodeRuns of GET /v1/runs/{id}/node-runs. */
  loadSnapshot(nodeRuns: NodeRun[]): void {
    for (const nr of nodeRuns) {
      const ext = nr.extensions ?? {};
      const node = this.ensure(nr.node_run_id, nr.node_type_ref.node_type_id, nr.node_type_ref.version, nr.parent_node_run_id);
      if (nr.kind) node.kind = nr.kind;
      this.advance(node, nr.state);
      const attempt = ext["nodefabric.attempt"];
      if (typeof attempt === "number" && attempt > node.attempt) node.attempt = attempt;
      node.createdAt ??= timeOf(nr.created_at);
      node.startedAt ??= timeOf(nr.started_at);
      node.endedAt ??= timeOf(nr.ended_at);
      const error = ext["nodefabric.error"] as FabricErrorBody | undefined;
      if (error && !node.error) node.error = error;
      const approval = ext["nodefabric.approval_id"];
      if (typeof approval === "string" && !isTerminal(node.state) && node.state === "queued") node.approvalId = approval;
    }
    this.version++;
  }

  /** Applies events in seq order; repeats are skipped. */
  applyAll(events: readonly RunEvent[]): void {
    for (const e of events) this.apply(e);
    this.version++;
  }

  private apply(e: RunEvent): void {
    if (e.seq <= this.lastSeq) return;
    this.lastSeq = e.seq;
    const d = (e.data ?? {}) as Record<string, unknown>;
    const t = timeOf(e.time);
    if (e.node_run_id === undefined) {
      this.runEvents.push(e);
      if (e.type === "run_started" && typeof d.root_node_run_id === "string") this.rootId ??= d.root_node_run_id;
      if (e.type === "run_completed" && this.run && typeof d.state === "string" && !isTerminal(this.run.state)) {
        this.run = { ...this.run, state: d.state as Run["state"], ended_at: this.run.ended_at ?? e.time };
      }
      return;
    }
    const id = e.node_run_id;
    let node = this.nodes.get(id);
    if (e.type === "node_run_created") {
      const ref = d.node_type_ref as { node_type_id?: string; version?: string } | undefined;
      node = this.ensure(id, ref?.node_type_id ?? "?", ref?.version ?? "?", typeof d.parent_node_run_id === "string" ? d.parent_node_run_id : undefined);
      if (typeof d.kind === "string") node.kind ??= d.kind;
      node.createdAt ??= t;
      if (this.run && this.run.state === "queued") this.run = { ...this.run, state: "running" };
    }
    if (!node) {
      // An event about a NodeRun the page has not heard of (a snapshot taken mid-creation): made when its own
      // node_run_created arrives; until then it is kept with the run's events so nothing is lost.
      this.runEvents.push(e);
      return;
    }
    node.events.push(e);
    const attempt = typeof d.attempt === "number" ? d.attempt : undefined;
    if (attempt !== undefined && attempt > node.attempt) node.attempt = attempt;
    switch (e.type) {
      case "node_run_assigned":
        this.advance(node, "assigned");
        break;
      case "node_run_started":
        this.advance(node, "running");
        node.startedAt ??= t;
        break;
      case "node_run_completed":
        if (typeof d.state === "string" && d.state in RANK) this.advance(node, d.state as NodeState);
        node.endedAt ??= t;
        if (d.error && !node.error) node.error = d.error as FabricErrorBody;
        node.approvalId = undefined;
        break;
      case "approval_requested":
        if (!isTerminal(node.state) && typeof d.approval_id === "string") node.approvalId = d.approval_id;
        break;
      case "approval_resolved":
        node.approvalId = undefined;
        break;
      case "node_run_output_delta": {
        if (typeof d.text !== "string") break;
        const of = attempt ?? node.attempt;
        // A new attempt writes its text from the start (the call was made again).
        if (!node.streamed || node.streamed.attempt !== of || d.index === 0) node.streamed = { text: "", attempt: of, truncated: false };
        node.streamed.text += d.text;
        if (d.truncated === true) node.streamed.truncated = true;
        break;
      }
    }
  }

  /** The NodeRun of an id, made (and hung under its parent) when first heard of. */
  private ensure(id: string, nodeTypeId: string, version: string, parentId: string | undefined): NodeView {
    let node = this.nodes.get(id);
    if (node) {
      if (node.nodeTypeId === "?" && nodeTypeId !== "?") {
        node.nodeTypeId = nodeTypeId;
        node.version = version;
      }
      return node;
    }
    node = { id, parentId, nodeTypeId, version, state: "queued", attempt: 1, children: [], events: [] };
    this.nodes.set(id, node);
    if (parentId !== undefined) {
      const parent = this.nodes.get(parentId);
      if (parent) parent.children.push(id);
      else this.orphans.set(parentId, [...(this.orphans.get(parentId) ?? []), id]);
    } else {
      this.rootId ??= id;
    }
    // Children met before their parent (a snapshot lists NodeRuns in no promised order) are hung under it now.
    const waiting = this.orphans.get(id);
    if (waiting) {
      node.children.push(...waiting);
      this.orphans.delete(id);
    }
    return node;
  }

  private readonly orphans = new Map<string, string[]>();

  private advance(node: NodeView, state: NodeState): void {
    if (RANK[state] > RANK[node.state]) node.state = state;
    if (isTerminal(node.state)) node.approvalId = undefined;
  }

  /** The ids from the root down to a NodeRun (both included). */
  pathTo(id: string): string[] {
    const out: string[] = [];
    let at = this.nodes.get(id);
    while (at) {
      out.unshift(at.id);
      at = at.parentId !== undefined ? this.nodes.get(at.parentId) : undefined;
    }
    return out;
  }

  /** The first NodeRun that failed, by creation (the deepest cause is usually the first to fail). */
  firstFailed(): NodeView | undefined {
    let best: NodeView | undefined;
    for (const n of this.nodes.values()) {
      if (n.state !== "failed") continue;
      if (!best || (n.endedAt ?? Infinity) < (best.endedAt ?? Infinity)) best = n;
    }
    return best;
  }

  /** The run's time axis: from its start to its end, or to `now` while it runs. */
  span(now: number): { start: number; end: number } {
    const root = this.rootId ? this.nodes.get(this.rootId) : undefined;
    const start = timeOf(this.run?.started_at) ?? root?.createdAt ?? now;
    const ended = timeOf(this.run?.ended_at) ?? root?.endedAt;
    return { start, end: Math.max(start + 1, ended ?? now) };
  }
}
