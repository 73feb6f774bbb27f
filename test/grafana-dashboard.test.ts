/**
 * docs/grafana/nodefabric.json against the telemetry catalogue (plugins/telemetry/src/catalogue.ts), so the dashboard
 * cannot drift from what /metrics serves: a panel that names a metric or a label the catalogue does not give would
 * show "No data" to an operator, and a metric the catalogue adds or renames without a panel would go unseen.
 *
 * The checks read each PromQL expression as text: string literals are blanked first, then metric names (identifiers
 * starting nodefabric_, process_ or nodejs_), `{label op "value"}` matchers, `by (...)` / `without (...)` clauses with
 * the aggregation's argument they apply to, vector matching clauses (`on`, `ignoring`, `group_left`, `group_right`)
 * and the `{{label}}` of each legend are picked out. That is enough for the expressions a dashboard holds; it is not a
 * full PromQL parser.
 */
import { describe, it, expect } from "vitest";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { METRICS, type MetricSpec } from "../plugins/telemetry/src/catalogue.js";

const DASHBOARD_FILE = fileURLToPath(new URL("../docs/grafana/nodefabric.json", import.meta.url));

/** Process metrics prom-client serves on every target (not in the catalogue), with their Prometheus type. */
const PROCESS_METRICS: Readonly<Record<string, "counter" | "gauge">> = {
  process_cpu_seconds_total: "counter",
  process_cpu_user_seconds_total: "counter",
  process_cpu_system_seconds_total: "counter",
  process_start_time_seconds: "gauge",
  process_resident_memory_bytes: "gauge",
  process_open_fds: "gauge",
  nodejs_eventloop_lag_p50_seconds: "gauge",
  nodejs_eventloop_lag_p99_seconds: "gauge",
  nodejs_heap_size_total_bytes: "gauge",
  nodejs_heap_size_used_bytes: "gauge",
};

/** Catalogue metrics a dashboard may leave out. */
const OPTIONAL_METRICS = new Set(["nodefabric_metric_label_overflow_total"]);

/** Labels Prometheus adds to every series it scrapes. */
const TARGET_LABELS = ["job", "instance"];

/** One series name a query may use: which catalogue metric it belongs to, its labels, and whether it only grows. */
interface Series {
  metric: string;
  labels: ReadonlySet<string>;
  cumulative: boolean;
}

/** Every series name the catalogue and the process metrics give, histograms as their _bucket, _sum and _count. */
function seriesOf(catalogue: Record<string, MetricSpec>): Map<string, Series> {
  const series = new Map<string, Series>();
  for (const spec of Object.values(catalogue)) {
    const labels = [...spec.labels, ...TARGET_LABELS];
    if (spec.type === "histogram") {
      series.set(`${spec.name}_bucket`, { metric: spec.name, labels: new Set([...labels, "le"]), cumulative: true });
      series.set(`${spec.name}_sum`, { metric: spec.name, labels: new Set(labels), cumulative: true });
      series.set(`${spec.name}_count`, { metric: spec.name, labels: new Set(labels), cumulative: true });
    } else {
      series.set(spec.name, { metric: spec.name, labels: new Set(labels), cumulative: spec.type === "counter" });
    }
  }
  for (const [name, type] of Object.entries(PROCESS_METRICS)) {
    series.set(name, { metric: name, labels: new Set(TARGET_LABELS), cumulative: type === "counter" });
  }
  return series;
}

/** The expression with every string literal's content removed, so `{route="/v1/runs_x"}` names no metric. */
function blankStrings(expr: string): string {
  return expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""');
}

const METRIC_NAME = /(?<![A-Za-z0-9_:$])(?:nodefabric|process|nodejs)_[A-Za-z0-9_:]*/g;

function metricNames(text: string): string[] {
  return [...text.matchAll(METRIC_NAME)].map((m) => m[0]);
}

/** Index of the parenthesis that closes the one at `open`. */
function closingParen(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === "(") depth++;
    else if (text[i] === ")" && --depth === 0) return i;
  }
  return -1;
}

/** Index of the parenthesis that opens the one at `close`. */
function openingParen(text: string, close: number): number {
  let depth = 0;
  for (let i = close; i >= 0; i--) {
    if (text[i] === ")") depth++;
    else if (text[i] === "(" && --depth === 0) return i;
  }
  return -1;
}

const labelList = (list: string) => list.split(",").map((l) => l.trim()).filter((l) => l !== "");

interface Grouping {
  clause: "by" | "without";
  labels: string[];
  /** The text of the aggregation's argument: `sum by (x) (<here>)` or `sum(<here>) by (x)`. */
  argument: string;
}

/** The `by (...)` and `without (...)` clauses of an expression (strings blanked), each with what it aggregates. */
function groupings(expr: string, problems: string[], where: string): Grouping[] {
  const found: Grouping[] = [];
  for (const m of expr.matchAll(/\b(by|without)\s*\(([^()]*)\)/g)) {
    const end = m.index + m[0].length;
    const after = expr.slice(end).search(/\S/);
    let argument: string | undefined;
    if (after !== -1 && expr[end + after] === "(") {
      const open = end + after;
      const close = closingParen(expr, open);
      if (close !== -1) argument = expr.slice(open + 1, close);
    } else {
      const before = expr.slice(0, m.index).trimEnd();
      if (before.endsWith(")")) {
        const open = openingParen(expr, before.length - 1);
        if (open !== -1) argument = expr.slice(open + 1, before.length - 1);
      }
    }
    if (argument === undefined) {
      problems.push(`${where}: cannot find what "${m[0]}" aggregates`);
      continue;
    }
    found.push({ clause: m[1] as "by" | "without", labels: labelList(m[2]), argument });
  }
  return found;
}

/**
 * What is wrong with one PromQL expression, given the series the catalogue gives; `legend` is its legendFormat. A
 * `selector` (as label_values takes) is a bare series selector, so a counter there needs no rate().
 */
function expressionProblems(where: string, rawExpr: string, legend: string | undefined, series: Map<string, Series>, used: Set<string>, selector = false): string[] {
  const problems: string[] = [];
  const expr = blankStrings(rawExpr);
  const names = metricNames(expr);
  if (names.length === 0) problems.push(`${where}: names no metric`);

  const labelsOn = (name: string) => series.get(name)?.labels ?? new Set<string>();
  for (const name of names) {
    const s = series.get(name);
    if (!s) {
      problems.push(`${where}: metric ${name} is neither in the catalogue nor a process metric`);
      continue;
    }
    used.add(s.metric);
  }

  // Counters (and a histogram's series) only make sense through rate() or increase(); gauges never do.
  for (const m of expr.matchAll(METRIC_NAME)) {
    const s = series.get(m[0]);
    if (!s) continue;
    const inRate = /\b(?:rate|irate|increase)\s*\(\s*$/.test(expr.slice(0, m.index));
    if (s.cumulative && !inRate && !selector) problems.push(`${where}: counter ${m[0]} is used without rate() or increase()`);
    if (!s.cumulative && inRate) problems.push(`${where}: gauge ${m[0]} is used inside rate() or increase()`);
  }

  // Every `{...}` selector belongs to a metric name, and matches only labels that metric has.
  const selectors = [...expr.matchAll(/([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}/g)];
  if (selectors.length !== (expr.match(/\{/g) ?? []).length) problems.push(`${where}: a {...} selector without a metric name`);
  for (const [, name, body] of selectors) {
    for (const matcher of labelList(body)) {
      const label = /^([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)/.exec(matcher)?.[1];
      if (!label) problems.push(`${where}: cannot read the matcher "${matcher}" of ${name}`);
      else if (series.has(name) && !labelsOn(name).has(label)) problems.push(`${where}: ${name} has no label ${label}`);
    }
  }

  // `by` and `without` name only labels of the metrics they aggregate.
  const groups = groupings(expr, problems, where);
  for (const g of groups) {
    const inside = metricNames(g.argument).filter((n) => series.has(n));
    for (const label of g.labels) {
      for (const name of inside) if (!labelsOn(name).has(label)) problems.push(`${where}: ${g.clause} (${g.labels.join(", ")}) names ${label}, which ${name} does not have`);
    }
  }

  // Vector matching names only labels every metric of the expression has.
  for (const m of expr.matchAll(/\b(on|ignoring|group_left|group_right)\s*\(([^()]*)\)/g)) {
    for (const label of labelList(m[2])) {
      for (const name of names) if (series.has(name) && !labelsOn(name).has(label)) problems.push(`${where}: ${m[1]} (${m[2]}) names ${label}, which ${name} does not have`);
    }
  }

  // A legend's {{label}} must be on the series the query returns: on its metrics, and kept by every aggregation.
  for (const m of (legend ?? "").matchAll(/\{\{\s*([^}\s]+)\s*\}\}/g)) {
    const label = m[1];
    for (const name of names) if (series.has(name) && !labelsOn(name).has(label)) problems.push(`${where}: legend {{${label}}}: ${name} has no label ${label}`);
    for (const g of groups) {
      const dropped = g.clause === "by" ? !g.labels.includes(label) : g.labels.includes(label);
      if (dropped) problems.push(`${where}: legend {{${label}}}, but ${g.clause} (${g.labels.join(", ")}) drops it`);
    }
  }

  // A quantile is taken over a histogram's buckets, aggregated by le.
  if (/\bhistogram_quantile\s*\(/.test(expr)) {
    if (!names.every((n) => n.endsWith("_bucket"))) problems.push(`${where}: histogram_quantile over something other than _bucket series`);
    if (!groups.some((g) => g.clause === "by" && g.labels.includes("le"))) problems.push(`${where}: histogram_quantile without "by (le, ...)"`);
  }
  return problems;
}

interface Target {
  refId?: string;
  expr?: string;
  legendFormat?: string;
  datasource?: { type?: string; uid?: string };
}

interface Panel {
  id?: number;
  type?: string;
  title?: string;
  gridPos?: { h?: number; w?: number; x?: number; y?: number };
  datasource?: { type?: string; uid?: string } | null;
  targets?: Target[];
  panels?: Panel[];
  fieldConfig?: { defaults?: { unit?: string } };
}

interface Variable {
  name: string;
  type: string;
  query?: string | { query?: string };
  datasource?: { type?: string; uid?: string };
  current?: { value?: unknown };
}

interface Dashboard {
  __inputs?: { name: string; type: string; pluginId: string }[];
  schemaVersion?: number;
  uid?: string;
  title?: string;
  panels?: Panel[];
  templating?: { list?: Variable[] };
}

const DATASOURCE = { type: "prometheus", uid: "${datasource}" };

/** Units a panel may show, by what its values are. */
const UNITS = new Set(["s", "reqps", "short", "percentunit", "bytes"]);

/** Every panel, those inside collapsed rows too. */
function allPanels(d: Dashboard): Panel[] {
  return (d.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** Everything wrong with a dashboard, given a catalogue: empty when it may ship. */
function dashboardProblems(d: Dashboard, catalogue: Record<string, MetricSpec>): string[] {
  const problems: string[] = [];
  const series = seriesOf(catalogue);
  const used = new Set<string>();
  const panels = allPanels(d);

  if (!d.__inputs?.some((i) => i.name === "DS_PROMETHEUS" && i.type === "datasource" && i.pluginId === "prometheus")) {
    problems.push("__inputs has no DS_PROMETHEUS data source of plugin prometheus");
  }
  const variables = d.templating?.list ?? [];
  const dsVariable = variables.find((v) => v.name === "datasource");
  if (!dsVariable || dsVariable.type !== "datasource" || dsVariable.query !== "prometheus") problems.push('no templating variable "datasource" of type datasource for prometheus');
  else if (JSON.stringify(dsVariable.current ?? {}).indexOf("${DS_PROMETHEUS}") === -1) problems.push("the datasource variable does not default to the data source chosen at import (${DS_PROMETHEUS})");

  for (const name of ["job", "instance"]) {
    const v = variables.find((x) => x.name === name);
    if (!v) {
      problems.push(`no templating variable "${name}"`);
      continue;
    }
    if (v.datasource?.uid !== DATASOURCE.uid) problems.push(`variable ${name} does not use the datasource variable`);
    const query = typeof v.query === "string" ? v.query : v.query?.query ?? "";
    const lv = /^label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$/.exec(query.trim());
    if (!lv) {
      problems.push(`variable ${name}: query "${query}" is not label_values(<selector>, <label>)`);
      continue;
    }
    problems.push(...expressionProblems(`variable ${name}`, lv[1], `{{${lv[2]}}}`, series, new Set(), true));
  }

  const ids = new Set<number>();
  const cells = new Map<string, string>();
  for (const p of panels) {
    const where = `panel ${p.id} "${p.title}"`;
    if (typeof p.id !== "number") problems.push(`${where}: no numeric id`);
    else if (ids.has(p.id)) problems.push(`${where}: id ${p.id} is used twice`);
    else ids.add(p.id);

    const g = p.gridPos;
    if (!g || ![g.h, g.w, g.x, g.y].every((n) => Number.isInteger(n) && n! >= 0) || g.w! < 1 || g.h! < 1 || g.x! + g.w! > 24) {
      problems.push(`${where}: no gridPos within Grafana's 24 columns`);
    } else if (!(d.panels ?? []).some((top) => top.panels?.includes(p))) {
      for (let x = g.x!; x < g.x! + g.w!; x++) {
        for (let y = g.y!; y < g.y! + g.h!; y++) {
          const other = cells.get(`${x},${y}`);
          if (other) problems.push(`${where}: overlaps ${other} at column ${x}, row ${y}`);
          cells.set(`${x},${y}`, where);
        }
      }
    }
    if (p.type === "row") continue;

    if (p.datasource?.type !== DATASOURCE.type || p.datasource?.uid !== DATASOURCE.uid) problems.push(`${where}: datasource is not the datasource variable`);
    if (!["timeseries", "stat"].includes(p.type ?? "")) problems.push(`${where}: panel type ${p.type} (timeseries or stat expected)`);
    const unit = p.fieldConfig?.defaults?.unit;
    if (!unit || !UNITS.has(unit)) problems.push(`${where}: unit ${unit} is not one of ${[...UNITS].join(", ")}`);
    const targets = (p.targets ?? []).filter((t) => typeof t.expr === "string" && t.expr.trim() !== "");
    if (targets.length === 0) problems.push(`${where}: no target with an expr`);
    for (const t of targets) {
      const at = `${where} target ${t.refId}`;
      if (t.datasource && (t.datasource.type !== DATASOURCE.type || t.datasource.uid !== DATASOURCE.uid)) problems.push(`${at}: datasource is not the datasource variable`);
      problems.push(...expressionProblems(at, t.expr!, t.legendFormat, series, used));
    }
  }

  for (const spec of Object.values(catalogue)) {
    if (!used.has(spec.name) && !OPTIONAL_METRICS.has(spec.name)) problems.push(`catalogue metric ${spec.name} is on no panel`);
  }
  return problems;
}

function readDashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD_FILE, "utf8")) as Dashboard;
}

/** A copy of the catalogue with one metric changed. */
function catalogueWith(key: keyof typeof METRICS, change: Partial<MetricSpec>): Record<string, MetricSpec> {
  return { ...METRICS, [key]: { ...METRICS[key], ...change } };
}

describe("docs/grafana/nodefabric.json", () => {
  it("is a JSON dashboard Grafana can import, with a Prometheus chosen at import", () => {
    const text = readFileSync(DASHBOARD_FILE, "utf8");
    expect(() => JSON.parse(text)).not.toThrow();
    const d = readDashboard();
    expect(d.title).toBe("NodeFabric");
    expect(d.uid).toMatch(/^[A-Za-z0-9_-]{1,40}$/);
    expect(d.schemaVersion).toBeGreaterThanOrEqual(36);
    // Every ${...} left after import is a dashboard variable or the import input, or Grafana shows it as text.
    const known = new Set(["${DS_PROMETHEUS}", ...(d.templating?.list ?? []).map((v) => `\${${v.name}}`)]);
    expect([...new Set(text.match(/\$\{[^}]+\}/g) ?? [])].filter((v) => !known.has(v))).toEqual([]);
  });

  it("uses only the catalogue's metrics and labels, and shows every metric of it", () => {
    expect(dashboardProblems(readDashboard(), METRICS)).toEqual([]);
  });

  it("has the panels an operator looks for, by title", () => {
    const titles = allPanels(readDashboard()).map((p) => p.title ?? "");
    for (const wanted of [/^Runs$/, /Runs started\/s by node type/, /Runs ended\/s by state/, /failure ratio/i, /Run duration p50 \/ p95 \/ p99/, /NodeRun duration p95 by node type/, /Queue depth/, /Oldest queued/, /Dispatch in flight/, /Executor in flight/, /Retries\/s by reason/, /Timeouts\/s by node type/, /Budget failures/, /PDP decisions\/s by outcome/, /PDP decision latency p95/, /Request rate by service and route/, /p95 latency by route/, /5xx ratio/, /Write latency p50 \/ p99/, /Parts per transaction/, /Events per transaction/, /Transactions\/s by outcome/, /Event followers by service/, /CPU/, /Resident memory/, /Event loop lag/, /Heap used/]) {
      expect(titles.some((t) => wanted.test(t)), `a panel titled ${wanted}`).toBe(true);
    }
  });

  it("fails when the catalogue renames a metric", () => {
    const renamed = catalogueWith("queueDepth", { name: "nodefabric_dispatch_queue_depth" });
    const problems = dashboardProblems(readDashboard(), renamed);
    expect(problems).toContain("catalogue metric nodefabric_dispatch_queue_depth is on no panel");
    expect(problems.some((p) => p.includes("metric nodefabric_queue_depth is neither in the catalogue nor a process metric"))).toBe(true);
  });

  it("fails when the catalogue renames a histogram", () => {
    const renamed = catalogueWith("httpDuration", { name: "nodefabric_http_duration_seconds" });
    const problems = dashboardProblems(readDashboard(), renamed);
    expect(problems).toContain("catalogue metric nodefabric_http_duration_seconds is on no panel");
    expect(problems.some((p) => p.includes("nodefabric_http_request_duration_seconds_bucket is neither"))).toBe(true);
    expect(problems.some((p) => p.startsWith("variable job: metric nodefabric_http_request_duration_seconds_count"))).toBe(true);
  });

  it("fails when a label the dashboard groups, matches or shows by leaves the catalogue", () => {
    const problems = dashboardProblems(readDashboard(), catalogueWith("runsEnded", { labels: ["node_type_id", "final_state"] }));
    expect(problems.some((p) => /by \(state\) names state, which nodefabric_runs_ended_total does not have/.test(p))).toBe(true);
    expect(problems.some((p) => /nodefabric_runs_ended_total has no label state$/.test(p))).toBe(true);
    expect(problems.some((p) => /legend \{\{state\}\}: nodefabric_runs_ended_total has no label state/.test(p))).toBe(true);
  });

  it("fails when a gauge becomes a counter, or a panel takes the rate of a gauge", () => {
    const asCounter = dashboardProblems(readDashboard(), catalogueWith("eventFollowers", { type: "counter" }));
    expect(asCounter.some((p) => p.includes("counter nodefabric_event_followers is used without rate() or increase()"))).toBe(true);

    const d = readDashboard();
    const panel = allPanels(d).find((p) => p.title === "Queue depth")!;
    panel.targets![0].expr = 'rate(nodefabric_queue_depth{job=~"$job"}[$__rate_interval])';
    expect(dashboardProblems(d, METRICS).some((p) => p.includes("gauge nodefabric_queue_depth is used inside rate()"))).toBe(true);
  });

  it("fails on a panel without the datasource variable, a duplicate id, or a legend label its query drops", () => {
    const d = readDashboard();
    const [first, second] = allPanels(d).filter((p) => p.type !== "row");
    first.datasource = { type: "prometheus", uid: "prometheus-prod" };
    second.id = first.id;
    const legendPanel = allPanels(d).find((p) => p.title === "Runs started/s by node type")!;
    legendPanel.targets![0].legendFormat = "{{node_type_id}} {{job}}";
    const problems = dashboardProblems(d, METRICS);
    expect(problems.some((p) => p.includes("datasource is not the datasource variable"))).toBe(true);
    expect(problems.some((p) => p.includes(`id ${first.id} is used twice`))).toBe(true);
    expect(problems.some((p) => p.includes("legend {{job}}, but by (node_type_id) drops it"))).toBe(true);
  });
});
