/** Media types as the mapping reads them: which carry JSON, and which text. */

/** True for `application/json` and any `…/…+json` media type, parameters ignored. */
export function isJsonMediaType(mediaType: string): boolean {
  const base = mediaType.split(";")[0].trim().toLowerCase();
  const slash = base.indexOf("/");
  if (slash <= 0) return false;
  const subtype = base.slice(slash + 1);
  return subtype === "json" || subtype.endsWith("+json");
}

/** True for text, XML and YAML media types, which are read as one string. */
export function isTextMediaType(mediaType: string): boolean {
  const base = mediaType.split(";")[0].trim().toLowerCase();
  return base.startsWith("text/") || base === "application/xml" || base.endsWith("+xml") || base === "application/yaml" || base === "application/x-yaml";
}
