/**
 * The same start sent to both gateways at once (issue 32; docs/deploy.md, "Guarantees under faults"): a client that
 * retries through a load balancer while its first try is still being served. A client-supplied run_id is one run
 * (the contract's "a client-supplied run_id returns the same run"): both gateways answer with the same root NodeRun,
 * the run starts once, and the upstream is called within the run's accounting.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NONE, capped, line, RecordingUpstream, ThrowawayCluster, TwoFabrics, checkInvariants, startLikeAClient, tally, type StartResult } from "./harness.js";

describe("the same start sent to both gateways at once", () => {
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

  it("is one run, 50 times out of 50: one root named by both answers, one run_started, upstream calls accounted", async () => {
    await fabrics.ensureUp();
    const t0 = Date.now();
    const total = 50;
    const ids = Array.from({ length: total }, (_, i) => `run_fsame_${i}`);
    const out: StartResult = { acks: [], answers: [] };
    // Five pairs at a time; each pair is the same POST /v1/runs (same run_id, same body) to gateway one and gateway two.
    for (let i = 0; i < total; i += 5)
      await Promise.all(ids.slice(i, i + 5).flatMap((id) => [startLikeAClient(() => fabrics.gateways, 0, id, 300, out), startLikeAClient(() => fabrics.gateways, 1, id, 300, out)]));
    console.log(`[faults] same start: answers ${JSON.stringify(tally(out.answers))}`);

    // Both answers of each pair are acknowledgements naming the same root NodeRun.
    const split: string[] = [];
    for (const id of ids) {
      const acks = out.acks.filter((a) => a.run_id === id);
      const roots = new Set(acks.map((a) => a.root_node_run_id));
      if (acks.length !== 2 || roots.size !== 1) split.push(`${id}: ${acks.length} acknowledged, roots ${JSON.stringify([...roots])}`);
    }
    const { violations, summary } = await checkInvariants(fabrics, ids, out.acks);
    console.log(`[faults] same start: ${split.length} of ${total} split; ${JSON.stringify(summary)}, ${Date.now() - t0} ms in all`);

    expect(capped({ ...violations, split, notAcknowledged: out.answers.filter((a) => a.status !== 200 && a.status !== 503).map(line) })).toEqual({ ...NONE, split: [], notAcknowledged: [] });
  }, 180_000);
});
