import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { request } from "undici";
import { validatorFor, type Run, type RunEvent } from "@nodefabric/schemas";
import { runFabric, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));

function expectValid(schema: Parameters<typeof validatorFor>[0], value: unknown): void {
  const validate = validatorFor(schema);
  expect(validate(value), `${schema}: ${JSON.stringify(validate.errors)}`).toBe(true);
}

/** The NDJSON output of `fabric run` when piped: events, then `{"run": <Run>}`. */
function parseRunOutput(stdout: string): { events: RunEvent[]; run: Run } {
  const lines = stdout.trimEnd().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
  const last = lines.pop() as { run: Run };
  expect(Object.keys(last)).toEqual(["run"]);
  expectValid("run", last.run);
  const events = lines as unknown as RunEvent[];
  for (const e of events) expectValid("run_event", e);
  return { events, run: last.run };
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`${what}: not reached in time`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("fabric run and fabric runs, against fabric dev", () => {
  let fabric: FabricProcess;
  let dataDir: string;
  let gw: string[];
  let reg: string[];

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-run-"));
    fabric = await startFabricProcess(["dev", "--port-base", "0", "--data-dir", dataDir], { cwd: repo });
    gw = ["--gateway", fabric.urls["run-gateway"]];
    reg = ["--registry", fabric.urls["node-registry"]];
    await until("demo node types published", async () => {
      const res = await request(`${fabric.urls["node-registry"]}/v1/node-types/demo.sleep`);
      await res.body.text();
      return res.statusCode === 200 ? true : undefined;
    });
  }, 60_000);

  afterAll(async () => {
    await fabric?.stop();
  });

  it("runs demo.echo (latest version from the registry), printing NDJSON events and the final run; exit 0", async () => {
    const r = await runFabric(["run", "demo.echo", "--input", '{"a":1}', ...gw, ...reg]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const { events, run } = parseRunOutput(r.stdout);
    expect(run.state).toBe("completed");
    expect(run.extensions?.["nodefabric.outputs"]).toEqual({ echo: { a: 1 } });
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
    expect(events.every((e) => e.run_id === run.run_id)).toBe(true);
    expect(events[0]).toMatchObject({ type: "run_started", data: { root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" } } });
    expect(events[events.length - 1]).toMatchObject({ type: "run_completed", data: { state: "completed" } });
  });

  it("needs only --gateway: the latest version comes from the registry the gateway names, and --registry overrides it", async () => {
    // The fabric listens on free ports, not the defaults: only the gateway can say where its registry is.
    const alone = await runFabric(["run", "demo.echo", "--input", '{"b":2}', ...gw]);
    expect(alone.stderr).toBe("");
    expect(alone.code).toBe(0);
    const { events, run } = parseRunOutput(alone.stdout);
    expect(run.extensions?.["nodefabric.outputs"]).toEqual({ echo: { b: 2 } });
    expect(events[0]).toMatchObject({ type: "run_started", data: { root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" } } });

    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const elsewhere = await runFabric(["run", "demo.echo", "--input", "{}", ...gw, "--registry", `http://127.0.0.1:${port}`]);
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toMatch(/^fabric: upstream_unavailable: /);
    expect(elsewhere.stdout).toBe("");
  });

  it("takes an explicit version, an input file and a chosen run id", async () => {
    const file = path.join(dataDir, "input.json");
    writeFileSync(file, JSON.stringify({ city: "Lyon" }));
    const runId = `cli-${Date.now()}`;
    const r = await runFabric(["run", "demo.echo@1.0.0", "--input-file", file, "--run-id", runId, ...gw]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const { run } = parseRunOutput(r.stdout);
    expect(run.run_id).toBe(runId);
    expect(run.extensions?.["nodefabric.outputs"]).toEqual({ echo: { city: "Lyon" } });
  });

  it("exits 1 for a run that fails, printing its error", async () => {
    const r = await runFabric(["run", "demo.fail", "--input", '{"code":"boom","message":"failed on purpose"}', ...gw, ...reg]);
    expect(r.code).toBe(1);
    const { events, run } = parseRunOutput(r.stdout);
    expect(run.state).toBe("failed");
    expect(run.extensions?.["nodefabric.error"]).toMatchObject({ code: "boom", message: "failed on purpose" });
    expect(events[events.length - 1]).toMatchObject({ type: "run_completed", data: { state: "failed" } });
    expect(r.stderr).toBe("fabric: boom: failed on purpose\n");
  });

  it("exits 2 for usage mistakes, before starting anything", async () => {
    const badJson = await runFabric(["run", "demo.echo", "--input", "{a:1", ...gw, ...reg]);
    expect(badJson.code).toBe(2);
    expect(badJson.stderr).toMatch(/^fabric: --input is not valid JSON/);
    expect(badJson.stdout).toBe("");
    const notObject = await runFabric(["run", "demo.echo", "--input", "[1,2]", ...gw, ...reg]);
    expect(notObject.code).toBe(2);
    expect(notObject.stderr).toContain("--input must be a JSON object");
    const none = await runFabric(["run", "demo.echo", ...gw, ...reg]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("the run needs an input");
    const missingFile = await runFabric(["run", "demo.echo", "--input-file", path.join(dataDir, "nope.json"), ...gw, ...reg]);
    expect(missingFile.code).toBe(2);
    expect(missingFile.stderr).toContain("cannot read");
    const noType = await runFabric(["run", "--input", "{}", ...gw]);
    expect(noType.code).toBe(2);
    const badLimit = await runFabric(["runs", "ls", "--limit", "0", ...gw]);
    expect(badLimit.code).toBe(2);
    expect(badLimit.stderr).toContain("--limit must be between 1 and 1000");
  });

  it("prints service errors as `fabric: <code>: <message>` and exits 1", async () => {
    const unknown = await runFabric(["run", "no.such.type", "--input", "{}", ...gw, ...reg]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^fabric: node_type_not_found: /);
    const missing = await runFabric(["runs", "get", "run_doesnotexist", ...gw]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^fabric: run_not_found: /);

    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const down = await runFabric(["runs", "get", "run_x", "--gateway", `http://127.0.0.1:${port}`]);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/^fabric: upstream_unavailable: /);
  });

  it("starts without following, then gets, cancels, and replays the events with `fabric runs`", async () => {
    const started = await runFabric(["run", "demo.sleep@1.0.0", "--input", '{"ms":20000}', "--no-follow", ...gw]);
    expect(started.stderr).toBe("");
    expect(started.code).toBe(0);
    const { run } = JSON.parse(started.stdout) as { run: Run };
    expectValid("run", run);
    expect(["queued", "running"]).toContain(run.state);

    const got = await runFabric(["runs", "get", run.run_id, ...gw]);
    expect(got.code).toBe(0);
    const current = JSON.parse(got.stdout) as Run;
    expectValid("run", current);
    expect(current.run_id).toBe(run.run_id);
    expect(["queued", "running"]).toContain(current.state);

    const canceled = await runFabric(["runs", "cancel", run.run_id, ...gw]);
    expect(canceled.stderr).toBe("");
    expect(canceled.code).toBe(0);
    const after = JSON.parse(canceled.stdout) as Run;
    expectValid("run", after);
    expect(after.state).toBe("canceled");

    const events = await runFabric(["runs", "events", run.run_id, ...gw]);
    expect(events.code).toBe(0);
    const all = events.stdout.trimEnd().split("\n").map((l) => JSON.parse(l) as RunEvent);
    for (const e of all) expectValid("run_event", e);
    expect(all.map((e) => e.seq)).toEqual(all.map((_, i) => i));
    expect(all[all.length - 1]).toMatchObject({ type: "run_completed", data: { state: "canceled" } });

    const tail = await runFabric(["runs", "events", run.run_id, "--after-seq", "1", "--no-follow", ...gw]);
    expect(tail.code).toBe(0);
    expect(tail.stdout.trimEnd().split("\n").map((l) => JSON.parse(l))).toEqual(all.filter((e) => e.seq > 1));

    const ls = await runFabric(["runs", "ls", "--state", "canceled", ...gw]);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toMatch(/^RUN ID\s+STATE\s+STARTED\s+DURATION\n/);
    expect(ls.stdout).toContain(run.run_id);
    const json = await runFabric(["runs", "ls", "--limit", "1", "--json", ...gw]);
    expect(json.code).toBe(0);
    const listed = JSON.parse(json.stdout) as Run[];
    expectValid("run_list", listed);
    expect(listed).toHaveLength(1);
  });

  it("follows a run that is canceled from elsewhere, and exits 1", async () => {
    const runId = `cli-cancel-${Date.now()}`;
    const following = runFabric(["run", "demo.sleep", "--input", '{"ms":20000}', "--run-id", runId, ...gw, ...reg]);
    await until("the sleep runs", async () => {
      const res = await request(`${fabric.urls["run-gateway"]}/v1/runs/${runId}`);
      const run = (await res.body.json()) as Run;
      return run.state === "running" ? true : undefined;
    });
    const cancel = await runFabric(["runs", "cancel", runId, ...gw]);
    expect(cancel.code).toBe(0);
    const r = await following;
    expect(r.code).toBe(1);
    const { run } = parseRunOutput(r.stdout);
    expect(run.state).toBe("canceled");
    expect(r.stderr).toMatch(/^fabric: canceled: /);
  });
});
