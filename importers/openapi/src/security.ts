/**
 * OpenAPI security as node types apply it: each security scheme of the document becomes the secrets a run reads
 * (`<PREFIX>_<SCHEME>`, `<PREFIX>_<SCHEME>_TOKEN`…), and each operation's `security` becomes the alternatives of its
 * descriptor. Names are given to every scheme of the document in its order, so they do not depend on which operations
 * are imported.
 */
import type { OperationSecurityScheme } from "@nodefabric/sdk";
import type { RefFollower } from "./refs.js";
import type { SettingDescription } from "./types.js";

/** One operation's security, as its descriptor holds it. */
export interface OperationSecurity {
  security_schemes: Record<string, OperationSecurityScheme>;
  security: string[][];
  notes: string[];
  /** Set when no alternative can be met (mutual TLS only, undefined schemes…): why the operation is left out. */
  unusable?: string;
}

/** How a scheme is applied, or why it cannot be. */
type SchemeEntry =
  | { kind: "usable"; scheme: OperationSecurityScheme; secrets: SettingDescription[] }
  | { kind: "unusable"; reason: string };

/** The security schemes of one document, named once, applied per operation. */
export interface SecurityMapper {
  /** The security of an operation: its own `security` when present, else the document's. */
  forOperation(operation: Record<string, unknown>): OperationSecurity;
  /** The secrets of the named schemes, each once, in the document's order of schemes. */
  secretsOf(schemeNames: Iterable<string>): SettingDescription[];
}

/** Options of createSecurityMapper. */
export interface SecurityMapperOptions {
  settingsPrefix: string;
  follow: RefFollower;
  /** Names already given (settings), which no secret may take. */
  reservedNames: Set<string>;
  /** Resolves a relative OAuth 2 token URL, or answers undefined when it cannot. */
  resolveUrl: (url: string) => string | undefined;
}

/** Reads `components.securitySchemes` and the document's `security` once; see SecurityMapper. */
export function createSecurityMapper(document: Record<string, unknown>, options: SecurityMapperOptions): SecurityMapper {
  const components = isRecord(document.components) ? document.components : {};
  const declared = isRecord(components.securitySchemes) ? components.securitySchemes : {};
  const taken = new Set(options.reservedNames);
  const entries = new Map<string, SchemeEntry>();
  for (const [name, raw] of Object.entries(declared)) entries.set(name, schemeEntry(name, raw, options, taken));
  const order = [...entries.keys()];

  return {
    forOperation(operation) {
      const requirements = Array.isArray(operation.security) ? operation.security : Array.isArray(document.security) ? document.security : [];
      const result: OperationSecurity = { security_schemes: {}, security: [], notes: [] };
      const refused: string[] = [];
      for (const requirement of requirements) {
        if (!isRecord(requirement)) {
          refused.push(`a security requirement that is not an object (${JSON.stringify(requirement)})`);
          continue;
        }
        const names = Object.keys(requirement);
        const problems = names.map((name) => problemOf(name, entries.get(name))).filter((p): p is string => p !== undefined);
        if (problems.length > 0) {
          refused.push(problems.join("; "));
          continue;
        }
        for (const name of names) {
          const entry = entries.get(name) as Extract<SchemeEntry, { kind: "usable" }>;
          const existing = result.security_schemes[name];
          const scheme = existing ?? { ...entry.scheme };
          if (scheme.type === "oauth2") {
            const scopes = Array.isArray(requirement[name]) ? (requirement[name] as unknown[]).filter((s): s is string => typeof s === "string") : [];
            scheme.scopes = [...new Set([...scheme.scopes, ...scopes])];
          }
          result.security_schemes[name] = scheme;
        }
        if (!result.security.some((alternative) => sameNames(alternative, names))) result.security.push(names);
      }
      if (refused.length > 0 && result.security.length === 0) {
        result.unusable = `its security cannot be met by a node type: ${refused.join("; ")}`;
      } else {
        for (const reason of refused) result.notes.push(`a security alternative is left out: ${reason}`);
      }
      return result;
    },
    secretsOf(schemeNames) {
      const wanted = new Set(schemeNames);
      const secrets: SettingDescription[] = [];
      for (const name of order) {
        const entry = entries.get(name);
        if (wanted.has(name) && entry?.kind === "usable") secrets.push(...entry.secrets);
      }
      return secrets;
    },
  };
}

function sameNames(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((name) => b.includes(name));
}

function problemOf(name: string, entry: SchemeEntry | undefined): string | undefined {
  if (entry === undefined) return `it names the security scheme ${name}, which the document does not define`;
  return entry.kind === "unusable" ? entry.reason : undefined;
}

/** A scheme's runtime form and secrets, named `<PREFIX>_<SCHEME>…` without stutter and distinct from `taken`. */
function schemeEntry(name: string, raw: unknown, options: SecurityMapperOptions, taken: Set<string>): SchemeEntry {
  const followed = options.follow(raw);
  if ("error" in followed) return { kind: "unusable", reason: `the security scheme ${name} cannot be read: ${followed.error}` };
  const s = followed.value;
  if (!isRecord(s)) return { kind: "unusable", reason: `the security scheme ${name} is not an object` };
  const type = typeof s.type === "string" ? s.type : "";
  const base = secretBase(options.settingsPrefix, name);
  const secretName = (suffix: string) => distinctName(joinWithoutStutter(base, suffix), taken);
  const secret = (settingName: string, description: string): SettingDescription => ({ name: settingName, description, scheme: name });

  switch (type.toLowerCase()) {
    case "apikey": {
      const where = typeof s.in === "string" ? s.in.toLowerCase() : "";
      if (where !== "header" && where !== "query" && where !== "cookie") {
        return { kind: "unusable", reason: `the apiKey scheme ${name} is sent ${where === "" ? "nowhere" : `in ${where}`}; header, query or cookie was expected` };
      }
      if (typeof s.name !== "string" || s.name === "") return { kind: "unusable", reason: `the apiKey scheme ${name} has no parameter name` };
      if (where === "header" && !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(s.name)) {
        return { kind: "unusable", reason: `the apiKey scheme ${name} is sent in the header ${JSON.stringify(s.name)}, which is not a valid header name` };
      }
      const key = distinctName(base === options.settingsPrefix ? `${base}_API_KEY` : base, taken);
      return {
        kind: "usable",
        scheme: { type: "apiKey", in: where, name: s.name, secret: key },
        secrets: [secret(key, `API key of the ${name} scheme, sent as the ${where === "query" ? "query parameter" : where} ${s.name}.`)],
      };
    }
    case "http": {
      const httpScheme = typeof s.scheme === "string" ? s.scheme.toLowerCase() : "";
      if (httpScheme === "bearer") {
        const token = secretName("TOKEN");
        const format = typeof s.bearerFormat === "string" ? ` (${s.bearerFormat})` : "";
        return {
          kind: "usable",
          scheme: { type: "http", scheme: "bearer", secret: token },
          secrets: [secret(token, `Bearer token${format} of the ${name} scheme, sent in the Authorization header.`)],
        };
      }
      if (httpScheme === "basic") {
        const username = secretName("USERNAME");
        const password = secretName("PASSWORD");
        return {
          kind: "usable",
          scheme: { type: "http", scheme: "basic", username_secret: username, password_secret: password },
          secrets: [
            secret(username, `User name for HTTP basic authentication (the ${name} scheme), sent in the Authorization header.`),
            secret(password, `Password for HTTP basic authentication (the ${name} scheme), sent in the Authorization header.`),
          ],
        };
      }
      if (httpScheme === "") return { kind: "unusable", reason: `the http scheme ${name} names no authentication scheme` };
      const credentials = secretName("CREDENTIALS");
      return {
        kind: "usable",
        scheme: { type: "http", scheme: httpScheme, secret: credentials },
        secrets: [secret(credentials, `Credentials for HTTP ${httpScheme} authentication (the ${name} scheme), sent after "${httpScheme}" in the Authorization header.`)],
      };
    }
    case "oauth2": {
      const flows = isRecord(s.flows) ? s.flows : {};
      const clientCredentials = isRecord(flows.clientCredentials) ? flows.clientCredentials : undefined;
      const accessToken = secretName("ACCESS_TOKEN");
      const rawTokenUrl = typeof clientCredentials?.tokenUrl === "string" ? clientCredentials.tokenUrl : undefined;
      const tokenUrl = rawTokenUrl === undefined ? undefined : options.resolveUrl(rawTokenUrl);
      if (clientCredentials && tokenUrl) {
        const clientId = secretName("CLIENT_ID");
        const clientSecret = secretName("CLIENT_SECRET");
        return {
          kind: "usable",
          scheme: { type: "oauth2", token_url: tokenUrl, scopes: [], client_id_secret: clientId, client_secret_secret: clientSecret, access_token_secret: accessToken },
          secrets: [
            secret(accessToken, `OAuth 2 access token of the ${name} scheme, sent as a bearer token in the Authorization header; or set ${clientId} and ${clientSecret} to have one fetched.`),
            secret(clientId, `OAuth 2 client id of the ${name} scheme, for the client credentials flow at ${tokenUrl}.`),
            secret(clientSecret, `OAuth 2 client secret of the ${name} scheme, for the client credentials flow at ${tokenUrl}.`),
          ],
        };
      }
      const flowNames = Object.keys(flows).join(", ");
      return {
        kind: "usable",
        scheme: { type: "oauth2", scopes: [], access_token_secret: accessToken },
        secrets: [
          secret(
            accessToken,
            `OAuth 2 access token of the ${name} scheme${flowNames ? ` (${flowNames} flow${flowNames.includes(",") ? "s" : ""}, obtained outside the fabric)` : ""}, sent as a bearer token in the Authorization header.${clientCredentials && rawTokenUrl ? ` Its token URL ${rawTokenUrl} is relative and could not be resolved, so no token is fetched.` : ""}`,
          ),
        ],
      };
    }
    case "openidconnect": {
      const accessToken = secretName("ACCESS_TOKEN");
      const discovery = typeof s.openIdConnectUrl === "string" ? ` (discovery at ${s.openIdConnectUrl})` : "";
      return {
        kind: "usable",
        scheme: { type: "oauth2", scopes: [], access_token_secret: accessToken },
        secrets: [secret(accessToken, `OpenID Connect access token of the ${name} scheme${discovery}, sent as a bearer token in the Authorization header.`)],
      };
    }
    case "mutualtls":
      return { kind: "unusable", reason: `the ${name} scheme is mutual TLS (a client certificate), which a node type cannot present` };
    default:
      return { kind: "unusable", reason: `the security scheme ${name} has the type ${JSON.stringify(s.type ?? null)}, which is not known` };
  }
}

/** `<PREFIX>_<SCHEME>` in UPPER_SNAKE, the scheme's leading words dropped when they repeat the prefix. */
function secretBase(prefix: string, schemeName: string): string {
  const prefixWords = prefix.split("_").filter(Boolean);
  let words = upperSnakeWords(schemeName);
  if (words.length > prefixWords.length && prefixWords.every((w, i) => words[i] === w)) words = words.slice(prefixWords.length);
  else if (words.length === prefixWords.length && prefixWords.every((w, i) => words[i] === w)) words = [];
  return [prefix, ...words].join("_");
}

/** `base` and `suffix` joined by `_`, words at the end of `base` that begin `suffix` said once (`X_TOKEN` + `TOKEN` → `X_TOKEN`). */
function joinWithoutStutter(base: string, suffix: string): string {
  const baseWords = base.split("_");
  const suffixWords = suffix.split("_");
  // The prefix itself is never folded into the suffix.
  const foldable = baseWords.length - 1;
  for (let overlap = Math.min(foldable, suffixWords.length); overlap > 0; overlap--) {
    const tail = baseWords.slice(baseWords.length - overlap);
    if (tail.every((w, i) => w === suffixWords[i])) return [...baseWords, ...suffixWords.slice(overlap)].join("_");
  }
  return `${base}_${suffix}`;
}

/** The words of a name in upper case: `petstore_auth` → PETSTORE, AUTH; `bearerToken` → BEARER, TOKEN. */
export function upperSnakeWords(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1_$2")
    .toUpperCase()
    .split(/[^A-Z0-9]+/)
    .filter(Boolean);
}

function distinctName(name: string, taken: Set<string>): string {
  let candidate = name;
  for (let n = 2; taken.has(candidate); n++) candidate = `${name}_${n}`;
  taken.add(candidate);
  return candidate;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
