/**
 * The fabric's logs as an operator sees them: JSON lines when stdout is piped, readable lines on a terminal (a real
 * pseudo-terminal, from util-linux `script`), --log-format or FABRIC_LOG_FORMAT to choose, and run lines that name
 * their run, NodeRun and trace. The mixin that adds the active span's ids is checked on a real service's logger.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { context, ROOT_CONTEXT, trace, TraceFlags } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { CLI, freePortBase, runFabric } from "../e2e/fabric-cli.js";
import { call, eventually } from "../run-client.js";
import { createService } from "../../core/src/http/service.js";
import { serviceLoggerOptions } from "../../core/src/observe/service-logger.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const handlers = path.join(repo, "test/fixtures/run-handlers");
const hasScript = spawnSync("script", ["--version"], { stdio: "ignore" }).status === 0;

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g;

/** A child's output, collected, and a way to wait for it to say something. */
class Output {
  text = "";
  constructor(readonly child: ChildProcess) {
    child.stdout!.on("data", (c: Buffer) => (this.text += c.toString()));
  }
  lines(): string[] {
    return this.text.replace(ANSI, "").split(/\r?\n/).filter((l) => l.trim() !== "");
  }
  async until(what: string, test: (text: string) => boolean, ms = 30_000): Promise<void> {
    await eventually(async () => (test(this.text) ? true : undefined), ms, `${what}; output so far:\n${this.text}`);
  }
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once("exit", resolve));
    this.child.kill("SIGTERM");
    await exited;
  }
}

const sh = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * `fabric <args>` on a pseudo-terminal: `script` gives the child a TTY as its stdout and copies what it prints to
 * ours. `exec` makes the fabric the terminal's session leader, so it ends when `script` is stopped.
 */
function onTerminal(args: string[], env: Record<string, string>): Output {
  const command = `exec ${[process.execPath, CLI, ...args].map(sh).join(" ")}`;
  // A terminal that shows colours, whatever the one running the tests does.
  const { NO_COLOR: _noColor, ...inherited } = process.env;
  const child = spawn("script", ["-qfec", command, "/dev/null"], { cwd: repo, env: { ...inherited, TERM: "xterm-256color", ...env }, stdio: ["pipe", "pipe", "pipe"] });
  return new Output(child);
}

/** `fabric <args>` with its stdout piped, as in CI or `fabric dev | jq`. */
function piped(args: string[], env: Record<string, string>): Output {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: repo, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  return new Output(child);
}

const started = (text: string) => text.includes("stop: Ctrl-C");
/** Without FABRIC_LOG_FORMAT from the environment the tests run in. */
const baseEnv = { FABRIC_LOG_LEVEL: "info", FABRIC_LOG_FORMAT: "" };

describe("fabric dev with stdout piped", () => {
  let fabric: Output;
  let gateway: string;
  let registry: string;

  beforeAll(async () => {
    const base = await freePortBase();
    gateway = `http://127.0.0.1:${base}`;
    registry = `http://127.0.0.1:${base + 4}`;
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-logs-"));
    fabric = piped(["dev", "--port-base", String(base), "--data-dir", dataDir, "--handlers", handlers], baseEnv);
    await fabric.until("the fabric started", started, 45_000);
  }, 60_000);
  afterAll(async () => {
    await fabric?.stop();
  });

  it("prints one JSON object per log line, and a NodeRun's retry names its run, NodeRun and trace", async () => {
    await eventually(async () => ((await call("GET", `${registry}/v1/node-types/fixture.flaky`)).status === 200 ? true : undefined), 15_000, "fixture.flaky published");
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    // fixture.flaky fails retryably on its first two attempts.
    const start = await call("POST", `${gateway}/v1/runs`, {
      root_node_type_ref: { node_type_id: "fixture.flaky", version: "1.0.0" },
      input: {},
      run_context: { trace: { trace_id: traceId, span_id: "00f067aa0ba902b7" } },
    }, { prefer: "wait=15" });
    expect(start.status).toBe(200);
    expect(start.body.state).toBe("completed");
    const run = start.body;

    // The banner is plain text; every log line is JSON.
    const logLines = fabric.lines().filter((l) => !/^(NodeFabric |\s|plugins: |store: |auth: |data: |[A-Za-z0-9 ]+: http)/.test(l));
    const records = logLines.map((l) => {
      expect(l.startsWith("{"), l).toBe(true);
      return JSON.parse(l) as Record<string, unknown>;
    });
    expect(records.filter((r) => typeof r.msg === "string" && r.msg.startsWith("Server listening")).map((r) => r.service).sort()).toEqual(
      ["atomic-executor", "composite-executor", "node-registry", "pdp", "run-coordinator", "run-gateway", "selection"],
    );
    for (const r of records) {
      expect(typeof r.level).toBe("number");
      expect(typeof r.time).toBe("number");
    }

    const retries = records.filter((r) => r.run_id === run.run_id && typeof r.msg === "string" && r.msg.includes("retrying"));
    expect(retries).toHaveLength(2);
    for (const r of retries) {
      expect(r).toMatchObject({
        service: "run-coordinator",
        level: 40,
        run_id: run.run_id,
        node_run_id: run.root_node_run_id,
        // The run keeps the trace it was started in (or its own anchor in it, with a tracing SDK).
        trace_id: run.run_context.trace.trace_id,
        error_code: "upstream_error",
      });
    }
    expect(retries.map((r) => r.attempt)).toEqual([2, 3]);
    expect(run.run_context.trace.trace_id).toMatch(/^[0-9a-f]{32}$/);
  });
});

describe.skipIf(!hasScript)("fabric on a terminal (util-linux `script` gives it a pseudo-terminal)", () => {
  const stops: Output[] = [];
  afterAll(async () => {
    await Promise.all(stops.map((o) => o.stop()));
  });

  it("fabric dev prints readable lines: time, level, the service, the message; no JSON, no pid or hostname", async () => {
    const base = await freePortBase();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-logs-tty-"));
    const fabric = onTerminal(["dev", "--port-base", String(base), "--data-dir", dataDir, "--handlers", handlers], baseEnv);
    stops.push(fabric);
    await fabric.until("the fabric started", started, 30_000);
    await fabric.until("the atomic executor registered", (t) => t.replace(ANSI, "").includes("(atomic-executor) registered with the node registry"));
    await fabric.stop();

    const lines = fabric.lines();
    const listening = lines.filter((l) => l.includes("Server listening"));
    expect(listening).toHaveLength(7);
    for (const l of listening) expect(l).toMatch(/^\[\d{2}:\d{2}:\d{2}\.\d{3}\] INFO: \((run-gateway|run-coordinator|atomic-executor|composite-executor|node-registry|selection|pdp)\) Server listening at http:\/\/127\.0\.0\.1:\d+$/);
    expect(listening.some((l) => l.includes(`(run-gateway) Server listening at http://127.0.0.1:${base}`))).toBe(true);
    expect(lines.filter((l) => l.startsWith("{"))).toEqual([]);
    expect(fabric.text).not.toMatch(/"level":|\bpid\b|hostname/);
    // A line's other fields follow it, indented.
    expect(fabric.text.replace(ANSI, "")).toMatch(/INFO: \(atomic-executor\) registered with the node registry\r?\n\s+executor_instance_id: "atomic-/);
    // Colours, as a terminal shows them.
    expect(fabric.text).toMatch(ANSI);
  }, 90_000);

  it("fabric start prints readable lines too, and FABRIC_LOG_FORMAT=json gives JSON lines on a terminal", async () => {
    const base = await freePortBase();
    const pretty = onTerminal(["start", "pdp", "--auth", "disabled", "--port-base", String(base)], baseEnv);
    stops.push(pretty);
    await pretty.until("pdp started", started);
    await pretty.stop();
    expect(pretty.lines().filter((l) => l.includes("Server listening"))).toEqual([expect.stringMatching(/^\[[\d:.]+\] INFO: \(pdp\) Server listening at http:\/\/127\.0\.0\.1:\d+$/)]);

    const json = onTerminal(["start", "pdp", "--auth", "disabled", "--port-base", String(base)], { ...baseEnv, FABRIC_LOG_FORMAT: "json" });
    stops.push(json);
    await json.until("pdp started", started);
    await json.stop();
    const listening = json.lines().filter((l) => l.includes("Server listening"));
    expect(listening).toHaveLength(1);
    expect(JSON.parse(listening[0])).toMatchObject({ level: 30, service: "pdp", msg: `Server listening at http://127.0.0.1:${base + 6}` });
  }, 90_000);
});

describe("--log-format", () => {
  const stops: Output[] = [];
  afterAll(async () => {
    await Promise.all(stops.map((o) => o.stop()));
  });

  it.skipIf(!hasScript)("fabric dev --log-format json prints today's JSON lines on a terminal, between the banner's lines", async () => {
    const base = await freePortBase();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-logs-flag-"));
    const fabric = onTerminal(["dev", "--log-format", "json", "--port-base", String(base), "--data-dir", dataDir, "--handlers", handlers], baseEnv);
    stops.push(fabric);
    await fabric.until("the fabric started", started, 45_000);
    await fabric.until("the atomic executor registered", (t) => t.includes('"msg":"registered with the node registry"'));
    await fabric.stop();
    const logLines = fabric.lines().filter((l) => !/^(NodeFabric |\s|plugins: |store: |auth: |data: |[A-Za-z0-9 ]+: http|SIGTERM: )/.test(l));
    expect(logLines.length).toBeGreaterThan(7);
    const records = logLines.map((l) => {
      expect(l.startsWith("{"), l).toBe(true);
      return JSON.parse(l) as Record<string, unknown>;
    });
    expect(records.filter((r) => typeof r.msg === "string" && r.msg.startsWith("Server listening")).map((r) => r.service).sort()).toEqual(
      ["atomic-executor", "composite-executor", "node-registry", "pdp", "run-coordinator", "run-gateway", "selection"],
    );
    for (const r of records) expect(typeof r.time).toBe("number");
  }, 90_000);

  it("--log-format pretty gives readable lines when piped, and the flag wins over FABRIC_LOG_FORMAT", async () => {
    const base = await freePortBase();
    const pretty = piped(["start", "pdp", "--log-format", "pretty", "--auth", "disabled", "--port-base", String(base)], { ...baseEnv, FABRIC_LOG_FORMAT: "json" });
    stops.push(pretty);
    await pretty.until("pdp started", started);
    await pretty.stop();
    expect(pretty.lines().filter((l) => l.includes("Server listening"))).toEqual([expect.stringMatching(/^\[[\d:.]+\] INFO: \(pdp\) Server listening at /)]);

    const json = piped(["start", "pdp", "--log-format", "json", "--auth", "disabled", "--port-base", String(base)], { ...baseEnv, FABRIC_LOG_FORMAT: "pretty" });
    stops.push(json);
    await json.until("pdp started", started);
    await json.stop();
    const listening = json.lines().filter((l) => l.includes("Server listening"));
    expect(listening).toHaveLength(1);
    expect(JSON.parse(listening[0]!)).toMatchObject({ level: 30, service: "pdp", msg: `Server listening at http://127.0.0.1:${base + 6}` });

    const bad = await runFabric(["start", "pdp", "--log-format", "yaml", "--auth", "disabled", "--port-base", String(base)], { cwd: repo, env: baseEnv });
    // Refused by the command line, as a bad --log-level is.
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("option '--log-format <format>' argument 'yaml' is invalid");
    expect(bad.stdout).not.toContain("Server listening");
  }, 60_000);
});

describe("FABRIC_LOG_FORMAT", () => {
  it("pretty gives readable lines when piped, and an unknown value stops the start with exit code 2", async () => {
    const base = await freePortBase();
    const pretty = piped(["start", "pdp", "--auth", "disabled", "--port-base", String(base)], { ...baseEnv, FABRIC_LOG_FORMAT: "pretty" });
    try {
      await pretty.until("pdp started", started);
    } finally {
      await pretty.stop();
    }
    expect(pretty.lines().filter((l) => l.includes("Server listening"))).toEqual([expect.stringMatching(/^\[[\d:.]+\] INFO: \(pdp\) Server listening at /)]);

    const bad = await runFabric(["start", "pdp", "--auth", "disabled", "--port-base", String(base)], { cwd: repo, env: { ...baseEnv, FABRIC_LOG_FORMAT: "yaml" } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('FABRIC_LOG_FORMAT: expected one of json, pretty, got "yaml"');
    expect(bad.stdout).not.toContain("Server listening");
  }, 60_000);
});

describe("a service's logger and the active span", () => {
  const manager = new AsyncLocalStorageContextManager();
  beforeAll(() => {
    expect(context.setGlobalContextManager(manager.enable())).toBe(true);
  });
  afterAll(() => {
    context.disable();
  });

  /** A real service whose JSON lines are kept in memory. */
  function serviceWithLines(): { lines: Array<Record<string, unknown>>; raw: string[]; app: ReturnType<typeof createService> } {
    const lines: Array<Record<string, unknown>> = [];
    const raw: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString().split("\n").filter(Boolean)) {
          raw.push(l);
          lines.push(JSON.parse(l));
        }
        done();
      },
    });
    const app = createService({ name: "run-coordinator", logger: { ...serviceLoggerOptions({ level: "info", service: "run-coordinator", format: "json" }), stream } });
    return { lines, raw, app };
  }

  it("adds the span's trace_id and span_id to lines logged while it is active, and nothing outside it", async () => {
    const { lines, raw, app } = serviceWithLines();
    const traceId = "0af7651916cd43dd8448eb211c80319c";
    const spanId = "b7ad6b7169203331";
    const active = trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: true });
    await context.with(active, async () => {
      await new Promise((resolve) => setImmediate(resolve));
      app.log.info({ run_id: "run_1" }, "inside the span");
      // A line naming its own run's trace keeps it; the span id is added only when it is of that trace.
      app.log.info({ trace_id: "11111111111111111111111111111111" }, "names another trace");
      // A child logger made for a run, with the run's trace in its bindings, does not get the key twice.
      app.log.child({ trace_id: traceId }).info("child with a trace");
    });
    app.log.info("outside any span");
    await app.close();

    const byMsg = (m: string) => lines.find((l) => l.msg === m)!;
    expect(byMsg("inside the span")).toMatchObject({ service: "run-coordinator", run_id: "run_1", trace_id: traceId, span_id: spanId });
    expect(byMsg("names another trace").trace_id).toBe("11111111111111111111111111111111");
    expect(byMsg("names another trace")).not.toHaveProperty("span_id");
    expect(byMsg("child with a trace").trace_id).toBe(traceId);
    expect(raw.find((l) => l.includes("child with a trace"))!.match(/"trace_id"/g)).toHaveLength(1);
    expect(byMsg("outside any span")).not.toHaveProperty("trace_id");
    expect(byMsg("outside any span")).not.toHaveProperty("span_id");
  });
});
