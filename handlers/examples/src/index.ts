/**
 * @nodefabric/handler-examples: composite node types written with `defineComposite` — a parallel fan-out and a
 * pick-and-run that lets Selection choose the child. A third example, `examples.plan-greet`, is a declarative plan
 * shipped as NodeType JSON (node-types/plan-greet.json) and published to the registry at run time.
 */
import { defineComposite, failWith, SDK_FAILURE_CODES, type JsonObject } from "@nodefabric/sdk";

/** The examples raise only the SDK's failure codes (sdk/failure-codes.ts). */
const fail = failWith(SDK_FAILURE_CODES);

const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };

/** `examples.fanout`: echoes every item through its own demo.echo child, all in parallel. */
export const fanout = defineComposite<{ items: string[] }, { results: string[] }>({
  nodeType: {
    node_type_id: "examples.fanout",
    version: "1.0.0",
    description: "Fan-out: calls demo.echo once per item, in parallel, and returns the echoed items in order.",
    input_schema: {
      type: "object",
      properties: { items: { type: "array", items: { type: "string" }, maxItems: 100000 } },
      required: ["items"],
      additionalProperties: false,
    },
    output_schema: {
      type: "object",
      properties: { results: { type: "array", items: { type: "string" } } },
      required: ["results"],
      additionalProperties: false,
    },
    constraints: { gates: { side_effect_class: "read" } },
  },
  async run(inputs, ctx) {
    // Every call of this tick goes to the coordinator in one request; the children then run side by side.
    const echoes = await Promise.all(inputs.items.map((item) => ctx.call(ECHO, { item })));
    return { results: echoes.map((e) => (e.echo as { item: string }).item) };
  },
});

/** `examples.pick-and-run`: asks Selection for candidates for a goal, then runs the best one, bound to the set. */
export const pickAndRun = defineComposite<
  { goal: string; inputs?: JsonObject; allowed_node_type_ids?: string[] },
  { chosen: { node_type_id: string; version: string }; candidate_set_id: string; outputs: JsonObject }
>({
  nodeType: {
    node_type_id: "examples.pick-and-run",
    version: "1.0.0",
    description: "Pick and run: selects the best candidate node type for a goal and runs it with the given inputs.",
    input_schema: {
      type: "object",
      properties: {
        goal: { type: "string", minLength: 1 },
        inputs: { type: "object" },
        allowed_node_type_ids: { type: "array", items: { type: "string" } },
      },
      required: ["goal"],
      additionalProperties: false,
    },
    output_schema: {
      type: "object",
      properties: {
        chosen: { type: "object", required: ["node_type_id", "version"] },
        candidate_set_id: { type: "string" },
        outputs: { type: "object" },
      },
      required: ["chosen", "candidate_set_id", "outputs"],
    },
  },
  async run(inputs, ctx) {
    const constraints = inputs.allowed_node_type_ids ? { candidates: { allowed_node_type_ids: inputs.allowed_node_type_ids } } : undefined;
    const set = await ctx.select({ subtask_id: "pick", goal: inputs.goal }, constraints);
    // Never pick itself: a pick-and-run choosing pick-and-run would recurse for ever.
    const best = set.candidates.find((c) => c.node_type_ref.node_type_id !== ctx.node_type_ref.node_type_id);
    if (!best) {
      throw fail("no_candidate", `Selection proposed no node type for "${inputs.goal}"`, { details: { candidate_set_id: set.candidate_set_id } });
    }
    const chosen = { node_type_id: best.node_type_ref.node_type_id, version: best.node_type_ref.version };
    ctx.log.info({ chosen, score: best.score }, "picked a candidate");
    const outputs = await ctx.call(chosen, inputs.inputs ?? {}, { candidateSet: set });
    return { chosen, candidate_set_id: set.candidate_set_id, outputs };
  },
});

export default [fanout, pickAndRun];
