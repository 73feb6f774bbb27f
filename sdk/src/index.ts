/**
 * @nodefabric/sdk: what handler packages import. Kept light on purpose: no fastify, no HTTP client,
 * no Ajv and no store, so a handler package loads fast and pulls nothing native. The test harness
 * (`@nodefabric/sdk/testing`) and the executor's runtime (`@nodefabric/sdk/runtime`) bring Ajv and undici;
 * this entry point brings neither.
 */
export { defineAtomic, isAtomicDefinition, isDefinition, SDK_VERSION, DEFINITION_BRAND } from "./define-atomic.js";
export { HandlerError, type HandlerErrorOptions } from "./handler-error.js";
export {
  defineFailureCodes,
  failWith,
  isFailureCatalogue,
  SDK_FAILURE_CODES,
  RETIRED_FAILURE_CODES,
  type CodeOf,
  type FailWith,
  type FailureCatalogue,
  type FailureCodeSpec,
  type Retryability,
  type SdkFailureCode,
} from "./failure-codes.js";
export { compiledPerNodeType } from "./node-type-config.js";
export { defineComposite, isCompositeDefinition } from "./define-composite.js";
export { defineAtomicSet, isAtomicSet, ATOMIC_SET_BRAND } from "./define-atomic-set.js";
export { ChildFailedError } from "./child-failed-error.js";
export { retryAfterMs } from "./retry-after.js";
export { defineSettings, isSettingsTable, setting, SettingsError, SETTINGS_BRAND } from "./settings.js";
export type { FromEnvOptions, SettingField, SettingFields, SettingGroup, SettingMap, SettingRow, SettingsPart, SettingsTable, SettingsValues, SettingSpec, SettingValue } from "./settings.js";
export { readResponseBytes, ResponseTooLargeError } from "./response-body.js";
export { networkFailureOf, networkFailureCause, upstreamUnavailable, upstreamUnavailableError, upstreamTimeoutError, UPSTREAM_UNAVAILABLE } from "./network-failure.js";
export type { NetworkFailure, NetworkFailureReason, NetworkTarget } from "./network-failure.js";
export { OPENAPI_EXTENSION } from "./http-operation-types.js";
export { clientCredentialsToken, forgetOAuthTokens, type ClientCredentials } from "./oauth2-client-credentials.js";
export {
  buildOperationRequest,
  callHttpOperation,
  operationDescriptorOf,
  readOperationAnswer,
  resolveBaseUrl,
  type AnswerHeaders,
  type CallHttpOperationOptions,
  type OperationRequest,
  type OperationRequestOptions,
} from "./http-operation.js";
export {
  HEADER_VALUE_PATTERN,
  BASE64_PATTERN,
  FORBIDDEN_PATH_VALUES,
  INPUT_RULE_PATTERNS,
  isHeaderValue,
  isBase64Text,
  isDotSegment,
  parameterRules,
  base64Rules,
  type SchemaRules,
} from "./operation-input-rules.js";
export type { HttpOperationDescriptor, OperationBody, OperationParameter, OperationSecurityScheme, OperationServer, ParameterStyle } from "./http-operation-types.js";
export type {
  AtomicContext,
  AtomicDefinition,
  AtomicSet,
  AtomicSetEntry,
  CallOptions,
  ChildRun,
  CompositeContext,
  CompositeDefinition,
  CompositeFn,
  DefinitionKind,
  FabricDefinition,
  HandlerEgress,
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
// The one shape of every importer (@nodefabric/importer-openapi, @nodefabric/importer-mcp).
export type { ImportResult, LeftOut } from "./import-result.js";
// Wire types a composite's code works with, re-exported so a handler package needs no second import.
export type { CandidateSet, ConstraintEnvelope, EvaluationResult, FabricErrorBody, Metadata, NodeTypeRef, RecoveryAction, SubtaskSpec } from "@nodefabric/schemas";
