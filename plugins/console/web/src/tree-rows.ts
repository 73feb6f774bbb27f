/**
 * The run's tree as the rows the page shows, top to bottom. A NodeRun with many children shows them as groups, one
 * per (node type, state), collapsed with a count: a fan-out of 10,000 is a handful of rows until a group is opened,
 * and an opened group is a long list the virtualised view draws only in part.
 */
import type { NodeState, NodeView, RunModel } from "./run-model";

/** Up to this many children are shown one by one; more are grouped. */
export const DIRECT_CHILDREN = 20;
/** NodeRuns this shallow are open until the user closes them. */
const OPEN_DEPTH = 3;

export interface NodeRow {
  kind: "node";
  key: string;
  node: NodeView;
  depth: number;
  expandable: boolean;
  expanded: boolean;
}

export interface GroupRow {
  kind: "group";
  key: string;
  parentId: string;
  nodeTypeId: string;
  state: NodeState;
  count: number;
  depth: number;
  expanded: boolean;
  /** Epoch ms: the earliest start and the latest end in the group (undefined end: some still run). */
  start?: number;
  end?: number;
}

export type TreeRow = NodeRow | GroupRow;

/** Which NodeRuns and groups the user opened or closed (anything else follows the defaults). */
export interface TreeOpenState {
  opened: ReadonlySet<string>;
  closed: ReadonlySet<string>;
}

/** The key of the group of a parent's children of one node type and state. */
export const groupKey = (parentId: string, nodeTypeId: string, state: string) => `g:${parentId}|${nodeTypeId}|${state}`;

/** Failures first (they are what one looks for), then what is moving, then what is done. */
const STATE_ORDER: Record<NodeState, number> = { failed: 0, running: 1, assigned: 2, queued: 3, canceled: 4, completed: 5 };

export function isNodeOpen(node: NodeView, depth: number, open: TreeOpenState): boolean {
  if (open.opened.has(node.id)) return true;
  if (open.closed.has(node.id)) return false;
  // Open near the root: a NodeRun of many children shows a few collapsed groups, so opening it costs little.
  return depth < OPEN_DEPTH;
}

interface Group {
  nodeTypeId: string;
  state: NodeState;
  ids: string[];
  start?: number;
  end?: number;
  open: boolean;
  typeOrder: number;
}

/** A parent's children as groups of (node type, state), in a stable order. */
function groupsOf(model: RunModel, parent: NodeView): Group[] {
  const byKey = new Map<string, Group>();
  const typeOrder = new Map<string, number>();
  for (const id of parent.children) {
    const c = model.nodes.get(id);
    if (!c) continue;
    if (!typeOrder.has(c.nodeTypeId)) typeOrder.set(c.nodeTypeId, typeOrder.size);
    const k = `${c.nodeTypeId}|${c.state}`;
    let g = byKey.get(k);
    if (!g) {
      g = { nodeTypeId: c.nodeTypeId, state: c.state, ids: [], open: false, typeOrder: typeOrder.get(c.nodeTypeId)! };
      byKey.set(k, g);
    }
    g.ids.push(id);
    const s = c.startedAt ?? c.createdAt;
    if (s !== undefined && (g.start === undefined || s < g.start)) g.start = s;
    if (c.endedAt !== undefined && (g.end === undefined || c.endedAt > g.end)) g.end = c.endedAt;
  }
  return [...byKey.values()].sort((a, b) => a.typeOrder - b.typeOrder || STATE_ORDER[a.state] - STATE_ORDER[b.state]);
}

/** Every row to show, top to bottom. */
export function treeRows(model: RunModel, open: TreeOpenState): TreeRow[] {
  const rows: TreeRow[] = [];
  const root = model.rootId ? model.nodes.get(model.rootId) : undefined;
  if (!root) return rows;
  const visit = (node: NodeView, depth: number) => {
    const expandable = node.children.length > 0;
    const expanded = expandable && isNodeOpen(node, depth, open);
    rows.push({ kind: "node", key: node.id, node, depth, expandable, expanded });
    if (!expanded) return;
    if (node.children.length <= DIRECT_CHILDREN) {
      for (const id of node.children) {
        const c = model.nodes.get(id);
        if (c) visit(c, depth + 1);
      }
      return;
    }
    for (const g of groupsOf(model, node)) {
      const key = groupKey(node.id, g.nodeTypeId, g.state);
      const gOpen = open.opened.has(key);
      rows.push({ kind: "group", key, parentId: node.id, nodeTypeId: g.nodeTypeId, state: g.state, count: g.ids.length, depth: depth + 1, expanded: gOpen, start: g.start, end: g.state === "completed" || g.state === "failed" || g.state === "canceled" ? g.end : undefined });
      if (!gOpen) continue;
      for (const id of g.ids) visit(model.nodes.get(id)!, depth + 2);
    }
  };
  visit(root, 0);
  return rows;
}

/**
 * What to open so a NodeRun's row is shown: every ancestor, and the group it sits in under each ancestor that groups
 * its children.
 */
export function keysToReveal(model: RunModel, id: string): string[] {
  const path = model.pathTo(id);
  const keys: string[] = [];
  for (let i = 0; i < path.length - 1; i++) {
    const parent = model.nodes.get(path[i]!)!;
    keys.push(parent.id);
    if (parent.children.length > DIRECT_CHILDREN) {
      const child = model.nodes.get(path[i + 1]!)!;
      keys.push(groupKey(parent.id, child.nodeTypeId, child.state));
    }
  }
  return keys;
}
