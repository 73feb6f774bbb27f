/**
 * Scale check of a handler package generated from a large API (issue 11): `count` atomic node types in one
 * `defineAtomicSet` (realistic schemas: objects of 20 properties with nested `$defs`, a few KB each), served by an
 * Atomic Executor that registers them with a Node Registry in this process. Measures the time until the executor is
 * healthy, until every node type is registered, the resident memory, and the cost of a member's first execution
 * (its file read and its schemas compiled) against later ones.
 *
 *   npm run build && node test/bench/atomic-set-scale.mjs [--count 1000] [--executions 300] [--json]
 *
 * Targets: healthy in under 5 s, under 300 MB RSS. `--json` prints one JSON object (test/cli/atomic-set-scale.test.ts
 * reads it).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { request } from "undici";

// NODEFABRIC_CORE_DIST measures another build of core than core/dist (a folder holding index.js and sdk/index.js).
const CORE_DIST = process.env.NODEFABRIC_CORE_DIST ? path.resolve(process.env.NODEFABRIC_CORE_DIST) : fileURLToPath(new URL("../../core/dist/", import.meta.url));
const { buildAtomicExecutor, buildNodeRegistry, loadHandlers } = await import(pathToFileURL(path.join(CORE_DIST, "index.js")).href);

const { values: args } = parseArgs({
  options: {
    count: { type: "string", default: "1000" },
    executions: { type: "string", default: "300" },
    json: { type: "boolean", default: false },
  },
});
const COUNT = Number(args.count);
const EXECUTIONS = Math.min(Number(args.executions), COUNT);
const SDK = pathToFileURL(path.join(CORE_DIST, "sdk", "index.js")).href;

/** One generated operation: an object input of 20 properties with nested $defs, a paged output. */
function nodeType(i) {
  const properties = {};
  for (let p = 0; p < 20; p++) {
    const name = `param_${p}`;
    properties[name] =
      p % 5 === 0
        ? { $ref: "#/$defs/Address", description: `Where ${name} applies` }
        : p % 5 === 1
          ? { type: "string", pattern: "^[A-Za-z0-9_-]{1,64}$", description: `The ${name} identifier of the resource` }
          : p % 5 === 2
            ? { type: "string", format: "date-time", description: `When ${name} happened` }
            : p % 5 === 3
              ? { type: "integer", minimum: 0, maximum: 10_000, default: 10 }
              : { type: "array", items: { $ref: "#/$defs/Tag" }, maxItems: 50 };
  }
  return {
    node_type_id: `scale.api.operation${String(i).padStart(5, "0")}`,
    version: "1.0.0",
    kind: "atomic",
    description: `Operation ${i} of the generated API: reads or changes the resource of that name, with paging, filtering and tags.`,
    input_schema: {
      type: "object",
      properties,
      required: ["param_1"],
      additionalProperties: false,
      $defs: {
        Address: {
          type: "object",
          properties: {
            street: { type: "string", maxLength: 200 },
            city: { type: "string" },
            postcode: { type: "string", pattern: "^[0-9A-Z -]{3,10}$" },
            country: { $ref: "#/$defs/Country" },
            geo: { $ref: "#/$defs/Geo" },
          },
          required: ["city", "country"],
        },
        Country: { type: "string", enum: ["NO", "SE", "DK", "FI", "IS", "DE", "FR", "NL", "GB", "US"] },
        Geo: { type: "object", properties: { lat: { type: "number", minimum: -90, maximum: 90 }, lon: { type: "number", minimum: -180, maximum: 180 } } },
        Tag: { type: "object", properties: { key: { type: "string" }, value: { type: "string" } }, required: ["key"] },
      },
    },
    output_schema: {
      type: "object",
      properties: {
        status: { type: "integer" },
        body: { type: "object", properties: { items: { type: "array", items: { type: "object" } }, next_page: { type: ["string", "null"] } } },
      },
      required: ["status"],
    },
    constraints: { gates: { side_effect_class: i % 3 === 0 ? "write" : "read" } },
    extensions: { "acme.operation": { method: i % 3 === 0 ? "POST" : "GET", path: `/resources/r${i}/{param_1}` } },
  };
}

/** Writes a handler package whose one module exports a set of COUNT node types; returns its directory and the bytes written. */
function generatePackage(root) {
  const dir = path.join(root, "node_modules", "@acme", "scale-api");
  mkdirSync(path.join(dir, "node-types", "ops"), { recursive: true });
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "@acme/scale-api", version: "1.0.0", type: "module", nodefabric: { handlers: ["./index.js"] } }));
  writeFileSync(
    path.join(dir, "index.js"),
    `import { defineAtomicSet } from ${JSON.stringify(SDK)};
export default defineAtomicSet({
  directory: new URL("./node-types/", import.meta.url),
  handler: (inputs, ctx) => ({ status: 200, body: { items: [{ operation: ctx.nodeType.node_type_id, path: ctx.nodeType.extensions["acme.operation"].path }], next_page: null } }),
});
`,
  );
  const entries = [];
  let bytes = 0;
  for (let i = 0; i < COUNT; i++) {
    const nt = nodeType(i);
    const text = JSON.stringify(nt, null, 2);
    bytes += text.length;
    const file = `ops/${nt.node_type_id}.json`;
    writeFileSync(path.join(dir, "node-types", file), text);
    entries.push({ node_type_id: nt.node_type_id, version: nt.version, file });
  }
  writeFileSync(path.join(dir, "node-types", "index.json"), JSON.stringify({ node_types: entries }));
  return { dir, bytes };
}

async function json(url, init = {}) {
  const res = await request(url, { ...init, headers: { "content-type": "application/json", ...(init.headers ?? {}) } });
  return { status: res.statusCode, body: await res.body.json() };
}

async function until(probe, timeoutMs) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 10));
  }
}

const mb = (bytes) => Math.round(bytes / 1024 / 1024);
const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const round = (ms) => Math.round(ms * 10) / 10;

const root = mkdtempSync(path.join(os.tmpdir(), "nf-scale-"));
const progress = [];
let peak = process.memoryUsage().rss;
const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
const opened = [];
try {
  const { bytes } = generatePackage(root);
  const rssBefore = process.memoryUsage().rss;
  const registry = await buildNodeRegistry({ logger: false, dbPath: path.join(root, "registry.db") });
  await registry.listen({ host: "127.0.0.1", port: 0 });
  opened.push(registry);
  const registryUrl = `http://127.0.0.1:${registry.server.address().port}`;

  const started = performance.now();
  const handlers = await loadHandlers({
    discover: [root],
    logger: { info: (obj, msg) => obj.progress && progress.push(msg), warn: (_obj, msg) => progress.push(`warning: ${msg}`) },
  });
  const loadedMs = performance.now() - started;
  const executor = await buildAtomicExecutor({ logger: false, handlers, registryUrl, executorInstanceId: "scale-executor" });
  await executor.listen({ host: "127.0.0.1", port: 0 });
  opened.push(executor);
  const executorUrl = `http://127.0.0.1:${executor.server.address().port}`;
  const healthyMs = await until(async () => {
    const res = await json(`${executorUrl}/v1/health`);
    const handlersCheck = res.body.checks?.find((c) => c.name === "handlers");
    return res.status === 200 && handlersCheck?.status === "ok" ? performance.now() - started : undefined;
  }, 60_000);
  const registeredMs = await until(async () => {
    const res = await json(`${registryUrl}/v1/executors`);
    const me = res.body.find?.((e) => e.executor_instance_id === "scale-executor");
    return me && me.node_types.length === COUNT ? performance.now() - started : undefined;
  }, 300_000);
  const rssRegistered = process.memoryUsage().rss;

  // First executions of distinct members (file read, schemas compiled), then the same members again.
  const body = (i, n) => ({
    body: JSON.stringify({
      run_id: `run_${n}`,
      node_run_id: `nr_${n}`,
      node_type_ref: { node_type_id: nodeType(i).node_type_id, version: "1.0.0" },
      inputs: { param_1: "abc", param_3: 5, param_0: { city: "Oslo", country: "NO" } },
    }),
    method: "POST",
  });
  const first = [];
  const warm = [];
  let failures = 0;
  for (let i = 0; i < EXECUTIONS; i++) {
    const t = performance.now();
    const res = await json(`${executorUrl}/v1/atomic-node-runs:execute`, body(i, `a${i}`));
    first.push(performance.now() - t);
    if (res.body.state !== "completed") failures++;
  }
  for (let i = 0; i < EXECUTIONS; i++) {
    const t = performance.now();
    const res = await json(`${executorUrl}/v1/atomic-node-runs:execute`, body(i % 50, `b${i}`));
    warm.push(performance.now() - t);
    if (res.body.state !== "completed") failures++;
  }
  first.sort((a, b) => a - b);
  warm.sort((a, b) => a - b);
  const rssExecuted = process.memoryUsage().rss;
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().rss);

  const result = {
    node_types: COUNT,
    bytes_on_disk: bytes,
    avg_node_type_bytes: Math.round(bytes / COUNT),
    load_ms: Math.round(loadedMs),
    healthy_ms: Math.round(healthyMs),
    registered_ms: Math.round(registeredMs),
    rss_before_mb: mb(rssBefore),
    rss_registered_mb: mb(rssRegistered),
    rss_after_executions_mb: mb(rssExecuted),
    rss_peak_mb: mb(peak),
    executions: EXECUTIONS,
    execution_failures: failures,
    first_execution_p50_ms: round(pct(first, 50)),
    first_execution_p99_ms: round(pct(first, 99)),
    warm_execution_p50_ms: round(pct(warm, 50)),
    progress,
  };
  if (args.json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } else {
    const n = COUNT.toLocaleString("en-US");
    process.stdout.write(
      [
        ...progress,
        `${n} node types in one set, ${(bytes / COUNT / 1024).toFixed(1)} KB each (${(bytes / 1024 / 1024).toFixed(1)} MB on disk)`,
        `loaded in       ${result.load_ms} ms`,
        `healthy after   ${result.healthy_ms} ms   (target: under 5,000 ms)`,
        `registered after ${result.registered_ms} ms (all ${n} published in batches, executor in the directory)`,
        `RSS             ${result.rss_before_mb} MB before, ${result.rss_registered_mb} MB registered, ${result.rss_after_executions_mb} MB after ${EXECUTIONS} distinct members ran, peak ${result.rss_peak_mb} MB (target: under 300 MB)`,
        `first execution of a member  p50 ${result.first_execution_p50_ms} ms, p99 ${result.first_execution_p99_ms} ms (file read, schemas compiled)`,
        `later executions             p50 ${result.warm_execution_p50_ms} ms`,
        failures > 0 ? `! ${failures} executions did not complete` : "",
      ]
        .filter(Boolean)
        .join("\n") + "\n",
    );
  }
} finally {
  clearInterval(sampler);
  for (const app of opened.reverse()) await app.close();
  rmSync(root, { recursive: true, force: true });
}
