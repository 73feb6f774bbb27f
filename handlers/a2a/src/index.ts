/**
 * @nodefabric/handler-a2a: `a2a.send`, the implementation of node types made from remote A2A agents' skills, and the
 * definitions the importer (@nodefabric/importer-a2a, `fabric node-types import --from-a2a`) makes them with.
 */
import { a2aSend } from "./a2a-send.js";

export { a2aSend, a2aSkillHandler, configOf } from "./a2a-send.js";
export { compileA2aConfig, A2A_EXTENSION, TENANT_PLACEHOLDER, type A2aConfig } from "./a2a-config.js";
export { callAgentSkill, savedTask, type RemoteTaskCheckpoint } from "./remote-task.js";
export { skillDefinitionHash, skillSchema, type A2aSkill } from "./skill-definition.js";
export { outputsOf, DEFAULT_OUTPUT_SCHEMA, DEFAULT_DATA_INPUT_SCHEMA, TEXT_INPUT_SCHEMA } from "./outputs.js";
export { A2A_FAILURE_CODES } from "./failure-codes.js";
export default a2aSend;
