/**
 * `npm run bench:pdp`: PDP decisions per second in process, with and without the decision cache, for requests as the
 * coordinator sends them (every context unique). Prints one JSON line per case.
 */
import { fileURLToPath } from "node:url";
import { createDecider, defaultPolicySet, loadPolicyFile } from "../../core/dist/index.js";

const EXAMPLE = fileURLToPath(new URL("../../core/policies/example.cedar", import.meta.url));
const runContext = { tenant_id: "acme", actor: { type: "user", id: "alice" } };
const ref = { node_type_id: "weather.current", version: "1.0.0" };
const unique = (i) => [
  { action: "run.start", run_id: `run_${i}`, node_type_ref: ref, run_context: runContext, context: { trace_id: `t${i}` } },
  {
    action: "node.run.execute",
    run_id: `run_${i}`,
    node_run_id: `nr_${i}`,
    node_type_ref: ref,
    run_context: runContext,
    constraints: { gates: { side_effect_class: "read" }, budgets: { max_steps: 10, max_cost: 2.5 } },
    context: { trace_id: `t${i}`, attempt: i },
  },
];

const cases = [
  ["default policy, cached", () => createDecider(defaultPolicySet())],
  ["default policy, uncached", () => createDecider(defaultPolicySet(), [], { decisionCacheSize: 0 })],
  ["example policy, cached", async () => createDecider(await loadPolicyFile(EXAMPLE))],
  ["example policy, uncached", async () => createDecider(await loadPolicyFile(EXAMPLE), [], { decisionCacheSize: 0 })],
];
for (const [name, make] of cases) {
  const decider = await make();
  for (let i = 0; i < 200; i++) for (const r of unique(i)) decider.decide(r);
  const rounds = [];
  for (let round = 0; round < 5; round++) {
    const n = 2000;
    const t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) for (const r of unique(10_000 * (round + 1) + i)) decider.decide(r);
    rounds.push((2 * n) / (Number(process.hrtime.bigint() - t) / 1e9));
  }
  rounds.sort((a, b) => a - b);
  process.stdout.write(`${JSON.stringify({ scenario: "pdp-decisions", case: name, decisions_per_second_median_of_5: Math.round(rounds[2]) })}\n`);
}
