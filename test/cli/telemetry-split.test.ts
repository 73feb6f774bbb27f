/**
 * One run is one trace, across the split deployment: each service in its own process (`fabric start <service>`) with
 * the telemetry plugin, exporting over OTLP/HTTP (protobuf from some processes, JSON from others) to a real receiver.
 * The client's traceparent, the gateway, the coordinator, the PDP, the executors, the handler's upstream call and the
 * upstream itself all meet in one trace with the right parents, and the Run names that trace.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePortBase, runFabric, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually } from "../run-client.js";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../support/otlp-receiver.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const PLUGIN = path.join(repo, "plugins/telemetry");
const HANDLERS = path.join(repo, "test/fixtures/telemetry-handlers");
const SERVICES = ["node-registry", "pdp", "selection", "atomic-executor", "composite-executor", "run-coordinator", "run-gateway"];

/** An upstream API of someone else's: records the traceparent of every request; `/flaky` fails its first call. */
function startUpstream(): Promise<{ url: string; seen: { path: string; traceparent?: string }[]; close(): Promise<void> }> {
  const seen: { path: string; traceparent?: string }[] = [];
  let flaky = 0;
  const server: Server = createServer((req: IncomingMessage, res) => {
    const p = (req.url ?? "/").split("?")[0];
    seen.push({ path: p, traceparent: req.headers.traceparent as string | undefined });
    // The first call to /hold never gets an answer: its coordinator is killed meanwhile.
    if (p === "/hold" && seen.filter((s) => s.path === "/hold").length === 1) {
      req.socket.once("close", () => undefined);
      return;
    }
    if (p === "/flaky" && flaky++ === 0) {
      res.writeHead(503, { "content-type": "application/json" }).end(JSON.stringify({ busy: true }));
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ path: p }));
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const a = server.address() as { port: number };
      resolve({ url: `http://127.0.0.1:${a.port}`, seen, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) });
    }),
  );
}

const hex = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join("");

/** The spans of one trace, with helpers to walk it. */
function traceOf(spans: ReceivedSpan[], traceId: string) {
  const mine = spans.filter((s) => s.traceId === traceId);
  const byId = new Map(mine.map((s) => [s.spanId, s]));
  const service = (s: ReceivedSpan) => String(s.resource["service.name"]);
  const find = (pred: (s: ReceivedSpan) => boolean, what: string) => {
    const found = mine.filter(pred);
    if (found.length === 0) throw new Error(`no span ${what} in trace ${traceId}; spans: ${mine.map((s) => `${service(s)}:${s.name}`).join(", ")}`);
    return found;
  };
  const parentOf = (s: ReceivedSpan) => (s.parentSpanId ? byId.get(s.parentSpanId) : undefined);
  return { spans: mine, find, parentOf, service };
}

describe("telemetry across the split fabric: one run, one trace", () => {
  const procs: FabricProcess[] = [];
  let receiver: OtlpReceiver;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let url: (name: string) => string;
  const startArgs = new Map<string, { args: string[]; env: Record<string, string> }>();

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    upstream = await startUpstream();
    const base = await freePortBase();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-telemetry-split-"));
    for (const [i, service] of SERVICES.entries()) {
      const env = {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        // Both OTLP/HTTP encodings in one fabric: the receiver must see one trace whatever each process sends.
        OTEL_EXPORTER_OTLP_PROTOCOL: i % 2 === 0 ? "http/protobuf" : "http/json",
        OTEL_BSP_SCHEDULE_DELAY: "50",
      };
      const args = ["start", service, "--auth", "disabled", "--port-base", String(base), "--data-dir", dataDir, "--plugin", PLUGIN, "--handlers", HANDLERS];
      startArgs.set(service, { args, env });
      procs.push(await startFabricProcess(args, { cwd: repo, env, expect: 1 }));
    }
    url = (name: string) => procs.find((p) => p.urls[name])!.urls[name];
    await eventually(async () => ((await call("GET", `${url("node-registry")}/v1/executors?node_type_id=tel.fanout`)).body.length > 0 ? true : undefined), 15_000, "the composite executor's registration");
    await eventually(async () => ((await call("GET", `${url("node-registry")}/v1/executors?node_type_id=tel.fetch`)).body.length > 0 ? true : undefined), 15_000, "the atomic executor's registration");
  }, 120_000);

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    await upstream?.close();
    await receiver?.close();
  });

  it("follows an atomic run from the client's traceparent to the upstream and back, with a retry in the same trace", async () => {
    const traceId = hex(32);
    const clientSpan = hex(16);
    const r = await call(
      "POST",
      `${url("run-gateway")}/v1/runs`,
      { root_node_type_ref: { node_type_id: "tel.fetch", version: "1.0.0" }, input: { url: `${upstream.url}/flaky` } },
      { prefer: "wait=20", traceparent: `00-${traceId}-${clientSpan}-01` },
    );
    expect(r.status).toBe(200);
    expect(r.body.state).toBe("completed");
    // The Run names its trace: a run found in the console leads to it.
    expect(r.body.run_context.trace.trace_id).toBe(traceId);
    expect(r.body.run_context.trace.span_id).toMatch(/^[0-9a-f]{16}$/);
    const runId: string = r.body.run_id;

    // Both calls the upstream got (the 503, then the retry) carried this trace.
    const calls = upstream.seen.filter((s) => s.path === "/flaky");
    expect(calls).toHaveLength(2);
    for (const c of calls) expect(c.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));

    const spans = await receiver.waitForSpans((all) => all.filter((s) => s.traceId === traceId && s.name === "GET").length >= 2 && all.some((s) => s.traceId === traceId && s.name === "node_run tel.fetch" && s.attributes["nodefabric.state"] === "completed") && all.some((s) => s.traceId === traceId && s.parentSpanId === clientSpan), 20_000);
    const t = traceOf(spans, traceId);

    // The gateway's server span continues the client's.
    const [gatewayServer] = t.find((s) => t.service(s) === "nodefabric-run-gateway" && s.name === "POST /v1/runs" && s.kind === 2, "gateway POST /v1/runs");
    expect(gatewayServer.parentSpanId).toBe(clientSpan);
    // Gateway → coordinator over HTTP: a client span in the gateway, the coordinator's server span under it.
    const [coordServer] = t.find((s) => t.service(s) === "nodefabric-run-coordinator" && s.name === "POST /v1/runs" && s.kind === 2, "coordinator POST /v1/runs");
    const gatewayClient = t.parentOf(coordServer)!;
    expect(gatewayClient).toMatchObject({ kind: 3 });
    expect(t.service(gatewayClient)).toBe("nodefabric-run-gateway");
    expect(gatewayClient.parentSpanId).toBe(gatewayServer.spanId);
    // The run's anchor, whose id the Run keeps.
    const [anchor] = t.find((s) => s.name === "run.start tel.fetch", "run.start");
    expect(anchor.parentSpanId).toBe(coordServer.spanId);
    expect(anchor.spanId).toBe(r.body.run_context.trace.span_id);
    expect(anchor.attributes["nodefabric.run_id"]).toBe(runId);
    // The run's start is written to the store in a span of its own, and the PDP decides in spans of their own.
    expect(t.find((s) => s.name === "store.write" && s.parentSpanId === anchor.spanId, "store.write").length).toBeGreaterThan(0);
    const pdpServer = t.find((s) => t.service(s) === "nodefabric-pdp" && s.name === "pdp.decide run.start", "pdp.decide run.start")[0];
    expect(pdpServer.attributes["nodefabric.pdp.decision"]).toBe("allow");
    // The run's first two questions go to the PDP in one request: one span in the coordinator naming both answers, and
    // in the PDP both decisions under that one request's server span.
    const [together] = t.find((s) => s.name === "policy run.start+node.run.execute" && s.parentSpanId === anchor.spanId, "policy run.start+node.run.execute");
    expect(together.attributes).toMatchObject({ "nodefabric.pdp.actions": ["run.start", "node.run.execute"], "nodefabric.pdp.decisions": ["allow", "allow"] });
    expect(t.find((s) => t.service(s) === "nodefabric-pdp" && s.name === "pdp.decide node.run.execute", "pdp.decide node.run.execute").some((s) => s.parentSpanId === pdpServer.parentSpanId)).toBe(true);
    expect(t.service(t.parentOf(pdpServer)!)).toBe("nodefabric-pdp");
    expect(t.parentOf(pdpServer)!.name).toBe("POST /v1/policy:decideBatch");

    // Two attempts of the root NodeRun, each its own span under the anchor: the first retried, the second completed.
    const attempts = t.find((s) => s.name === "node_run tel.fetch", "node_run tel.fetch").sort((a, b) => Number(a.attributes["nodefabric.attempt"]) - Number(b.attributes["nodefabric.attempt"]));
    expect(attempts.map((s) => [s.attributes["nodefabric.attempt"], s.attributes["nodefabric.state"]])).toEqual([[1, "retrying"], [2, "completed"]]);
    for (const a of attempts) {
      expect(a.parentSpanId).toBe(anchor.spanId);
      expect(a.attributes).toMatchObject({ "nodefabric.run_id": runId, "nodefabric.node_type_id": "tel.fetch", "nodefabric.node_type_version": "1.0.0" });
    }
    expect(attempts[0].status.code).toBe(2);
    expect(attempts[0].attributes["nodefabric.error.code"]).toBe("upstream_error");

    // Coordinator → executor → handler → upstream, for the attempt that completed.
    const execServer = t.find((s) => t.service(s) === "nodefabric-atomic-executor" && s.kind === 2 && s.name === "POST /v1/atomic-node-runs:execute", "executor execute").find((s) => t.parentOf(t.parentOf(s)!)?.spanId === attempts[1].spanId);
    expect(execServer, "the executor's server span of attempt 2, under the coordinator's client span").toBeDefined();
    const [handler] = t.find((s) => s.name === "handler tel.fetch" && s.parentSpanId === execServer!.spanId, "handler span");
    expect(handler.attributes).toMatchObject({ "nodefabric.node_run_id": attempts[1].attributes["nodefabric.node_run_id"], "nodefabric.attempt": 2, "nodefabric.state": "completed" });
    const [upstreamCall] = t.find((s) => s.name === "GET" && s.kind === 3 && s.parentSpanId === handler.spanId, "the upstream call");
    expect(upstreamCall.attributes).toMatchObject({ "http.request.method": "GET", "http.response.status_code": 200, "url.full": `${upstream.url}/flaky` });
    // The upstream saw that very span as its parent.
    expect(calls[1].traceparent).toBe(`00-${traceId}-${upstreamCall.spanId}-01`);

    // Every span of the run is in this one trace, and every parent is a span of it (or the client's).
    for (const s of t.spans) if (s.parentSpanId && s.parentSpanId !== clientSpan) expect(t.parentOf(s), `${t.service(s)}:${s.name}'s parent`).toBeDefined();
    const services = new Set(t.spans.map(t.service));
    for (const s of ["nodefabric-run-gateway", "nodefabric-run-coordinator", "nodefabric-pdp", "nodefabric-atomic-executor"]) expect(services).toContain(s);
  }, 60_000);

  it("keeps a composite and its children in the run's trace, through the composite executor's calls", async () => {
    const r = await call(
      "POST",
      `${url("run-gateway")}/v1/runs`,
      { root_node_type_ref: { node_type_id: "tel.fanout", version: "1.0.0" }, input: { urls: [`${upstream.url}/a`, `${upstream.url}/b`] } },
      { prefer: "wait=20" },
    );
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { statuses: [200, 200] } } });
    // No traceparent from the client: the fabric starts the trace, and the Run names it.
    const traceId: string = r.body.run_context.trace.trace_id;
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    for (const p of ["/a", "/b"]) expect(upstream.seen.find((s) => s.path === p)?.traceparent).toMatch(new RegExp(`^00-${traceId}-`));

    const spans = await receiver.waitForSpans((all) => all.filter((s) => s.traceId === traceId && s.name === "GET" && s.kind === 3).length >= 2 && all.some((s) => s.traceId === traceId && s.name === "node_run tel.fanout" && s.attributes["nodefabric.state"] === "completed") && all.some((s) => s.traceId === traceId && s.name === "composite tel.fanout"), 20_000);
    const t = traceOf(spans, traceId);
    const [anchor] = t.find((s) => s.name === "run.start tel.fanout", "run.start");
    expect(anchor.parentSpanId).toBeDefined();
    const [root] = t.find((s) => s.name === "node_run tel.fanout", "the composite's node_run span");
    expect(root.parentSpanId).toBe(anchor.spanId);
    const [composite] = t.find((s) => s.name === "composite tel.fanout", "the composite executor's span");
    expect(t.service(composite)).toBe("nodefabric-composite-executor");
    // :begin went out from the root's span; the composite's span descends from the executor's :begin server span.
    const begin = t.parentOf(composite)!;
    expect(begin).toMatchObject({ kind: 2, name: "POST /v1/composite-node-runs:begin" });
    expect(t.parentOf(t.parentOf(begin)!)?.spanId).toBe(root.spanId);

    // Each child's span descends from the composite's call that created it (composite → POST /v1/node-runs → child).
    const children = t.find((s) => s.name === "node_run tel.fetch", "the children's spans");
    expect(children).toHaveLength(2);
    for (const child of children) {
      expect(child.attributes["nodefabric.state"]).toBe("completed");
      let p: ReceivedSpan | undefined = t.parentOf(child);
      const chain: string[] = [];
      while (p && p.spanId !== composite.spanId) {
        chain.push(`${t.service(p)}:${p.name}`);
        p = t.parentOf(p);
      }
      expect(p?.spanId, `the child's ancestors: ${chain.join(" < ")}`).toBe(composite.spanId);
      expect(chain).toContain("nodefabric-run-coordinator:POST /v1/node-runs");
    }
  }, 60_000);

  it("keeps a run in its trace after its coordinator is killed and started again", async () => {
    const r = await call("POST", `${url("run-gateway")}/v1/runs`, { root_node_type_ref: { node_type_id: "tel.fetch", version: "1.0.0" }, input: { url: `${upstream.url}/hold` } });
    expect(r.status).toBe(200);
    const runId: string = r.body.run_id;
    const { trace_id: traceId, span_id: anchorId } = r.body.run_context.trace;
    await eventually(async () => (upstream.seen.some((s) => s.path === "/hold") ? true : undefined), 15_000, "the first call to /hold");

    // The coordinator dies with the NodeRun in flight, and starts again on the same data.
    const i = procs.findIndex((p) => p.urls["run-coordinator"]);
    await procs[i].stop("SIGKILL");
    const { args, env } = startArgs.get("run-coordinator")!;
    procs[i] = await startFabricProcess(args, { cwd: repo, env, expect: 1 });
    const done = await eventually(async () => {
      const g = await call("GET", `${url("run-gateway")}/v1/runs/${runId}`);
      return g.status === 200 && g.body.state === "completed" ? g.body : undefined;
    }, 60_000, "the run's completion after the restart");
    expect(done.run_context.trace).toMatchObject({ trace_id: traceId, span_id: anchorId });

    // The second call to the upstream, from the new coordinator's dispatch, is in the run's trace.
    const holds = upstream.seen.filter((s) => s.path === "/hold");
    expect(holds.length).toBeGreaterThanOrEqual(2);
    for (const h of holds) expect(h.traceparent).toMatch(new RegExp(`^00-${traceId}-`));
    const spans = await receiver.waitForSpans((all) => all.some((s) => s.traceId === traceId && s.name === "node_run tel.fetch" && s.attributes["nodefabric.state"] === "completed"), 20_000);
    const t = traceOf(spans, traceId);
    const [after] = t.find((s) => s.name === "node_run tel.fetch" && s.attributes["nodefabric.state"] === "completed", "the attempt after the restart");
    // Its parent is the run's anchor, known to the new process only from the Run's run_context.
    expect(after.parentSpanId).toBe(anchorId);
    expect(Number(after.attributes["nodefabric.attempt"])).toBeGreaterThanOrEqual(2);
    expect(after.attributes["nodefabric.run_id"]).toBe(runId);
  }, 120_000);
});

describe("telemetry settings the plugin cannot use", () => {
  it("stop `fabric start` with exit code 2 and a sentence naming the plugin and the variable", async () => {
    const base = await freePortBase();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-telemetry-bad-"));
    const grpc = await runFabric(["start", "pdp", "--auth", "disabled", "--port-base", String(base), "--data-dir", dataDir, "--plugin", PLUGIN], {
      cwd: repo,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4317", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" },
    });
    expect(grpc.code).toBe(2);
    expect(grpc.stderr).toContain('fabric: plugin @nodefabric/plugin-telemetry: OTEL_EXPORTER_OTLP_PROTOCOL="grpc" is not supported: use http/protobuf (the default) or http/json');
    const port = await runFabric(["start", "pdp", "--auth", "disabled", "--port-base", String(base), "--data-dir", dataDir, "--plugin", PLUGIN], { cwd: repo, env: { FABRIC_METRICS_PORT: "metrics" } });
    expect(port.code).toBe(2);
    expect(port.stderr).toContain('fabric: plugin @nodefabric/plugin-telemetry: FABRIC_METRICS_PORT="metrics" is not a port number (0 to 65535)');
  }, 60_000);
});
