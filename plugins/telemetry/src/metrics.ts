/**
 * The metrics half of the plugin: one prom-client registry per process, fed by core's diagnostics channels (what
 * happened) and by each service's `observe()` (what is going on now, read at scrape time).
 */
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import { cacheSizes, CHANNEL_NAMES, type CacheReport, type ChannelMessages, type ObservedValues, type ServiceName } from "@nodefabric/core";
import { MAX_LABEL_VALUES, METRICS, type MetricSpec } from "./catalogue.js";

/** The failure codes of an attempt that ran out of time. */
const TIMEOUT_CODES = new Set(["timeout", "upstream_timeout", "deadline_exceeded"]);

type Observer = () => Promise<ObservedValues>;

/** The registry of this process and what feeds it. */
export class FabricMetrics {
  readonly registry = new Registry();
  /** Each running service's `observe`, read when a scrape comes. */
  private readonly observers = new Map<object, { service: ServiceName; observe: Observer }>();
  private readonly seen = new Map<string, Set<string>>();
  private readonly listeners: [string, (message: unknown) => void][] = [];
  private readonly m;

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    const r = this.registry;
    const counter = (spec: MetricSpec) => new Counter({ name: spec.name, help: spec.help, labelNames: [...spec.labels], registers: [r] });
    const histogram = (spec: MetricSpec) => new Histogram({ name: spec.name, help: spec.help, labelNames: [...spec.labels], buckets: [...(spec.buckets ?? [])], registers: [r] });
    const gauge = (spec: MetricSpec, collect?: (g: Gauge) => Promise<void>) =>
      new Gauge({
        name: spec.name,
        help: spec.help,
        labelNames: [...spec.labels],
        registers: [r],
        ...(collect ? { async collect(this: Gauge) { await collect(this); } } : {}),
      });
    // Values read from the services when scraped, once per scrape however many gauges ask.
    let reading: Promise<{ service: ServiceName; values: ObservedValues }[]> | undefined;
    const read = () => {
      reading ??= Promise.all([...this.observers.values()].map(async (o) => ({ service: o.service, values: await o.observe().catch(() => ({}) as ObservedValues) }))).finally(() => {
        setImmediate(() => (reading = undefined));
      });
      return reading;
    };
    const sumOf = async (g: Gauge, field: keyof ObservedValues, pick: (vs: number[]) => number = (vs) => vs.reduce((a, b) => a + b, 0)) => {
      const vs = (await read()).map((o) => o.values[field]).filter((v): v is number => typeof v === "number");
      g.reset();
      if (vs.length > 0) g.set(pick(vs));
    };
    // What the process's caches hold, read once per scrape (core's list of tracked caches, observe/caches.ts). The
    // cache names are fixed in the code, so the label is bounded.
    let sizes: CacheReport[] | undefined;
    const cacheGauge = (g: Gauge, pick: (c: CacheReport) => number | undefined) => {
      if (!sizes) {
        sizes = cacheSizes();
        setImmediate(() => (sizes = undefined));
      }
      g.reset();
      for (const c of sizes) {
        const v = pick(c);
        if (v !== undefined) g.set({ cache: c.cache }, v);
      }
    };
    this.m = {
      runsStarted: counter(METRICS.runsStarted),
      runsEnded: counter(METRICS.runsEnded),
      runDuration: histogram(METRICS.runDuration),
      nodeRunDuration: histogram(METRICS.nodeRunDuration),
      nodeRunRetries: counter(METRICS.nodeRunRetries),
      nodeRunTimeouts: counter(METRICS.nodeRunTimeouts),
      budgetExceeded: counter(METRICS.budgetExceeded),
      queueDepth: gauge(METRICS.queueDepth, (g) => sumOf(g, "queue_depth", (vs) => Math.max(...vs))),
      queueOldestAge: gauge(METRICS.queueOldestAge, (g) => sumOf(g, "queue_oldest_age_seconds", (vs) => Math.max(...vs))),
      dispatchInFlight: gauge(METRICS.dispatchInFlight, (g) => sumOf(g, "dispatch_in_flight")),
      executorInFlight: gauge(METRICS.executorInFlight, async (g) => {
        g.reset();
        for (const o of await read()) {
          if (typeof o.values.executor_in_flight !== "number") continue;
          const executor = o.service === "composite-executor" ? "composite" : "atomic";
          g.inc({ executor }, o.values.executor_in_flight);
        }
      }),
      pdpDecisions: counter(METRICS.pdpDecisions),
      pdpDecisionDuration: histogram(METRICS.pdpDecisionDuration),
      httpDuration: histogram(METRICS.httpDuration),
      storeWriteDuration: histogram(METRICS.storeWriteDuration),
      storeWriteBatchParts: histogram(METRICS.storeWriteBatchParts),
      storeWriteEvents: histogram(METRICS.storeWriteEvents),
      eventFollowers: gauge(METRICS.eventFollowers, async (g) => {
        g.reset();
        for (const o of await read()) if (typeof o.values.event_followers === "number") g.inc({ service: o.service }, o.values.event_followers);
      }),
      cacheEntries: gauge(METRICS.cacheEntries, async (g) => cacheGauge(g, (c) => c.entries)),
      cacheBytes: gauge(METRICS.cacheBytes, async (g) => cacheGauge(g, (c) => c.bytes)),
      cacheMaxEntries: gauge(METRICS.cacheMaxEntries, async (g) => cacheGauge(g, (c) => c.max_entries)),
      cacheMaxBytes: gauge(METRICS.cacheMaxBytes, async (g) => cacheGauge(g, (c) => c.max_bytes)),
      labelOverflow: counter(METRICS.labelOverflow),
    };
    this.listen();
  }

  /**
   * A label value as it may be used: the first MAX_LABEL_VALUES distinct values of a metric's label pass, later
   * ones are folded into "other" (and counted), so no input can make the series grow without bound.
   */
  private bounded(metric: string, label: string, value: string): string {
    const key = `${metric}\u0000${label}`;
    let values = this.seen.get(key);
    if (!values) this.seen.set(key, (values = new Set()));
    if (values.has(value)) return value;
    if (values.size >= MAX_LABEL_VALUES) {
      this.m.labelOverflow.inc({ metric });
      return "other";
    }
    values.add(value);
    return value;
  }

  private on<K extends keyof ChannelMessages>(kind: K, fn: (m: ChannelMessages[K]) => void): void {
    const listener = (message: unknown) => fn(message as ChannelMessages[K]);
    subscribe(CHANNEL_NAMES[kind], listener);
    this.listeners.push([CHANNEL_NAMES[kind], listener]);
  }

  private listen(): void {
    const m = this.m;
    const type = (metric: string, id: string) => this.bounded(metric, "node_type_id", id);
    this.on("runStarted", (e) => m.runsStarted.inc({ node_type_id: type(METRICS.runsStarted.name, e.node_type_id) }));
    this.on("runEnded", (e) => {
      const labels = { node_type_id: type(METRICS.runsEnded.name, e.node_type_id), state: e.state };
      m.runsEnded.inc(labels);
      m.runDuration.observe(labels, e.duration_ms / 1000);
    });
    this.on("nodeRunEnded", (e) => {
      const node_type_id = type(METRICS.nodeRunDuration.name, e.node_type_id);
      m.nodeRunDuration.observe({ node_type_id, kind: e.kind, state: e.state }, e.duration_ms / 1000);
      if (e.error_code && TIMEOUT_CODES.has(e.error_code) && e.state === "failed") m.nodeRunTimeouts.inc({ node_type_id: type(METRICS.nodeRunTimeouts.name, e.node_type_id) });
    });
    this.on("nodeRunRetrying", (e) => {
      m.nodeRunRetries.inc({ node_type_id: type(METRICS.nodeRunRetries.name, e.node_type_id), reason: this.bounded(METRICS.nodeRunRetries.name, "reason", e.reason) });
      if (TIMEOUT_CODES.has(e.reason)) m.nodeRunTimeouts.inc({ node_type_id: type(METRICS.nodeRunTimeouts.name, e.node_type_id) });
    });
    this.on("budgetExceeded", (e) => m.budgetExceeded.inc({ budget: this.bounded(METRICS.budgetExceeded.name, "budget", e.budget) }));
    this.on("pdpDecision", (e) => {
      const action = this.bounded(METRICS.pdpDecisions.name, "action", e.action);
      m.pdpDecisions.inc({ action, decision: e.decision });
      m.pdpDecisionDuration.observe({ action }, e.duration_ms / 1000);
    });
    this.on("storeWrite", (e) => {
      m.storeWriteDuration.observe({ store: e.store, outcome: e.ok ? "ok" : "error" }, e.duration_ms / 1000);
      if (e.ok) {
        m.storeWriteBatchParts.observe({ store: e.store }, e.parts);
        m.storeWriteEvents.observe({ store: e.store }, e.events);
      }
    });
    this.on("httpRequest", (e) => {
      const route = this.bounded(METRICS.httpDuration.name, "route", e.route);
      m.httpDuration.observe({ service: e.service, method: e.method, route, status_class: `${Math.floor(e.status / 100)}xx` }, e.duration_ms / 1000);
    });
  }

  /** A running service whose work the gauges read (until `forget`). */
  watch(key: object, service: ServiceName, observe: Observer): void {
    this.observers.set(key, { service, observe });
  }

  forget(key: object): void {
    this.observers.delete(key);
  }

  /** The text of a scrape. */
  async text(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** Stops listening to core (the last service of the process stopped). */
  close(): void {
    for (const [name, listener] of this.listeners) unsubscribe(name, listener);
    this.listeners.length = 0;
    this.registry.clear();
  }
}
