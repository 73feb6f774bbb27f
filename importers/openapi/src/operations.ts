/**
 * The operations of a document, in document order, and their names: the node type id of each (`<prefix>.<operationId>`,
 * made valid, short enough and distinct) and a file name for each operation mapped.
 */
import { createHash } from "node:crypto";
import { isRecord } from "./json-values.js";
import type { RefFollower } from "./refs.js";
import type { LeftOutOperation, MappedOperation, OpenApiDocument } from "./types.js";

/** The HTTP methods a path item can hold. */
export const HTTP_METHODS = new Set(["get", "put", "post", "delete", "options", "head", "patch", "trace"]);

/** What a node type id may be (the NodeType schema's pattern). */
const NODE_TYPE_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const NODE_TYPE_ID_MAX = 128;

/** One operation of the document, where it is, and its names. */
export interface OperationSite {
  path: string;
  /** The path as sent: without a `#fragment`. */
  sentPath: string;
  method: string;
  operation: Record<string, unknown>;
  pathItem: Record<string, unknown>;
  operationId: string;
  nodeTypeId: string;
  tags: string[];
}

/** Every operation of the document in document order, with its id; broken path items go to `leftOut`. */
export function collectOperations(document: OpenApiDocument, follow: RefFollower, prefix: string, leftOut: LeftOutOperation[], documentNotes: string[]): OperationSite[] {
  const sites: OperationSite[] = [];
  for (const [path, rawItem] of Object.entries(document.paths ?? {})) {
    const followed = follow(rawItem);
    if ("error" in followed) {
      leftOut.push({ method: "*", path, reason: `its path item cannot be read: ${followed.error}` });
      continue;
    }
    if (!isRecord(followed.value)) {
      if (followed.value !== null && followed.value !== undefined) leftOut.push({ method: "*", path, reason: "its path item is not an object" });
      continue;
    }
    const pathItem = followed.value;
    const hash = path.indexOf("#");
    const sentPath = hash >= 0 ? path.slice(0, hash) : path;
    for (const [key, operation] of Object.entries(pathItem)) {
      const method = key.toLowerCase();
      if (!HTTP_METHODS.has(method)) continue;
      if (!isRecord(operation)) {
        leftOut.push({ method: method.toUpperCase(), path, reason: "the operation is not an object" });
        continue;
      }
      const documentId = typeof operation.operationId === "string" && operation.operationId.trim() !== "" ? operation.operationId.trim() : undefined;
      const operationId = documentId ?? `${method}-${pathSlug(path)}`;
      const tags = Array.isArray(operation.tags) ? operation.tags.filter((t): t is string => typeof t === "string") : [];
      sites.push({ path, sentPath: sentPath.startsWith("/") ? sentPath : `/${sentPath}`, method, operation, pathItem, operationId, nodeTypeId: "", tags });
    }
  }
  assignNodeTypeIds(sites, prefix, documentNotes);
  return sites;
}

/** The path's segments joined by `-`, braces dropped: `/pets/{petId}` → `pets-petId`; a fragment is one more segment. */
function pathSlug(path: string): string {
  const slug = path
    .split(/[/#]/)
    .map((segment) => segment.replace(/[{}]/g, ""))
    .filter((segment) => segment !== "")
    .join("-");
  return slug === "" ? "root" : slug;
}

/** `<prefix>.<id>` for each operation: valid, at most 128 characters, distinct (document order decides clashes). */
function assignNodeTypeIds(sites: OperationSite[], prefix: string, documentNotes: string[]): void {
  const taken = new Map<string, OperationSite>();
  for (const site of sites) {
    let part = sanitizeIdPart(site.operationId);
    if (part === "") part = sanitizeIdPart(`${site.method}-${pathSlug(site.path)}`) || "operation";
    const base = fitId(prefix, part, "");
    let id = base;
    for (let n = 2; taken.has(id); n++) id = fitId(prefix, part, `-${n}`);
    if (id !== base) {
      const first = taken.get(base)!;
      documentNotes.push(`${site.method.toUpperCase()} ${site.path} would have the node type id ${base}, like ${first.method.toUpperCase()} ${first.path}; it is ${id}`);
    }
    taken.set(id, site);
    site.nodeTypeId = id;
  }
}

function sanitizeIdPart(text: string): string {
  return text
    .replace(/[^A-Za-z0-9._:-]+/g, "-")
    .replace(/^[^A-Za-z0-9]+/, "")
    .replace(/[-.]+$/, "");
}

/** `<prefix>.<part><suffix>`, `part` cut and given a stable 8-character hash when the whole would pass 128 characters. */
function fitId(prefix: string, part: string, suffix: string): string {
  const whole = `${prefix}.${part}${suffix}`;
  if (whole.length <= NODE_TYPE_ID_MAX && NODE_TYPE_ID.test(whole)) return whole;
  const hash = createHash("sha256").update(part).digest("hex").slice(0, 8);
  const room = NODE_TYPE_ID_MAX - prefix.length - 1 - suffix.length - hash.length - 1;
  const cut = part.slice(0, Math.max(0, room)).replace(/[-.]+$/, "");
  return `${prefix}.${cut === "" ? "" : `${cut}-`}${hash}${suffix}`;
}

/** A kebab-case file name per operation, from its id, distinct in the mapping. */
export function assignFileNames(operations: MappedOperation[]): void {
  const taken = new Set<string>();
  for (const operation of operations) {
    const id = operation.nodeType.node_type_id;
    const kebab =
      id
        .slice(id.indexOf(".") + 1)
        .replace(/([a-z0-9])([A-Z])/g, "$1-$2")
        .replace(/([A-Z]+)([A-Z][a-z])/g, "$1-$2")
        .toLowerCase()
        .replace(/[^a-z0-9]+/g, "-")
        .replace(/^-+|-+$/g, "") || "operation";
    let name = kebab;
    for (let n = 2; taken.has(name); n++) name = `${kebab}-${n}`;
    taken.add(name);
    operation.fileName = name;
  }
}
