/**
 * create-fabric-handler as a library: render a handler package (from a template or an OpenAPI document) in memory,
 * or run the whole command.
 */
export { runCreateCommand, nextSteps, type CommandEnvironment } from "./create-command.js";
export { parseCliArguments, USAGE, DEFAULT_PACKAGE_NAME, type CliArguments } from "./cli-arguments.js";
export { ScaffoldError, UsageError } from "./errors.js";
export { renderPackage, writePackage, assertUsableTargetDirectory, isTemplateName, TEMPLATE_NAMES, TEMPLATE_DESCRIPTIONS } from "./scaffold.js";
export type { PackageSpec, RenderedPackage, TemplateName } from "./scaffold.js";
export { openApiPackage, sampleInputsOf, type OpenApiPackage, type OpenApiPackageOptions, type Exchange, type TestedExchange } from "./openapi-package.js";
export { packageManifest, peerSpecOf, DEFAULT_SDK_SPEC, TOOL_VERSIONS } from "./package-manifest.js";
export { assertValidPackageName, packageNameProblems, folderNameOf, nodeTypePrefixOf, baseUrlSettingOf, packageNameFromTitle } from "./package-name.js";
export type { GeneratedFile } from "./template-files.js";
export { a2aPackage, renderA2aPackage, A2A_PACKAGE_VERSIONS, type A2aPackage, type A2aExchange } from "./a2a-package.js";
