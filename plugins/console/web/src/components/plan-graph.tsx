/**
 * A declarative composite's plan drawn as SVG: one box per step (its id and node type), an arrow from each step to
 * the steps that wait for it, columns by depth (plan-layout.ts). Plain SVG: plans are small, and a graph library
 * would weigh more than the whole page.
 */
import { OUTPUTS_ID, type PlanGraph as Graph } from "../plan-layout";
import "./plan-graph.css";

const BOX_W = 200;
const BOX_H = 52;
const GAP_X = 64;
const GAP_Y = 24;
const PAD = 12;
const MAX_LABEL = 26;
const LANE_GAP = 10;

function clip(text: string): string {
  return text.length > MAX_LABEL ? `${text.slice(0, MAX_LABEL - 1)}…` : text;
}

const x = (column: number) => PAD + column * (BOX_W + GAP_X);
const y = (row: number) => PAD + row * (BOX_H + GAP_Y);

export function PlanGraph({ graph, nodeTypeHref }: { graph: Graph; nodeTypeHref(ref: string): string | undefined }) {
  const byId = new Map(graph.steps.map((s) => [s.id, s]));
  // An edge that skips a column would cross the boxes between; it runs in a lane of its own below every box instead.
  const long = graph.edges.filter(([from, to]) => byId.get(to)!.column - byId.get(from)!.column > 1);
  const boxesBottom = PAD + graph.rows * BOX_H + Math.max(0, graph.rows - 1) * GAP_Y;
  const laneY = (i: number) => boxesBottom + LANE_GAP * (i + 1);
  const width = PAD * 2 + graph.columns * BOX_W + Math.max(0, graph.columns - 1) * GAP_X;
  const height = boxesBottom + PAD + LANE_GAP * long.length;
  return (
    <div class="plan-graph-scroll">
      <svg
        data-testid="plan-graph"
        class="plan-graph"
        width={width}
        height={height}
        viewBox={`0 0 ${width} ${height}`}
        role="img"
        aria-label={`plan of ${graph.steps.length - 1} steps`}
      >
        <defs>
          <marker id="plan-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse">
            <path d="M 0 0 L 10 5 L 0 10 z" class="plan-arrow" />
          </marker>
        </defs>
        {graph.edges.map(([from, to]) => {
          const a = byId.get(from)!;
          const b = byId.get(to)!;
          const x1 = x(a.column) + BOX_W;
          const y1 = y(a.row) + BOX_H / 2;
          const x2 = x(b.column);
          const y2 = y(b.row) + BOX_H / 2;
          const lane = long.findIndex(([f, t]) => f === from && t === to);
          const mid = (x1 + x2) / 2;
          const d =
            lane < 0
              ? `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`
              : `M ${x1} ${y1} C ${x1 + GAP_X / 2} ${y1}, ${x1} ${laneY(lane)}, ${x1 + GAP_X / 2} ${laneY(lane)} ` +
                `L ${x2 - GAP_X / 2} ${laneY(lane)} C ${x2} ${laneY(lane)}, ${x2 - GAP_X / 2} ${y2}, ${x2} ${y2}`;
          return <path key={`${from}->${to}`} data-testid="plan-edge" data-from={from} data-to={to} class="plan-edge" d={d} marker-end="url(#plan-arrow)" />;
        })}
        {graph.steps.map((s) => {
          const isOutputs = s.id === OUTPUTS_ID;
          const href = isOutputs ? undefined : nodeTypeHref(s.nodeType);
          const flags = [s.forEach ? "for each" : "", s.when ? "when" : ""].filter(Boolean).join(", ");
          const box = (
            <g data-testid="plan-step" data-step={s.id} class={`plan-step${isOutputs ? " plan-outputs" : ""}${s.forEach ? " plan-fan-out" : ""}`}>
              <title>{isOutputs ? "the plan's outputs" : `${s.id}: ${s.nodeType}${flags ? ` (${flags})` : ""}`}</title>
              {s.forEach && <rect x={x(s.column) + 4} y={y(s.row) + 4} width={BOX_W} height={BOX_H} rx={6} class="plan-shadow" />}
              <rect x={x(s.column)} y={y(s.row)} width={BOX_W} height={BOX_H} rx={6} />
              <text x={x(s.column) + 10} y={y(s.row) + 20} class="plan-step-id">
                {isOutputs ? "outputs" : clip(s.id)}
                {flags && <tspan class="plan-flags"> · {flags}</tspan>}
              </text>
              {!isOutputs && (
                <text x={x(s.column) + 10} y={y(s.row) + 40} class="plan-step-type">
                  {clip(s.nodeType)}
                </text>
              )}
            </g>
          );
          return href ? (
            <a key={s.id} href={href}>
              {box}
            </a>
          ) : (
            <g key={s.id}>{box}</g>
          );
        })}
      </svg>
    </div>
  );
}
