/**
 * One bad request cannot hurt others. Many concurrent run starts through the gateway, mixed with pathological ones
 * (bodies nested 100,000 levels deep, prototype keys): every good run completes, its atomic node executed exactly
 * once; every bad request gets a 4xx ErrorEnvelope; nothing answers 500.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Pool } from "undici";
import { validatorFor } from "@nodefabric/schemas";
import { loadConfig, startFabric, type RunningFabric } from "@nodefabric/core";
import { readNdjson } from "./run-client.js";

const repo = fileURLToPath(new URL("..", import.meta.url));
const isEnvelope = validatorFor("error_envelope");
const isRun = validatorFor("run");
const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };

const GOOD = 240;

/** Request bodies no service should let through, each a different way of being pathological. */
function pathological(i: number): string {
  const deep = 100_000;
  switch (i % 4) {
    case 0:
      return `{"root_node_type_ref":{"node_type_id":"demo.echo","version":"1.0.0"},"input":{"a":${"[".repeat(deep)}${"]".repeat(deep)}}}`;
    case 1:
      return `{"root_node_type_ref":{"node_type_id":"demo.echo","version":"1.0.0"},"input":${'{"a":'.repeat(deep)}1${"}".repeat(deep)}}`;
    case 2:
      return `{"root_node_type_ref":{"node_type_id":"demo.echo","version":"1.0.0"},"input":{"x":1},"metadata":${"[".repeat(deep)}${"]".repeat(deep)}}`;
    default:
      return `{"root_node_type_ref":{"node_type_id":"demo.echo","version":"1.0.0"},"input":{"__proto__":{"polluted":true}}}`;
  }
}

describe("one bad request among many good ones", () => {
  let fabric: RunningFabric;
  let gw: string;

  beforeAll(async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-one-bad-"));
    fabric = await startFabric(loadConfig({ cwd: repo, env: {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"] } }));
    gw = fabric.urls["run-gateway"]!;
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  it("fails only the bad requests: good runs complete and execute exactly once, bad ones get a 4xx envelope", async () => {
    const pool = new Pool(gw, { connections: 64 });
    try {
      type Sent = { kind: "good" | "bad"; i: number; status: number; body: any }; // eslint-disable-line @typescript-eslint/no-explicit-any
      const send = async (kind: "good" | "bad", i: number, body: string): Promise<Sent> => {
        const res = await pool.request({
          path: "/v1/runs",
          method: "POST",
          headers: { "content-type": "application/json", ...(kind === "good" ? { prefer: "wait=30" } : {}) },
          body,
          headersTimeout: 60_000,
          bodyTimeout: 60_000,
        });
        const text = await res.body.text();
        return { kind, i, status: res.statusCode, body: text ? JSON.parse(text) : undefined };
      };
      // Interleaved, all at once: the bad ones land in the same ticks as the good ones.
      const sent: Array<Promise<Sent>> = [];
      for (let i = 0; i < GOOD; i++) {
        sent.push(send("good", i, JSON.stringify({ root_node_type_ref: ECHO, input: { n: i } })));
        if (i % 20 === 0) sent.push(send("bad", i / 20, pathological(i / 20)));
      }
      const answers = await Promise.all(sent);

      expect(answers.filter((a) => a.status >= 500).map((a) => [a.kind, a.status, a.body])).toEqual([]);
      const bad = answers.filter((a) => a.kind === "bad");
      expect(bad.length).toBe(GOOD / 20);
      for (const a of bad) {
        expect(a.status, JSON.stringify(a.body)).toBeGreaterThanOrEqual(400);
        expect(a.status).toBeLessThan(500);
        expect(isEnvelope(a.body), JSON.stringify(a.body)).toBe(true);
        expect(a.body.error.code).toBe("invalid_request");
      }

      const good = answers.filter((a) => a.kind === "good");
      expect(good.map((a) => a.status).filter((s) => s !== 200 && s !== 201)).toEqual([]);
      const runIds = new Set<string>();
      for (const a of good) {
        expect(isRun(a.body), JSON.stringify(a.body)).toBe(true);
        runIds.add(a.body.run_id);
      }
      expect(runIds.size).toBe(GOOD);

      // Every good run ends completed, with its own input echoed, and its atomic node executed exactly once.
      for (const a of good) {
        const ev = await readNdjson(`${gw}/v1/runs/${a.body.run_id}/events?follow=true`);
        expect(ev.status).toBe(200);
        const types = ev.lines.map((e) => e.type);
        expect(ev.lines.map((e) => e.seq)).toEqual(ev.lines.map((_, k) => k));
        expect(types.filter((t) => t === "run_started")).toHaveLength(1);
        expect(types.filter((t) => t === "run_completed")).toHaveLength(1);
        const executed = ev.lines.filter((e) => e.type === "atomic_executed");
        const perNodeRun = new Map<string, number>();
        for (const e of executed) perNodeRun.set(e.node_run_id, (perNodeRun.get(e.node_run_id) ?? 0) + 1);
        expect([...perNodeRun.values()]).toEqual([1]);
        const end = ev.lines.find((e) => e.type === "run_completed");
        expect(end.data.state).toBe("completed");
        const run = await pool.request({ path: `/v1/runs/${a.body.run_id}`, method: "GET" });
        const body = JSON.parse(await run.body.text());
        expect(body.state).toBe("completed");
        expect(body.extensions["nodefabric.outputs"]).toEqual({ echo: { n: a.i } });
      }

      // And the fabric goes on as before.
      const after = await send("good", -1, JSON.stringify({ root_node_type_ref: ECHO, input: { n: -1 } }));
      expect(after.status).toBe(200);
      expect(after.body.state).toBe("completed");
    } finally {
      await pool.close();
    }
  }, 120_000);
});
