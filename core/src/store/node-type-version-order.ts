/**
 * Node type versions are semver. Stores sort by a plain string key that orders exactly like semver
 * precedence (prereleases below their release, numeric identifiers by value), so ordering and
 * keyset pagination work with an ordinary index in any SQL database.
 */
import semver from "semver";

/** True when `version` is a strict semver 2.0 string (no leading "v", "=" or spaces). */
export function isSemver(version: string): boolean {
  const parsed = semver.parse(version);
  if (!parsed) return false;
  const build = parsed.build.length > 0 ? `+${parsed.build.join(".")}` : "";
  return `${parsed.version}${build}` === version;
}

// Semver forbids leading zeros in numeric identifiers, so "longer is bigger" then lexical order is numeric order.
function numericKey(digits: string): string {
  return `${String(digits.length).padStart(2, "0")}${digits}`;
}

/**
 * A string whose byte order is semver precedence. Build metadata, which semver ignores, only breaks
 * ties so that every distinct version string has a distinct key.
 */
export function versionSortKey(version: string): string {
  const parsed = semver.parse(version);
  if (!parsed) throw new Error(`not a semver version: ${version}`);
  let key = `${numericKey(String(parsed.major))}.${numericKey(String(parsed.minor))}.${numericKey(String(parsed.patch))}`;
  if (parsed.prerelease.length === 0) {
    key += "1";
  } else {
    // \u0002 between identifiers sorts below every identifier character, so a shorter list sorts first.
    const ids = parsed.prerelease.map((id) => {
      const s = String(id);
      return /^[0-9]+$/.test(s) ? `0${numericKey(s)}` : `1${s}`;
    });
    key += `0${ids.join("\u0002")}`;
  }
  // \u0001 sorts below the identifier separator, so build metadata never outranks a longer prerelease.
  if (parsed.build.length > 0) key += `\u0001${parsed.build.join(".")}`;
  return key;
}

/** Compares two semver strings by precedence (ties broken by build metadata); usable with Array.sort. */
export function compareVersions(a: string, b: string): number {
  const ka = versionSortKey(a);
  const kb = versionSortKey(b);
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}
