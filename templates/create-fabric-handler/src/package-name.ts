/**
 * The names derived from the npm package name: the folder it is created in, the prefix of its node type ids, and the
 * setting that overrides its upstream's base URL.
 */
import validateNpmPackageName from "validate-npm-package-name";
import { UsageError } from "./errors.js";

/** Throws a UsageError listing every reason `name` cannot be published as a new npm package. */
export function assertValidPackageName(name: string): void {
  const problems = packageNameProblems(name);
  if (problems.length > 0) throw new UsageError(`invalid package name ${JSON.stringify(name)}: ${problems.join("; ")}`);
}

/** Why `name` cannot be a new npm package (empty when it can). */
export function packageNameProblems(name: string): string[] {
  const result = validateNpmPackageName(name);
  if (result.validForNewPackages) return [];
  return [...(result.errors ?? []), ...(result.warnings ?? [])];
}

/** The folder a package is created in by default: its name without the scope (`@acme/fabric-weather` → `fabric-weather`). */
export function folderNameOf(packageName: string): string {
  return packageName.slice(packageName.lastIndexOf("/") + 1);
}

/**
 * The prefix of the package's node type ids: the unscoped name without a leading `fabric-`/`nodefabric-` or a trailing
 * `-handler(s)`, so `@acme/fabric-weather` and `weather-handler` both give `weather.<something>`.
 */
export function nodeTypePrefixOf(packageName: string): string {
  let prefix = folderNameOf(packageName);
  for (const affix of [/^(?:node)?fabric-/, /-handlers?$/]) {
    const stripped = prefix.replace(affix, "");
    if (stripped !== "") prefix = stripped;
  }
  // The prefix is the part of a node type id before its first dot: [A-Za-z0-9_:-], starting with a letter or digit,
  // at most 64 characters.
  prefix = prefix
    .replace(/[^A-Za-z0-9_:-]+/g, "-")
    .replace(/^[^A-Za-z0-9]+/, "")
    .slice(0, 64)
    .replace(/[^A-Za-z0-9]+$/, "");
  return prefix === "" ? "handler" : prefix;
}

/**
 * The name of the setting that overrides the upstream's base URL: `<PREFIX>_BASE_URL`, read from the executor's secrets
 * (environment `FABRIC_SECRET_<PREFIX>_BASE_URL`) or from the environment variable of that name.
 */
export function baseUrlSettingOf(nodeTypePrefix: string): string {
  const stem = nodeTypePrefix.toUpperCase().replace(/[^A-Z0-9]+/g, "_").replace(/^_+|_+$/g, "");
  // A shell variable cannot start with a digit.
  return `${/^[0-9]/.test(stem) ? "_" : ""}${stem === "" ? "UPSTREAM" : stem}_BASE_URL`;
}

/** A package name made from free text such as an API title (`"Pet Store API"` → `pet-store-api`); undefined when none fits. */
export function packageNameFromTitle(title: string): string | undefined {
  const slug = title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 60)
    .replace(/-+$/, "");
  return slug !== "" && packageNameProblems(slug).length === 0 ? slug : undefined;
}
