/**
 * Faults of the database under two `fabric dev --store postgres://…` processes (issue 32; docs/deploy.md, "Guarantees
 * under faults"): the server stopped immediately under load and started again, and every connection of the fabrics
 * terminated by the server. Neither is a crash: the fabrics answer 503 ErrorEnvelopes while they cannot write, resume by
 * themselves, and every acknowledged run ends with the invariants of harness.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../run-client.js";
import { Load, NONE, capped, line, RecordingUpstream, ThrowawayCluster, TwoFabrics, badAnswers, checkInvariants, tally, watchHealth } from "./harness.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("faults of the database under two fabrics", () => {
  let cluster: ThrowawayCluster;
  let upstream: RecordingUpstream;
  let fabrics: TwoFabrics;

  beforeAll(async () => {
    cluster = await ThrowawayCluster.create();
    upstream = new RecordingUpstream();
    await upstream.start();
    fabrics = new TwoFabrics(cluster, upstream);
    await fabrics.up();
  }, 120_000);

  afterAll(async () => {
    await fabrics?.down();
    await upstream?.stop();
    cluster?.remove();
  });

  it("waits out PostgreSQL stopped immediately under load and back 4 s later: 503s meanwhile, nothing lost", async () => {
    await fabrics.ensureUp();
    const t0 = Date.now();
    const health = fabrics.fabrics.map((f) => watchHealth(f.coordinator));
    const load = new Load(() => fabrics.gateways, "run_fdbstop", { workers: 4, ms: 300, pauseMs: 50 }).start();
    await eventually(async () => (load.result.acks.length >= 20 ? true : undefined), 30_000, "20 runs acknowledged before the fault");

    const downAt = Date.now();
    cluster.stopImmediate();
    await sleep(4_000);
    cluster.start();
    const upAt = Date.now();
    // Starts are acknowledged again through both gateways.
    const resumed = await eventually(async () => {
      const after = load.result.acks.filter((a) => load.result.answers.some((x) => x.run_id === a.run_id && x.at > upAt));
      return fabrics.gateways.every((g) => after.some((a) => a.gateway === g)) ? Date.now() - upAt : undefined;
    }, 60_000, "starts acknowledged through both gateways after the restart");
    await sleep(2_000);
    const { answers, acks } = await load.stop();
    const seen = await Promise.all(health.map((h) => h.stop()));

    const during = answers.filter((a) => a.at >= downAt && a.at <= upAt);
    console.log(`[faults] database stop: answers ${JSON.stringify(tally(answers))}, while down ${JSON.stringify(tally(during))}, starts acknowledged through both gateways ${resumed} ms after the restart`);
    console.log(`[faults] database stop: coordinator health while down ${JSON.stringify(seen.map((s) => [...new Set(s.filter((x) => x.down.length > 0).map((x) => `${x.status} ${x.down.join("+")}`))]))}`);

    // Supervisor's part: a process that exited is started again, so the invariants can be read (the exit is reported).
    await fabrics.ensureUp();
    const { violations, summary } = await checkInvariants(fabrics, load.attempted, acks);
    console.log(`[faults] database stop: ${JSON.stringify(summary)}, ${Date.now() - t0} ms in all`);

    // While the database was down: 503 ErrorEnvelopes with Retry-After, never a 500, never a reset connection.
    expect(capped({ ...violations, badAnswers: badAnswers(answers).map(line), transportFailures: answers.filter((a) => a.status === 0).map(line) })).toEqual({
      ...NONE,
      badAnswers: [],
      transportFailures: [],
    });
    expect(during.filter((a) => a.status === 503).length, "503s while the database was down").toBeGreaterThan(0);
    // Each coordinator's health said the store was down while it was.
    for (const s of seen) expect(s.some((x) => x.down.some((d) => /^store:down/.test(d))), JSON.stringify(s.slice(0, 40))).toBe(true);
  }, 180_000);

  it("waits out every connection of the fabrics terminated by the server under load", async () => {
    await fabrics.ensureUp();
    const t0 = Date.now();
    const load = new Load(() => fabrics.gateways, "run_fdbterm", { workers: 4, ms: 300, pauseMs: 50 }).start();
    await eventually(async () => (load.result.acks.length >= 20 ? true : undefined), 30_000, "20 runs acknowledged before the fault");

    const terminated: number[] = [];
    for (let i = 0; i < 3; i++) {
      const [row] = await cluster.query<{ n: string }>(
        "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE datname = 'postgres' AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
      );
      terminated.push(Number(row.n));
      await sleep(1_500);
    }
    const before = load.result.acks.length;
    await eventually(async () => (load.result.acks.length >= before + 20 ? true : undefined), 60_000, "20 more runs acknowledged after the fault");
    const { answers, acks } = await load.stop();
    console.log(`[faults] connections terminated: ${JSON.stringify(terminated)} at a time; answers ${JSON.stringify(tally(answers))}`);

    await fabrics.ensureUp();
    const { violations, summary } = await checkInvariants(fabrics, load.attempted, acks);
    console.log(`[faults] connections terminated: ${JSON.stringify(summary)}, ${Date.now() - t0} ms in all`);

    expect(terminated.every((n) => n > 0), "connections of the fabrics terminated each time").toBe(true);
    expect(capped({ ...violations, badAnswers: badAnswers(answers).map(line), transportFailures: answers.filter((a) => a.status === 0).map(line) })).toEqual({
      ...NONE,
      badAnswers: [],
      transportFailures: [],
    });
  }, 180_000);
});
