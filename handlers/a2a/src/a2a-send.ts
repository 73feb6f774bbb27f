/**
 * `a2a.send@1.0.0`: a template definition. The executor runs it for every node type published in the registry with
 * `extensions["nodefabric.implementation"] = { node_type_id: "a2a.send", version: "1.0.0" }`, under that node type's
 * schemas; the handler reads which agent and skill to call from `ctx.nodeType.extensions["nodefabric.a2a"]` (see
 * a2a-config.ts). `fabric node-types import --from-a2a <card URL>` publishes such node types, one per skill.
 *
 * Called directly, with no node type of its own naming an agent, it is refused.
 */
import { compiledPerNodeType, defineAtomic, type AtomicContext, type JsonObject } from "@nodefabric/sdk";
import { A2A_EXTENSION, compileA2aConfig, type A2aConfig } from "./a2a-config.js";
import { callAgentSkill } from "./remote-task.js";
import { fail } from "./failure-codes.js";

type NodeTypeOfContext = AtomicContext["nodeType"];

/** The checked `nodefabric.a2a` of a node type. */
export const configOf = compiledPerNodeType((nodeType: NodeTypeOfContext): A2aConfig => compileA2aConfig(nodeType, nodeType.extensions?.[A2A_EXTENSION]));

/** The handler of node types whose `nodefabric.a2a` names the agent and skill. */
export async function a2aSkillHandler(inputs: JsonObject, ctx: AtomicContext): Promise<JsonObject> {
  if (!ctx.nodeType) throw fail("invalid_configuration", "this executor gives handlers no ctx.nodeType; @nodefabric/handler-a2a needs a newer @nodefabric/core", { retryable: false });
  return callAgentSkill(configOf(ctx.nodeType), inputs, ctx);
}

/** `a2a.send@1.0.0`: calls a remote A2A agent's skill as its node type's `nodefabric.a2a` says. */
export const a2aSend = defineAtomic<JsonObject, JsonObject>({
  template: true,
  nodeType: {
    node_type_id: "a2a.send",
    version: "1.0.0",
    description:
      "A2A skill call: the implementation of node types made from the skills of remote A2A agents (fabric node-types import --from-a2a), " +
      'published with extensions "nodefabric.implementation" = a2a.send@1.0.0 and "nodefabric.a2a" (Agent Card URL, skill, skill hash, ' +
      "credentials as executor secrets). Sends one message, follows the task it makes, and resumes it after a crash. Called directly it is refused, since it names no agent.",
    input_schema: { type: "object" },
    output_schema: { type: "object" },
    constraints: { gates: { side_effect_class: "irreversible" } },
    extensions: { "nodefabric.trust_tier": "external" },
  },
  handler: a2aSkillHandler,
});
