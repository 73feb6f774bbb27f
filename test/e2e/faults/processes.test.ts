/**
 * Faults of one fabric process of two on one PostgreSQL database (issue 32; docs/deploy.md, "Guarantees under
 * faults"): one paused with SIGSTOP past its run lease and resumed, and one killed with SIGKILL under load and started
 * again. The other takes the runs over, the paused one is fenced, and every acknowledged run ends with the invariants of
 * harness.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../run-client.js";
import { Load, NONE, capped, line, RUN_LEASE_MS, RecordingUpstream, ThrowawayCluster, TwoFabrics, checkInvariants, tally } from "./harness.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("faults of one fabric process of two", () => {
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

  /** Runs of this test taken over by another coordinator (fencing epoch above 1). */
  const takenOver = async (prefix: string) =>
    Number((await cluster.query<{ n: string }>("SELECT count(*) AS n FROM runs WHERE starts_with(run_id, $1) AND lease_epoch > 1", [`${prefix}_`]))[0].n);

  it("fences a fabric paused with SIGSTOP past its lease, and loses nothing", async () => {
    await fabrics.ensureUp();
    const t0 = Date.now();
    const [, two] = fabrics.fabrics;
    // Clients give up on a gateway that does not answer within 3 s and try the other one.
    const load = new Load(() => fabrics.gateways, "run_fpause", { workers: 4, ms: 300, pauseMs: 50, timeoutMs: 3_000 }).start();
    await eventually(async () => (load.result.acks.filter((a) => a.gateway === two.gateway).length >= 10 ? true : undefined), 30_000, "10 runs acknowledged through fabric two");
    // Runs that are certainly in flight on fabric two when it stops: their upstream calls take 2 s.
    await Promise.all([1, 2, 3].map((k) => load.startThrough(two.gateway, `long${k}`, 2_000)));

    // Paused four leases long, with runs in flight.
    const pausedAt = Date.now();
    two.proc.child.kill("SIGSTOP");
    await sleep(RUN_LEASE_MS * 4);
    two.proc.child.kill("SIGCONT");
    const resumedAt = Date.now();
    await eventually(async () => (/another coordinator took over runs this one held/.test(two.proc.output()) ? true : undefined), 30_000, "fabric two logged that its runs were taken over");
    await eventually(
      async () => (load.result.acks.some((a) => a.gateway === two.gateway && load.result.answers.some((x) => x.run_id === a.run_id && x.at > resumedAt)) ? true : undefined),
      30_000,
      "fabric two acknowledges starts again",
    );
    const { answers, acks } = await load.stop();
    console.log(`[faults] SIGSTOP: paused ${resumedAt - pausedAt} ms; answers ${JSON.stringify(tally(answers))}`);

    const { violations, summary } = await checkInvariants(fabrics, load.attempted, acks);
    const moved = await takenOver("run_fpause");
    console.log(`[faults] SIGSTOP: ${JSON.stringify(summary)}, ${moved} runs taken over, ${Date.now() - t0} ms in all`);

    expect(moved, "runs taken over from the paused fabric").toBeGreaterThan(0);
    expect(capped({ ...violations, fiveHundreds: answers.filter((a) => a.status === 500).map(line) })).toEqual({ ...NONE, fiveHundreds: [] });
  }, 180_000);

  it("finishes the runs of a fabric killed with SIGKILL under load and started again", async () => {
    await fabrics.ensureUp();
    const t0 = Date.now();
    const [one, two] = fabrics.fabrics;
    const load = new Load(() => fabrics.gateways, "run_fkill", { workers: 4, ms: 300, pauseMs: 50 }).start();
    await eventually(async () => (load.result.acks.filter((a) => a.gateway === two.gateway).length >= 10 ? true : undefined), 30_000, "10 runs acknowledged through fabric two");
    await Promise.all([1, 2, 3].map((k) => load.startThrough(two.gateway, `long${k}`, 2_000)));

    const killed = two.proc;
    await fabrics.kill(two);
    await sleep(2_000);
    await fabrics.restart(two);
    const restartedAt = Date.now();
    await eventually(
      async () => (load.result.acks.some((a) => a.gateway === two.gateway && load.result.answers.some((x) => x.run_id === a.run_id && x.at > restartedAt)) ? true : undefined),
      30_000,
      "the restarted fabric acknowledges starts",
    );
    await sleep(1_000);
    const { answers, acks } = await load.stop();
    console.log(`[faults] SIGKILL: answers ${JSON.stringify(tally(answers))}`);

    const { violations, summary } = await checkInvariants(fabrics, load.attempted, acks);
    const moved = await takenOver("run_fkill");
    console.log(`[faults] SIGKILL: ${JSON.stringify(summary)}, ${moved} runs taken over, ${Date.now() - t0} ms in all`);

    expect(killed.child.signalCode).toBe("SIGKILL");
    expect(one.proc.child.exitCode).toBe(null);
    expect(moved, "runs taken over from the killed fabric").toBeGreaterThan(0);
    expect(capped({ ...violations, fiveHundreds: answers.filter((a) => a.status === 500).map(line) })).toEqual({ ...NONE, fiveHundreds: [] });
  }, 180_000);
});
