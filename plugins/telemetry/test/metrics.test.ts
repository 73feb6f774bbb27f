/**
 * GET /metrics as Prometheus scrapes it: a real fabric with the telemetry plugin, scraped by a real Prometheus (its
 * own text-format parser) and linted by promtool, the values read back through Prometheus's query API as runs start,
 * retry, time out, pass budgets and end; gauges read while work is in flight; the scope it needs when authentication
 * is on; its own port; bounded labels.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { channel } from "node:diagnostics_channel";
import { fileURLToPath } from "node:url";
import { CHANNEL_NAMES, loadConfig, startFabric, SERVICE_NAMES, type RunningFabric } from "@nodefabric/core";
import { defineAtomic, HandlerError } from "@nodefabric/core/sdk";
import telemetry, { MAX_LABEL_VALUES, METRICS, metricsPortAddress } from "../src/index.js";
import { FabricMetrics } from "../src/metrics.js";
import { startTestIssuer, type TestIssuer } from "../../../core/test/support/test-issuer.js";
import { promtoolCheck, startPrometheus, type Prometheus } from "./prometheus.js";

const repoRoot = fileURLToPath(new URL("../../..", import.meta.url));
const loaded = { definition: telemetry, source: "@nodefabric/plugin-telemetry", file: "index.ts", discovered: false };

/** GETs a scrape as Prometheus does; fails on anything but 200 in the text format. */
async function scrapeText(url: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(url, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
}

let release: (() => void) | undefined;
let flakyCalls = 0;

const echo = defineAtomic({
  nodeType: { node_type_id: "m.echo", version: "1.0.0", description: "echo", input_schema: { type: "object" }, constraints: { gates: { side_effect_class: "read" } } },
  async handler(inputs) {
    return { echo: inputs };
  },
});
const flaky = defineAtomic({
  nodeType: {
    node_type_id: "m.flaky",
    version: "1.0.0",
    description: "fails its first attempt",
    input_schema: { type: "object" },
    constraints: { gates: { side_effect_class: "read" } },
    extensions: { "nodefabric.retry": { max_attempts: 3, initial_interval_ms: 10, max_interval_ms: 20 } },
  },
  async handler(_inputs, ctx) {
    flakyCalls++;
    if (ctx.attempt === 1) throw new HandlerError("upstream_error", "first attempt fails", { retryable: true });
    return { attempt: ctx.attempt };
  },
});
const slow = defineAtomic({
  nodeType: {
    node_type_id: "m.slow",
    version: "1.0.0",
    description: "outlives its timeout",
    input_schema: { type: "object" },
    constraints: { gates: { side_effect_class: "read" } },
    extensions: { "nodefabric.timeout_ms": 100, "nodefabric.retry": { max_attempts: 1 } },
  },
  async handler(_inputs, ctx) {
    await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
    return {};
  },
});
const held = defineAtomic({
  nodeType: { node_type_id: "m.held", version: "1.0.0", description: "waits until released", input_schema: { type: "object" }, constraints: { gates: { side_effect_class: "read" } } },
  async handler() {
    await new Promise<void>((resolve) => (release = resolve));
    return { released: true };
  },
});

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe("GET /metrics on a running fabric, scraped by Prometheus", () => {
  let fabric: RunningFabric;
  let gw: string;
  let coordinator: string;
  let prom: Prometheus;
  /** A query's value as Prometheus has it once it satisfies `ok` (the scrapes come every 100 ms). */
  const expectQuery = async (q: string, expected: number | ((v: number | undefined) => boolean)) => {
    const ok = typeof expected === "number" ? (v: number | undefined) => v === expected : expected;
    const v = await prom.until(q, ok).catch((err: Error) => err);
    if (v instanceof Error) throw v;
    return v;
  };

  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-metrics-"));
    const config = { ...loadConfig({ cwd: dir, env: {} }), port_base: 0, data_dir: dir, log_level: "silent" as const };
    fabric = await startFabric(config, SERVICE_NAMES, { plugins: [loaded], definitions: [echo, flaky, slow, held] });
    gw = fabric.urls["run-gateway"]!;
    coordinator = fabric.urls["run-coordinator"]!;
    // Under `fabric dev` every service's /metrics shows the whole process: one target is the fabric.
    prom = await startPrometheus([coordinator]);
  }, 60_000);

  afterAll(async () => {
    release?.();
    await prom?.close();
    await fabric?.close();
  });

  const start = (node_type_id: string, extra: Record<string, unknown> = {}) =>
    post(`${gw}/v1/runs`, { root_node_type_ref: { node_type_id, version: "1.0.0" }, input: {}, ...extra }, { prefer: "wait=10" });

  it("serves every metric of the catalogue on every service, clean by promtool, and Prometheus scrapes it", async () => {
    for (const service of SERVICE_NAMES) {
      const text = await scrapeText(`${fabric.urls[service]}/metrics`);
      for (const spec of Object.values(METRICS)) expect(text, `${service}: # TYPE ${spec.name}`).toContain(`# TYPE ${spec.name} ${spec.type}\n`);
      expect(text).toContain("# TYPE process_cpu_user_seconds_total counter\n");
      // promtool lints names and help; prom-client's own process metrics draw its complaints (nodejs_active_handles_total
      // is a gauge with a _total suffix), the fabric's must draw none.
      const lint = promtoolCheck(text);
      expect(lint.output.split("\n").filter((l) => l.startsWith("nodefabric_")), "promtool check metrics").toEqual([]);
    }
    await expectQuery(`up{job="nodefabric"}`, 1);
    expect(await prom.targets()).toEqual([expect.objectContaining({ scrapeUrl: `${coordinator}/metrics`, health: "up", lastError: "" })]);
    await expectQuery("count(nodefabric_queue_depth)", 1);
  });

  it("counts runs started and ended, NodeRun durations, PDP decisions, HTTP requests and store writes as runs run", async () => {
    await expectQuery(`sum(nodefabric_runs_started_total{node_type_id="m.echo"}) or vector(0)`, 0);
    for (let i = 0; i < 3; i++) expect((await start("m.echo")).body.state).toBe("completed");

    await expectQuery(`sum(nodefabric_runs_started_total{node_type_id="m.echo"})`, 3);
    await expectQuery(`sum(nodefabric_runs_ended_total{node_type_id="m.echo", state="completed"})`, 3);
    await expectQuery(`sum(nodefabric_run_duration_seconds_count{node_type_id="m.echo", state="completed"})`, 3);
    await expectQuery(`sum(nodefabric_node_run_duration_seconds_count{node_type_id="m.echo", kind="atomic", state="completed"})`, 3);
    // A histogram's +Inf bucket is its count, and the quantile Prometheus computes from the buckets is a duration.
    await expectQuery(`sum(nodefabric_node_run_duration_seconds_bucket{node_type_id="m.echo", le="+Inf"})`, 3);
    await expectQuery(`histogram_quantile(0.5, sum by (le) (nodefabric_node_run_duration_seconds_bucket{node_type_id="m.echo"}))`, (v) => v !== undefined && v > 0 && v < 10);
    // run.start and node.run.execute, once each per run, allowed (the default policy allows everything).
    await expectQuery(`sum(nodefabric_pdp_decisions_total{action="run.start", decision="allow"})`, 3);
    await expectQuery(`sum(nodefabric_pdp_decisions_total{action="node.run.execute", decision="allow"})`, 3);
    await expectQuery(`sum(nodefabric_http_request_duration_seconds_count{service="run-gateway", method="POST", route="/v1/runs", status_class="2xx"})`, 3);
    // Routes are patterns, never paths with ids.
    await expectQuery(`count(nodefabric_http_request_duration_seconds_count{route=~".*run_[0-9a-z]{20,}.*"}) or vector(0)`, 0);
    await expectQuery(`sum(nodefabric_store_write_duration_seconds_count{store="runs", outcome="ok"})`, (v) => v !== undefined && v >= 3);
    await expectQuery(`sum(nodefabric_store_write_events_sum{store="runs"})`, (v) => v !== undefined && v >= 3 * 4);
  });

  it("counts retries by reason, timeouts, and runs failed for a budget", async () => {
    expect((await start("m.flaky")).body.state).toBe("completed");
    expect((await start("m.slow")).body.state).toBe("failed");
    // One external call allowed: the retry of the first failure would be the second.
    const budget = await start("m.flaky", { constraints: { budgets: { max_external_calls: 1 } } });
    expect(budget.body.state).toBe("failed");
    expect(budget.body.extensions["nodefabric.error"].code).toBe("budget_exceeded");

    await expectQuery(`sum(nodefabric_node_run_retries_total{node_type_id="m.flaky", reason="upstream_error"})`, 2);
    await expectQuery(`sum(nodefabric_node_run_timeouts_total{node_type_id="m.slow"})`, 1);
    await expectQuery(`sum(nodefabric_node_run_duration_seconds_count{node_type_id="m.slow", state="failed"})`, 1);
    await expectQuery(`sum(nodefabric_budget_exceeded_total{budget="max_external_calls"})`, 1);
    await expectQuery(`sum(nodefabric_runs_ended_total{node_type_id="m.flaky", state="failed"})`, 1);
    await expectQuery(`sum(nodefabric_runs_ended_total{node_type_id="m.flaky", state="completed"})`, 1);
    expect(flakyCalls).toBeGreaterThanOrEqual(3);
  });

  it("reads work in flight, the queue and event followers when scraped", async () => {
    const r = await post(`${gw}/v1/runs`, { root_node_type_ref: { node_type_id: "m.held", version: "1.0.0" }, input: {} });
    expect(r.status).toBe(200);
    const follow = new AbortController();
    const stream = await fetch(`${gw}/v1/runs/${r.body.run_id}/events?follow=true`, { signal: follow.signal });
    expect(stream.status).toBe(200);
    await expectQuery(`sum(nodefabric_executor_in_flight{executor="atomic"})`, 1);
    await expectQuery("sum(nodefabric_dispatch_in_flight)", 1);
    await expectQuery("sum(nodefabric_queue_depth)", 0);
    await expectQuery("max(nodefabric_queue_oldest_age_seconds)", 0);
    await expectQuery("sum(nodefabric_event_followers)", (v) => v !== undefined && v >= 1);

    release!();
    follow.abort();
    await expectQuery(`sum(nodefabric_runs_ended_total{node_type_id="m.held", state="completed"})`, 1);
    await expectQuery(`sum(nodefabric_executor_in_flight)`, 0);
    await expectQuery("sum(nodefabric_dispatch_in_flight)", 0);
  });
});

/** The value of one series in a scrape's text (`name{labels} value`), undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("what the process holds in memory", () => {
  let fabric: RunningFabric;
  let gw: string;

  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-metrics-caches-"));
    const config = { ...loadConfig({ cwd: dir, env: {} }), port_base: 0, data_dir: dir, log_level: "silent" as const };
    fabric = await startFabric(config, SERVICE_NAMES, { plugins: [loaded], definitions: [echo] });
    gw = fabric.urls["run-gateway"]!;
  }, 60_000);

  afterAll(async () => {
    await fabric?.close();
  });

  it("serves each cache's entries, bytes and bounds, which move as runs run, and the process's resident memory", async () => {
    const metrics = `${fabric.urls["run-coordinator"]}/metrics`;
    const before = await scrapeText(metrics);
    expect(sample(before, "process_resident_memory_bytes")).toBeGreaterThan(10 << 20);
    // Every cache a fabric has from its start is listed, with its bound where it has one.
    for (const cache of ["executor.result_cache", "engine.token_minted_at", "engine.composite_progress", "engine.run_locks", "store.open_runs", "store.ended_runs", "pdp.decisions"]) {
      expect(sample(before, `nodefabric_cache_entries{cache="${cache}"}`), cache).toBeGreaterThanOrEqual(0);
    }
    expect(sample(before, `nodefabric_cache_max_entries{cache="executor.result_cache"}`)).toBeGreaterThanOrEqual(10_000);
    expect(sample(before, `nodefabric_cache_max_bytes{cache="executor.result_cache"}`)).toBeGreaterThanOrEqual(64 << 20);
    expect(sample(before, `nodefabric_cache_max_bytes{cache="store.ended_runs"}`)).toBeGreaterThan(0);
    const results0 = sample(before, `nodefabric_cache_entries{cache="executor.result_cache"}`)!;
    const resultBytes0 = sample(before, `nodefabric_cache_bytes{cache="executor.result_cache"}`)!;
    const ended0 = sample(before, `nodefabric_cache_entries{cache="store.ended_runs"}`)!;

    const runs = 20;
    for (let i = 0; i < runs; i++) {
      const r = await post(`${gw}/v1/runs`, { root_node_type_ref: { node_type_id: "m.echo", version: "1.0.0" }, input: { i, pad: "x".repeat(1000) } }, { prefer: "wait=10" });
      expect(r.body.state).toBe("completed");
    }
    const after = await scrapeText(metrics);
    // An in-process executor's result is dropped once the coordinator has recorded it (no repeated delivery can come
    // for it), so these runs leave none in the result cache; each ended run is kept.
    expect(sample(after, `nodefabric_cache_entries{cache="executor.result_cache"}`)).toBeLessThanOrEqual(results0);
    expect(sample(after, `nodefabric_cache_bytes{cache="executor.result_cache"}`)).toBeLessThanOrEqual(resultBytes0);
    expect(sample(after, `nodefabric_cache_entries{cache="store.ended_runs"}`)).toBeGreaterThanOrEqual(Math.min(ended0 + runs, 1024));
    // What lives only while a run does is gone once it ended: nothing of these runs stays in the engine's maps (other
    // fabrics of this test process may hold some of their own: compared with before).
    for (const cache of ["engine.token_minted_at", "engine.composite_progress", "engine.run_locks", "engine.node_run_spans", "store.open_runs", "store.open_node_runs", "executor.running"]) {
      expect(sample(after, `nodefabric_cache_entries{cache="${cache}"}`), cache).toBeLessThanOrEqual(sample(before, `nodefabric_cache_entries{cache="${cache}"}`)!);
    }
  });
});

describe("the metrics' access", () => {
  let idp: TestIssuer;
  let fabric: RunningFabric | undefined;
  const proms: Prometheus[] = [];
  const env = process.env.FABRIC_METRICS_PORT;

  beforeAll(async () => {
    idp = await startTestIssuer();
  });
  afterAll(async () => {
    for (const p of proms) await p.close();
    await fabric?.close();
    await idp?.close();
    if (env === undefined) delete process.env.FABRIC_METRICS_PORT;
    else process.env.FABRIC_METRICS_PORT = env;
  });

  it("needs a token with metrics:read when authentication is on; FABRIC_METRICS_PORT serves them without, apart", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-metrics-auth-"));
    const keyFile = path.join(dir, "signing-key.json");
    fs.writeFileSync(keyFile, JSON.stringify(idp.keys[0]!.privateJwk));
    const flags = { port_base: 0, data_dir: path.join(dir, "data"), log_level: "silent", auth: { mode: "required", issuer: idp.issuer, jwks_url: idp.jwksUrl, signing_key_file: keyFile } };
    process.env.FABRIC_METRICS_PORT = "0";
    fabric = await startFabric(loadConfig({ cwd: repoRoot, env: {}, flags: flags as never }), ["node-registry", "run-coordinator"], { plugins: [loaded], definitions: [echo] });
    const coordinator = fabric.urls["run-coordinator"]!;
    const url = `${coordinator}/metrics`;
    const aud = "nodefabric-run-coordinator";

    const none = await fetch(url);
    expect(none.status).toBe(401);
    expect((await none.json()).error.code).toBe("unauthenticated");
    const reader = await fetch(url, { headers: { authorization: `Bearer ${await idp.mint({ aud, scope: "runs:read", sub: "someone", expiresIn: 600 })}` } });
    expect(reader.status).toBe(403);
    expect((await reader.json()).error).toMatchObject({ code: "permission_denied" });
    const token = await idp.mint({ aud, scope: "metrics:read", sub: "prometheus", expiresIn: 600 });
    expect(await scrapeText(url, { authorization: `Bearer ${token}` })).toContain("# TYPE nodefabric_queue_depth gauge");

    // Prometheus with the token scrapes it; without one it sees the target down, for the 401.
    const withToken = await startPrometheus([coordinator], { bearer: token });
    proms.push(withToken);
    await withToken.until(`up{job="nodefabric"}`, (v) => v === 1);
    const without = await startPrometheus([coordinator]);
    proms.push(without);
    await without.until(`up{job="nodefabric"}`, (v) => v === 0);
    expect((await without.targets())[0].lastError).toContain("401");

    // The port of their own: the same registry, no token, and nothing else on it.
    const port = metricsPortAddress();
    expect(port).toBeDefined();
    const apartUrl = `http://127.0.0.1:${port!.port}`;
    expect(await scrapeText(`${apartUrl}/metrics`)).toContain("# TYPE nodefabric_queue_depth gauge");
    const apart = await startPrometheus([apartUrl]);
    proms.push(apart);
    await apart.until(`up{job="nodefabric"}`, (v) => v === 1);
    await apart.until("count(nodefabric_queue_depth)", (v) => v === 1);
    const other = await fetch(`${apartUrl}/v1/runs`);
    expect(other.status).toBe(404);
    expect((await other.json()).error.code).toBe("route_not_found");

    await fabric.close();
    fabric = undefined;
    // The port closes with the last service of the process.
    expect(metricsPortAddress()).toBeUndefined();
    await expect(fetch(`${apartUrl}/metrics`)).rejects.toThrow();
  }, 60_000);
});

describe("label values are bounded", () => {
  it("folds node type ids past the bound into \"other\" and counts what it folded", async () => {
    const metrics = new FabricMetrics();
    try {
      const started = channel(CHANNEL_NAMES.runStarted);
      for (let i = 0; i < MAX_LABEL_VALUES + 100; i++) started.publish({ node_type_id: `flood.${i}` });
      started.publish({ node_type_id: "flood.0" });
      const text = (await metrics.text()).body;
      const series = text.split("\n").filter((l) => l.startsWith("nodefabric_runs_started_total{"));
      expect(series).toHaveLength(MAX_LABEL_VALUES + 1);
      expect(series).toContain('nodefabric_runs_started_total{node_type_id="other"} 100');
      expect(series).toContain('nodefabric_runs_started_total{node_type_id="flood.0"} 2');
      expect(text).toContain('nodefabric_metric_label_overflow_total{metric="nodefabric_runs_started_total"} 100');
      expect(promtoolCheck(text).output.split("\n").filter((l) => l.startsWith("nodefabric_"))).toEqual([]);
    } finally {
      metrics.close();
    }
  });
});
