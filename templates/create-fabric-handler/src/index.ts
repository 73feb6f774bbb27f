/**
 * create-fabric-handler as a library: render a handler package (from a template or an OpenAPI document) in memory,
 * or run the whole command.
 */
export { runCreateCommand, nextSteps, type CommandEnvironment } from "./create-command.js";
export { parseCliArguments, USAGE, DEFAULT_PACKAGE_NAME, type CliArguments } from "./cli-arguments.js";
export { ScaffoldError, UsageError } from "./errors.js";
export { renderPackage, writePackage, assertUsableTargetDirectory, isTemplateName, TEMPLATE_NAMES, TEMPLATE_DESCRIPTIONS } from "./scaffold.js";
export type { PackageSpec, RenderedPackage, TemplateName } from "./scaffold.js";
export { loadOpenApiDocument, type LoadedOpenApiDocument } from "./openapi-document.js";
export { assertOpenApi3, defaultBaseUrlOf, mapOpenApi, openApiToHandlers, HTTP_METHODS, SIDE_EFFECT_CLASS_BY_METHOD } from "./openapi-to-handlers.js";
export type { HttpNodeType, OpenApiDocument, OpenApiMapping, SkippedOperation } from "./openapi-to-handlers.js";
export { toJsonSchema, describesOnlyObjects, type SchemaObject } from "./openapi-schema.js";
export { exampleOf } from "./schema-example.js";
export { packageManifest, peerSpecOf, DEFAULT_CORE_SPEC, TOOL_VERSIONS } from "./package-manifest.js";
export { assertValidPackageName, packageNameProblems, folderNameOf, nodeTypePrefixOf, baseUrlSettingOf, packageNameFromTitle } from "./package-name.js";
export type { GeneratedFile } from "./template-files.js";
