/**
 * @nodefabric/importer-a2a: an A2A Agent Card in (its URL), one atomic node type per skill out, run by `a2a.send` of
 * @nodefabric/handler-a2a, plus what was left out and why. `fabric node-types import --from-a2a` loads it only when
 * asked; `npm create fabric-handler -- --from-a2a` bundles it.
 */
export {
  importA2aAgent,
  nodeTypeOfSkill,
  parseCardUrl,
  parseHeader,
  prefixFromName,
  A2aImportError,
  A2A_SEND_TEMPLATE,
  MAX_SKILLS,
  WELL_KNOWN_CARD_PATH,
  type A2aImport,
  type A2aImportOptions,
  type A2aSkill,
  type ImportHeader,
  type LeftOutSkill,
} from "./import-a2a-agent.js";
