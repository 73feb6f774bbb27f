/**
 * @nodefabric/core: the services of the Node-Centric Execution Fabric, and what they share.
 */
export { createService, sendError, toErrorResponse, SERVICE_NAMES, type ServiceName, type ServiceOptions, type HealthCheck, type HealthStatus } from "./http/service.js";
export { FabricError, ERROR_STATUS, FAILURE_CODES, errorEnvelope, invalidRequest, type RequestErrorCode, type FailureCode, type ErrorBody } from "./http/errors.js";
export { ref, sharedAjv } from "./http/validation.js";
export { clock, setClock, type Clock } from "./clock.js";
export { newId } from "./ids.js";
export { SERVICE_VERSION } from "./version.js";
export { loadConfig, serviceUrl, servicePort, ConfigError, CONFIG_SCHEMA, type FabricConfig } from "./config.js";
export { FABRIC_SETTINGS } from "./settings/fabric-settings.js";
export { ENVIRONMENT_SETTINGS } from "./settings/environment-settings.js";
// The settings-table helper, for plugins (which depend on core, not on the SDK) to describe their own settings.
export { defineSettings, setting, SettingsError, isSettingsTable, type SettingsTable, type SettingsValues } from "@nodefabric/sdk";
export { startFabric, buildService, type RunningFabric, type RunningService, type StartFabricOptions } from "./fabric.js";
export { HttpClient, type HttpClientOptions } from "./clients/http-client.js";
export { RegistryClient } from "./clients/registry-client.js";
export { buildNodeRegistry } from "./services/node-registry/index.js";
export { buildSelection } from "./services/selection/index.js";
export { buildPdp, createDecider, defaultPolicySet, loadPolicyFile, PolicyFileError, type Decider } from "./services/pdp/index.js";
export { buildAtomicExecutor } from "./services/atomic-executor/index.js";
export { loadHandlers, handlersFromDefinitions, HandlerLoadError, type LoadedHandlers, type LoadedDefinition, type FailedHandlerLoad } from "./services/atomic-executor/handler-loader.js";
export type { AtomicExecutorOptions } from "./services/atomic-executor/index.js";
export { buildRunCoordinator, type RunCoordinatorOptions } from "./services/run-coordinator/index.js";
export { buildCompositeExecutor, type CompositeExecutorOptions } from "./services/composite-executor/index.js";
export { CoordinatorClient } from "./clients/coordinator-client.js";
export { TokenVerifier, DEFAULT_ALGORITHMS, type TokenVerifierOptions, type KeySource, type VerifiedToken } from "./http/token-verifier.js";
export { fabricAuth, AUTH_MODES, CALLER_HEADER, type AuthMode, type Principal, type InboundAuthOptions, type ServiceSecurityOptions } from "./http/auth-plugin.js";
export { SCOPES, ROUTE_ACCESS, PUBLIC_ROUTES, audienceOf, outboundScopes, type Scope, type RouteAccess } from "./http/auth-scopes.js";
export { SignedServiceTokens, ClientCredentialsServiceTokens, readSigningKey, type ServiceTokens } from "./clients/service-tokens.js";
export { AssignmentTokens, loadOrCreateAssignmentSecret, ASSIGNMENT_TYP } from "./engine/assignment-tokens.js";
export { buildRunGateway } from "./services/run-gateway/index.js";
export type { RunGatewayApi, GatewayCaller, GatewayAnswer } from "./services/run-gateway/gateway-api.js";
export { GatewayCalls, callerHeaders, followToEnd, type CallerHeaders, type FaceCaller, type FaceAnswer, type FaceErrorBody } from "./faces/gateway-calls.js";
export { callerDigest, newFaceRunId, type CallerInfo } from "./faces/caller-info.js";
export { Catalogue, globToRegExp, type CatalogueOptions } from "./faces/catalogue.js";
export { PolicyFilter, type PolicyFilterOptions } from "./faces/policy-filter.js";
export { searchCatalogue, MAX_SEARCH_RESULTS, type CatalogueSearch, type CatalogueSearchAnswer } from "./faces/catalogue-search.js";
export { EgressPolicy, EgressDeniedError, createEgressDispatcher, egressFetch, type EgressOptions } from "./services/atomic-executor/egress-policy.js";
export { definePlugin, isPlugin, pluginProblem, PLUGIN_BRAND, type PluginDefinition, type PluginInput, type PluginStores, type PluginService, type StoreFactory, type StoreOpenOptions, type CommandFactory, type CommandTools, type PluginServiceContext, type PluginLink } from "./plugin.js";
export { loadPlugins, PluginLoadError, type LoadedPlugin, type LoadPluginsOptions } from "./plugin-loader.js";
export { pluginsFor, pluginServiceContext } from "./fabric.js";
export { openSqliteRunStore, SqliteRunStore } from "./store/sqlite-run-store.js";
export { SqliteNodeTypeStore } from "./store/sqlite-node-type-store.js";
export { SqliteCandidateSetStore } from "./store/candidate-set-sqlite-store.js";
export type { RunStore, RunRecord, NodeRunRecord, WriteBatch, RunListQuery, ClaimOptions, ApprovalRecord, ApprovalListQuery, ApprovalListing, NewRunEvent } from "./store/run-store.js";
export type { NodeTypeStore } from "./store/node-type-store.js";
export { FencedError, FENCED, RunExistsError, RUN_EXISTS, UnknownRunError, TERMINAL_STATES, type SharedRunStore, type CoordinatorRecord, type RunOwner } from "./store/run-store.js";
// The run store's rows and their mappers, for the stores of plugins (plugins/postgres).
export { rowMappers, rootTypesOf, byAge, eventWithSeq, type RunRow, type NodeRunRow, type ApprovalRow, type RowMappers } from "./store/run-rows.js";
export { HeldRunCache } from "./store/held-run-cache.js";
export { StoreUnavailableError, storeUnavailable, STORE_RETRY_AFTER_SECONDS } from "./store/store-unavailable.js";
export { orderKey, orderKeys, cursorKey, isSemver } from "./store/node-type-version-order.js";
export type { CandidateSetStore, StoredCandidateSet } from "./store/candidate-set-store.js";
export { CHANNEL_NAMES, type ChannelMessages, type RunStartedMessage, type RunEndedMessage, type NodeRunEndedMessage, type NodeRunRetryingMessage, type BudgetExceededMessage, type PdpDecisionMessage, type StoreWriteMessage, type HttpRequestMessage } from "./observe/channels.js";
export type { ObservedValues } from "./observe/observables.js";
export { cacheSizes, trackCache, type CacheBound, type CacheReport, type CacheSize } from "./observe/caches.js";
