/**
 * @nodefabric/core/sdk: what handler packages import. Kept light on purpose: no fastify, no HTTP client,
 * no Ajv and no store, so a handler package loads fast and pulls nothing native.
 */
export { defineAtomic, isAtomicDefinition, isDefinition, SDK_VERSION, DEFINITION_BRAND } from "./define-atomic.js";
export { HandlerError, type HandlerErrorOptions } from "./handler-error.js";
export type {
  AtomicContext,
  AtomicDefinition,
  DefinitionKind,
  FabricDefinition,
  HandlerFn,
  HandlerLogger,
  HandlerSecrets,
  JsonObject,
  JsonValue,
  LogFn,
  NodeTypeDefinition,
  UpstreamRequestOptions,
  UpstreamResponse,
} from "./types.js";
