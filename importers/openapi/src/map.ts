/**
 * The operations of an OpenAPI 3.0/3.1 document made into node types: one atomic NodeType per operation, carrying the
 * HttpOperationDescriptor that `callHttpOperation` (a generated package) or `http.request` (no code) runs. Every
 * operation is either made into a node type or listed in `leftOut` with its reason; nothing is dropped silently.
 *
 * The document's `$ref`s are followed where they are read (path items, parameters, request bodies, responses,
 * security schemes); schemas go to the schema converter with their `$ref`s kept, so shared components are never
 * copied per operation. The rules (ids, inputs, bodies, outputs, security, servers) are on mapOpenApi; each has its
 * own module: operations.ts (operations and their ids), operation.ts (one operation), parameters.ts, request-body.ts,
 * response.ts, servers.ts, security.ts, refs.ts (`$ref`s) and schema-defs.ts (`$defs` of converted schemas).
 */
import { isRecord, lowerSet, oneLine } from "./json-values.js";
import { loaderNotesOf, OpenApiImportError } from "./load.js";
import { mapOperation } from "./operation.js";
import { assignFileNames, collectOperations } from "./operations.js";
import { createRefFollower } from "./refs.js";
import { SchemaChecker } from "./schema-checker.js";
import { createSchemaConverter } from "./schema.js";
import { createSecurityMapper } from "./security.js";
import { absoluteUrlAgainst, defaultBaseUrlOf, variableSettingNames } from "./servers.js";
import type { LeftOutOperation, MapOpenApiOptions, MappedOperation, OpenApiDocument, OpenApiMapping, SettingDescription } from "./types.js";

/** Operations between two `onProgress` lines. */
const PROGRESS_EVERY = 100;

/** At most this many distinct notes are repeated at the document level. */
const DOCUMENT_NOTES_MAX = 60;

/**
 * The node types of the operations of `document` (as loadOpenApi gives it: internal `$ref`s kept).
 *
 * - node_type_id is `<prefix>.<operationId>`, characters an id cannot hold replaced by `-`; an operation without one
 *   is `<method>-<path segments>` (GET /pets/{petId} → `get-pets-petId`); a `#fragment` of the path is not sent but
 *   tells operations apart; a clash gets `-2`, `-3`… in document order; an id too long is cut and given a short
 *   hash. Ids are made for every operation before include/exclude, so they do not depend on the selection.
 * - inputs: one per path, query, header and cookie parameter (by name, `<in>_<name>` when two share a name or the
 *   name is `body`), plus `body`; Accept, Content-Type and Authorization headers are ignored.
 * - the request body's media type: JSON, then form, multipart, text, then anything else as base64 bytes.
 * - outputs: the first 2xx answer (then `2XX`, then `default` when there is no 2xx) with JSON, as `object` when it
 *   describes only objects, else `{ result }`; a text answer is `{ result: string }`; none gives `{}`.
 * - side_effect_class: GET, HEAD, OPTIONS, TRACE → read; POST, PUT, PATCH → write; DELETE → irreversible.
 *
 * `notes` begins with the loader's notes when `document` came from loadOpenApi. Throws an OpenApiImportError only for
 * unusable options or a document without `paths`; a mapping may hold no operation at all (all left out).
 */
export function mapOpenApi(document: OpenApiDocument, options: MapOpenApiOptions): OpenApiMapping {
  checkOptions(options);
  if (!isRecord(document) || !isRecord(document.paths)) throw new OpenApiImportError("the OpenAPI document has no paths: there is no operation to make a node type of");
  const progress = options.onProgress ?? (() => {});
  const follow = createRefFollower(document);
  const converter = createSchemaConverter(document);
  const title = typeof document.info?.title === "string" && document.info.title.trim() !== "" ? document.info.title : "API";
  const apiVersion = document.info?.version === undefined ? "" : String(document.info.version);
  const documentNotes: string[] = [...loaderNotesOf(document)];
  const leftOut: LeftOutOperation[] = [];

  const P = options.settingsPrefix;
  const baseUrlSetting = `${P}_BASE_URL`;
  const settings = new Map<string, SettingDescription>();
  const location = options.location !== undefined && /^https?:\/\//i.test(options.location) ? options.location : undefined;
  const defaultBaseUrl = defaultBaseUrlOf(document, location);
  settings.set(baseUrlSetting, {
    name: baseUrlSetting,
    description: `Base URL of ${title}, replacing the server URL the document names${defaultBaseUrl ? "" : " (it names no absolute one, so this must be set)"}.`,
    ...(defaultBaseUrl ? { default: defaultBaseUrl } : {}),
  });
  const variableSettings = variableSettingNames(document, follow, P);
  const reserved = new Set([baseUrlSetting, ...variableSettings.values()]);
  const security = createSecurityMapper(document, {
    settingsPrefix: P,
    follow,
    reservedNames: reserved,
    resolveUrl: (url) => absoluteUrlAgainst(url, defaultBaseUrl || location),
  });

  const sites = collectOperations(document, follow, options.prefix, leftOut, documentNotes);
  if (isRecord(document.webhooks) && Object.keys(document.webhooks).length > 0) {
    documentNotes.push(`its ${Object.keys(document.webhooks).length} webhooks are requests the API sends, not operations to call; they are not imported`);
  }

  const components = isRecord(document.components) ? document.components : {};
  if (!isRecord(components.securitySchemes) || Object.keys(components.securitySchemes).length === 0) {
    documentNotes.push("the document declares no security schemes: its operations are called without credentials");
  }

  const include = lowerSet(options.include);
  const exclude = lowerSet(options.exclude);
  const matched = new Set<string>();
  const checker = new SchemaChecker();
  const operations: MappedOperation[] = [];
  const noteCounts = new Map<string, number>();
  let done = 0;
  for (const site of sites) {
    const keys = [site.operationId, ...(typeof site.operation.operationId === "string" ? [site.operation.operationId] : []), ...site.tags].map((k) => k.toLowerCase());
    for (const key of keys) if (include.has(key) || exclude.has(key)) matched.add(key);
    const leave = (reason: string) =>
      leftOut.push({ method: site.method.toUpperCase(), path: site.path, ...(typeof site.operation.operationId === "string" ? { operationId: site.operation.operationId } : {}), reason });
    if (include.size > 0 && !keys.some((k) => include.has(k))) leave(`not selected (--include ${options.include!.join(",")})`);
    else if (keys.some((k) => exclude.has(k))) leave(`excluded (--exclude ${options.exclude!.join(",")})`);
    else {
      let result: MappedOperation | { reason: string };
      try {
        result = mapOperation(site, {
          document,
          title,
          apiVersion,
          follow,
          convert: (schema, direction, notes) => converter.convert(schema, direction, notes),
          security,
          baseUrlSetting,
          variableSettings,
          location,
          nodeTypeVersion: options.nodeTypeVersion ?? "1.0.0",
          checker,
        });
      } catch (err) {
        result = { reason: `it could not be mapped: ${err instanceof Error ? err.message : String(err)}` };
      }
      if ("reason" in result) leave(result.reason);
      else {
        operations.push(result);
        for (const note of result.notes) noteCounts.set(note, (noteCounts.get(note) ?? 0) + 1);
      }
    }
    done++;
    if (sites.length >= PROGRESS_EVERY && (done % PROGRESS_EVERY === 0 || done === sites.length)) progress(`mapped ${done} of ${sites.length} operations`);
  }

  for (const [flag, list] of [["--include", options.include], ["--exclude", options.exclude]] as const) {
    const unmatched = (list ?? []).filter((value) => !matched.has(value.toLowerCase()));
    if (unmatched.length > 0) documentNotes.push(`${flag} ${unmatched.join(",")} matched no tag or operationId`);
  }
  assignFileNames(operations);

  // Settings of the server variables the imported operations use, with the first default seen.
  for (const operation of operations) {
    for (const [variable, setting] of Object.entries(operation.descriptor.settings.server_variables ?? {})) {
      if (settings.has(setting)) continue;
      const spec = operation.descriptor.server.variables?.[variable];
      settings.set(setting, {
        name: setting,
        description: `The server variable {${variable}} of ${title}${spec?.enum ? `: one of ${spec.enum.join(", ")}` : ""}${spec?.description ? ` (${oneLine(spec.description)})` : ""}; unused when ${baseUrlSetting} is set.`,
        ...(spec?.default !== undefined ? { default: spec.default } : {}),
      });
    }
  }
  const usedSchemes = new Set(operations.flatMap((o) => Object.keys(o.descriptor.security_schemes)));

  const repeated = [...noteCounts.entries()].sort((a, b) => b[1] - a[1]);
  for (const [note, count] of repeated.slice(0, DOCUMENT_NOTES_MAX)) documentNotes.push(count > 1 ? `${note} (${count} operations)` : note);
  if (repeated.length > DOCUMENT_NOTES_MAX) documentNotes.push(`and ${repeated.length - DOCUMENT_NOTES_MAX} more notes on single operations`);

  return {
    title,
    apiVersion,
    defaultBaseUrl,
    operations,
    nodeTypes: operations.map((o) => o.nodeType),
    leftOut,
    secrets: security.secretsOf(usedSchemes),
    settings: [...settings.values()],
    notes: documentNotes,
  };
}

function checkOptions(options: MapOpenApiOptions): void {
  if (typeof options.prefix !== "string" || !/^[A-Za-z0-9][A-Za-z0-9_:-]{0,63}$/.test(options.prefix)) {
    throw new OpenApiImportError(`the node type id prefix ${JSON.stringify(options.prefix)} must be 1-64 of [A-Za-z0-9_:-], starting with a letter or digit, with no dot`);
  }
  if (typeof options.settingsPrefix !== "string" || !/^[A-Z][A-Z0-9_]{0,63}$/.test(options.settingsPrefix) || options.settingsPrefix.endsWith("_")) {
    throw new OpenApiImportError(`the settings prefix ${JSON.stringify(options.settingsPrefix)} must be UPPER_SNAKE_CASE, such as PETSTORE`);
  }
}
