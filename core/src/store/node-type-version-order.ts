/**
 * Node type versions: which strings are versions, and how the versions of one node type are ordered.
 *
 * **Which strings.** The contract makes a NodeType's `version` a string. The registry takes any string that is safe
 * as an id: 1 to 64 characters of ASCII letters, digits and `. _ : + -`, starting with a letter or a digit
 * ({@link NODE_TYPE_VERSION_PATTERN}). Every semver fits (`1.2.0`, `2.0.0-rc.1+build.7`), and so do `v1`, `2024-01`,
 * `latest-beta` and `1.0`. Spaces, `/`, `@`, `?`, `#`, `%` and non-ASCII are refused, so a version never needs escaping
 * in a path, never splits `id@version` and never looks like another version once normalised.
 *
 * **The order** (what "latest" means: `GET /v1/node-types/{id}` without `version`, the registry's listings, Selection's
 * catalogue, `fabric run <id>`):
 * - a strict semver 2.0 version ranks among semver versions by semver precedence (build metadata, which semver
 *   ignores, only breaks ties). `v1.2.0` and `1.2` are not strict semver: they are versions like any other string;
 * - any other version ranks **just above the highest semver version published before it** (below every semver
 *   version when none was), and those sharing that place rank by publication order.
 *
 * Why this rule for a mix: the newest publication becomes the latest, except a semver version lower than a semver
 * version already published (a backport, `1.4.2` after `2.0.0`), which slots into semver order below. So moving from
 * `1.3.0` to `2024-06` makes `2024-06` the latest, a later `2.0.0` is the latest again, and a backport never demotes
 * anything. The order is total and deterministic, and it never reorders versions already published when another is
 * published, so a store keeps one immutable sort key per version ({@link orderKey}), and listing and keyset pagination
 * are plain index scans in any SQL database. Alternatives were weighed: "semver always above the rest" would make a
 * node type that moved from `1.3.0` to date versions stuck at `1.3.0` forever; "the most recent publication always
 * wins" would let a backport `1.4.2` outrank `2.0.0`, against semver; a rule on timestamps alone is not a total order
 * once semver is also respected.
 *
 * Publication order is the order a store accepted the versions (a per-id sequence it keeps), which is the order of
 * their `published_at`, with ties within a millisecond broken by arrival.
 */
import semver from "semver";

/** Longest version, in characters (the JSON Schemas' `maxLength`). */
export const MAX_VERSION_LENGTH = 64;

/** What a publishable version looks like: safe as an id, 1 to {@link MAX_VERSION_LENGTH} characters. */
export const NODE_TYPE_VERSION_PATTERN = `^[A-Za-z0-9][A-Za-z0-9._:+-]{0,${MAX_VERSION_LENGTH - 1}}$`;
const VERSION_RE = new RegExp(NODE_TYPE_VERSION_PATTERN);

/** Why `version` cannot be published, or undefined when it can. */
export function versionProblem(version: unknown): string | undefined {
  if (typeof version !== "string" || version === "") return "must be a non-empty string";
  if (version.length > MAX_VERSION_LENGTH) return `must be at most ${MAX_VERSION_LENGTH} characters (got ${version.length})`;
  if (!VERSION_RE.test(version)) {
    return `must start with a letter or digit and hold only letters, digits and . _ : + - (such as 1.2.0, v1 or 2024-01; got ${JSON.stringify(version)})`;
  }
  return undefined;
}

/** True when `version` is a strict semver 2.0 string (no leading "v", "=" or spaces). */
export function isSemver(version: string): boolean {
  const parsed = semver.parse(version);
  if (!parsed) return false;
  const build = parsed.build.length > 0 ? `+${parsed.build.join(".")}` : "";
  return `${parsed.version}${build}` === version;
}

// Sort keys are plain strings compared bytewise. Three separators sit below every character a version may hold:
//   \u0001 ends a semver key before the place of a non-semver version anchored to it,
//   \u0002 starts build metadata, \u0003 separates prerelease identifiers.
// Their order makes a non-semver version anchored to S sort above S and below every semver key above S (a key
// extending S's key continues with \u0002, \u0003 or a version character, all above \u0001), build metadata sort
// below a longer prerelease, and a shorter prerelease list sort first.
const ANCHORED = "\u0001";
const BUILD = "\u0002";
const PRERELEASE_SEP = "\u0003";

// Semver forbids leading zeros in numeric identifiers, so "longer is bigger" then lexical order is numeric order.
function numericKey(digits: string): string {
  return `${String(digits.length).padStart(2, "0")}${digits}`;
}

/** A string whose byte order is semver precedence (ties broken by build metadata, so distinct versions have distinct keys). */
export function semverSortKey(version: string): string {
  const parsed = isSemver(version) ? semver.parse(version) : null;
  if (!parsed) throw new Error(`not a semver version: ${version}`);
  let key = `${numericKey(String(parsed.major))}.${numericKey(String(parsed.minor))}.${numericKey(String(parsed.patch))}`;
  if (parsed.prerelease.length === 0) {
    key += "1";
  } else {
    const ids = parsed.prerelease.map((id) => {
      const s = String(id);
      return /^[0-9]+$/.test(s) ? `0${numericKey(s)}` : `1${s}`;
    });
    key += `0${ids.join(PRERELEASE_SEP)}`;
  }
  if (parsed.build.length > 0) key += `${BUILD}${parsed.build.join(".")}`;
  return key;
}

/** The key of the semver version a key belongs or is anchored to ("" for none). */
function anchorOf(key: string): string {
  const at = key.indexOf(ANCHORED);
  return at < 0 ? key : key.slice(0, at);
}

/**
 * The immutable sort key of a version of one node type, computed when it is published.
 * @param seq its publication sequence within the node type (0, 1, 2, … in the order the store accepted them)
 * @param highestKeyBefore the highest key among the versions of that node type published before it, if any
 */
export function orderKey(version: string, seq: number, highestKeyBefore?: string): string {
  if (isSemver(version)) return semverSortKey(version);
  // The highest key is the highest semver's own, or that of a non-semver version anchored to it: either way its anchor
  // is the highest semver published so far.
  return `${anchorOf(highestKeyBefore ?? "")}${ANCHORED}${numericKey(String(seq))}`;
}

/**
 * The key a keyset cursor at `version` stands for when that version is not stored: a semver version sorts where it
 * would be, any other after every version of the node type.
 */
export function cursorKey(version: string): string {
  return isSemver(version) ? semverSortKey(version) : "\u007f";
}

/** The sort keys of versions listed in publication order, by version. */
export function orderKeys(versionsInPublicationOrder: readonly string[]): Map<string, string> {
  const keys = new Map<string, string>();
  let highest: string | undefined;
  versionsInPublicationOrder.forEach((v, seq) => {
    if (keys.has(v)) return;
    const key = orderKey(v, seq, highest);
    keys.set(v, key);
    if (highest === undefined || key > highest) highest = key;
  });
  return keys;
}

/** The versions of one node type, given in publication order, lowest first. */
export function orderVersions(versionsInPublicationOrder: readonly string[]): string[] {
  const keys = orderKeys(versionsInPublicationOrder);
  return [...keys.keys()].sort((a, b) => (keys.get(a)! < keys.get(b)! ? -1 : 1));
}

/**
 * The latest of the versions of one node type, given in publication order or in version order (the registry's
 * listings): the newest item, unless it is a semver version below a semver version already seen.
 */
export function latestOf<T>(items: readonly T[], versionOf: (item: T) => string): T | undefined {
  let latest: T | undefined;
  let highestSemver: string | undefined;
  for (const item of items) {
    const v = versionOf(item);
    if (!isSemver(v)) {
      latest = item;
      continue;
    }
    const key = semverSortKey(v);
    if (highestSemver === undefined || key > highestSemver) {
      highestSemver = key;
      latest = item;
    }
  }
  return latest;
}
