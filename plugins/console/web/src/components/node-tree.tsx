/**
 * The run's live tree, one row per NodeRun or group of children, each with its state, attempts, duration and its bar
 * on the run's time axis (the timeline). Drawn through VirtualList, so only the rows in view are in the DOM.
 */
import type { RunModel } from "../run-model";
import { isTerminal } from "../run-model";
import type { TreeRow } from "../tree-rows";
import { formatCount, formatDuration } from "../format";
import { StateBadge } from "./state-badge";
import { VirtualList } from "./virtual-list";

export const ROW_HEIGHT = 28;

export interface NodeTreeProps {
  model: RunModel;
  rows: TreeRow[];
  now: number;
  selectedId?: string;
  scrollToIndex?: number;
  onSelect: (nodeRunId: string) => void;
  onToggle: (key: string, open: boolean) => void;
}

/** A bar from `start` to `end` (or to now, while it runs) on the axis [axis.start, axis.end]. */
function Bar(props: { start?: number; end?: number; state: string; axis: { start: number; end: number }; now: number }) {
  if (props.start === undefined) return <div class="bar-track" />;
  const span = props.axis.end - props.axis.start;
  const end = props.end ?? (isTerminal(props.state) ? props.start : props.now);
  const left = Math.max(0, Math.min(100, ((props.start - props.axis.start) / span) * 100));
  const width = Math.max(0, Math.min(100 - left, ((end - props.start) / span) * 100));
  return (
    <div class="bar-track">
      <div class={`bar ${props.state}`} style={{ left: `${left}%`, width: `${width}%` }} />
    </div>
  );
}

const indent = (depth: number) => ({ paddingLeft: `${depth * 16}px` });

/** Enter or space acts on a row; the arrow keys open (→) or close (←) it. */
function onKeys(act: () => void, toggle?: (open: boolean) => void) {
  return (e: KeyboardEvent) => {
    if (e.key === "Enter" || e.key === " ") act();
    else if (toggle && e.key === "ArrowRight") toggle(true);
    else if (toggle && e.key === "ArrowLeft") toggle(false);
    else return;
    e.preventDefault();
  };
}

export function NodeTree(props: NodeTreeProps) {
  const axis = props.model.span(props.now);
  const render = (row: TreeRow) => {
    if (row.kind === "group") {
      const duration = row.start !== undefined ? formatDuration((row.end ?? props.now) - row.start) : "";
      return (
        <div
          class="tree-row group"
          data-testid="node-group-row"
          data-node-type={row.nodeTypeId}
          data-state={row.state}
          data-count={row.count}
          aria-expanded={row.expanded}
          role="button"
          tabIndex={0}
          onClick={() => props.onToggle(row.key, !row.expanded)}
          onKeyDown={onKeys(() => props.onToggle(row.key, !row.expanded))}
        >
          <span class="tree-name" style={indent(row.depth)}>
            <span class="twisty">{row.expanded ? "▾" : "▸"}</span>
            <span class="label">
              <span class="mono">{row.nodeTypeId}</span> · {formatCount(row.count)} {row.state}
            </span>
          </span>
          <StateBadge state={row.state} />
          <span />
          <span class="num">{duration}</span>
          <Bar start={row.start} end={row.end} state={row.state} axis={axis} now={props.now} />
        </div>
      );
    }
    const n = row.node;
    const start = n.startedAt ?? n.createdAt;
    const duration = start !== undefined ? formatDuration((n.endedAt ?? (isTerminal(n.state) ? start : props.now)) - start) : "";
    return (
      <div
        class={`tree-row${props.selectedId === n.id ? " selected" : ""}`}
        data-testid="node-row"
        data-node-run-id={n.id}
        data-node-type={n.nodeTypeId}
        data-state={n.state}
        role="button"
        tabIndex={0}
        aria-expanded={row.expandable ? row.expanded : undefined}
        onClick={() => props.onSelect(n.id)}
        onKeyDown={onKeys(
          () => props.onSelect(n.id),
          row.expandable ? (open) => props.onToggle(n.id, open) : undefined,
        )}
      >
        <span class="tree-name" style={indent(row.depth)}>
          <span
            class="twisty"
            data-testid={row.expandable ? "node-toggle" : undefined}
            onClick={(e) => {
              if (!row.expandable) return;
              e.stopPropagation();
              props.onToggle(n.id, !row.expanded);
            }}
          >
            {row.expandable ? (row.expanded ? "▾" : "▸") : ""}
          </span>
          <span class="label" title={`${n.nodeTypeId}@${n.version} · ${n.id}`}>
            <span class="mono">{n.nodeTypeId}</span>
            <span class="muted">@{n.version}</span>
            {row.depth > 0 && <span class="muted mono"> · {n.id.slice(-6)}</span>}
            {n.children.length > 0 && <span class="muted"> · {formatCount(n.children.length)} children</span>}
            {n.approvalId && <span class="badge pending"> waits for approval</span>}
          </span>
        </span>
        <StateBadge state={n.state} testid="node-state" />
        <span class="num" title="attempt" data-testid="node-attempt">
          {n.attempt > 1 ? `×${n.attempt}` : ""}
        </span>
        <span class="num" data-testid="node-duration">
          {duration}
        </span>
        <Bar start={start} end={n.endedAt} state={n.state} axis={axis} now={props.now} />
      </div>
    );
  };
  return (
    <div data-testid="node-tree">
      <div class="tree-head">
        <span>NodeRun</span>
        <span>State</span>
        <span class="num">Att.</span>
        <span class="num">Duration</span>
        <span class="axis" data-testid="timeline">
          <span>0</span>
          <span>{formatDuration(axis.end - axis.start)}</span>
        </span>
      </div>
      <VirtualList items={props.rows} rowHeight={ROW_HEIGHT} keyOf={(r) => r.key} renderRow={render} scrollToIndex={props.scrollToIndex} testid="node-list" />
    </div>
  );
}
