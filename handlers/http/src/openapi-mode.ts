/**
 * `http.request` for a node type made from an OpenAPI operation (`fabric node-types import --from-openapi`): its
 * `extensions["nodefabric.openapi"]` describes the operation, and the request is built and the answer read by the
 * SDK's `buildOperationRequest` and `readOperationAnswer`, exactly as a generated handler package calls it.
 *
 * What differs from a generated package is where things come from and go to, since anyone who may publish a node type
 * writes its descriptor: every setting and secret is an executor secret handed out only for a host the operator bound
 * it to (`ctx.egress.secretFor`), never an environment variable; the request goes through `ctx.egress.fetch` within
 * the bounds of `nodefabric.http` (allowed hosts, size, time, redirects), of which only those options apply here.
 */
import {
  buildOperationRequest,
  HandlerError,
  OPENAPI_EXTENSION,
  operationDescriptorOf,
  readOperationAnswer,
  type AtomicContext,
  type HandlerEgress,
  type HttpOperationDescriptor,
  type JsonObject,
} from "@nodefabric/sdk";
import { boundedExchange, checkEgress } from "./bounded-exchange.js";
import { compileHttpConfig, HTTP_EXTENSION, invalidConfiguration, type HttpConfig } from "./http-config.js";
import { fail } from "./failure-codes.js";

/** The options of `nodefabric.http` a node type with `nodefabric.openapi` may set: the bounds, and a base URL. */
export const OPENAPI_HTTP_OPTIONS: readonly string[] = ["base_url", "allowed_hosts", "max_response_bytes", "timeout_ms", "follow_redirects", "max_redirects"];

type NodeTypeOfContext = AtomicContext["nodeType"];

/** A node type's descriptor and bounds, checked once. */
interface OpenApiNodeType {
  readonly op: HttpOperationDescriptor;
  readonly http: HttpConfig;
  /** Hosts of the OAuth 2 token URLs, allowed by default besides the operation's own host. */
  readonly tokenHosts: readonly string[];
}

const compiled = new WeakMap<object, OpenApiNodeType | HandlerError>();

function nameOf(nodeType: NodeTypeOfContext): string {
  return `${nodeType.node_type_id}@${nodeType.version}`;
}

/**
 * Whether `err` is the SDK's refusal of a descriptor, setting or secret: `invalid_configuration`, or
 * `configuration_error` from an executor whose SDK predates the one spelling (docs/errors.md, "Former spellings").
 */
function isSdkConfigurationError(err: unknown): err is HandlerError {
  return HandlerError.is(err) && (err.code === "invalid_configuration" || err.code === "configuration_error");
}

/** The SDK's `invalid_configuration` (a bad descriptor, a missing setting or secret) in http.request's terms. */
function asInvalidConfiguration(err: HandlerError, nodeType: NodeTypeOfContext): HandlerError {
  const needsSecrets = err.details?.secrets !== undefined || err.details?.setting !== undefined;
  const hint = needsSecrets ? "; settings and secrets are the executor's secrets (FABRIC_SECRET_<NAME>), each bound to the hosts it may be sent to (executor.secret_hosts)" : "";
  const message = err.message.startsWith(nameOf(nodeType)) ? err.message : `${nameOf(nodeType)}: ${err.message}`;
  return fail("invalid_configuration", message + hint, { retryable: false, details: { field: OPENAPI_EXTENSION, ...err.details }, cause: err });
}

function compile(nodeType: NodeTypeOfContext): OpenApiNodeType {
  const raw = nodeType.extensions?.[HTTP_EXTENSION];
  if (typeof raw === "object" && raw !== null && !Array.isArray(raw)) {
    const unknown = Object.keys(raw).filter((k) => !OPENAPI_HTTP_OPTIONS.includes(k));
    if (unknown.length > 0) {
      throw invalidConfiguration(nodeType, unknown[0]!, `is not an option of ${HTTP_EXTENSION} for a node type with ${OPENAPI_EXTENSION}, which describes the request itself (known: ${OPENAPI_HTTP_OPTIONS.join(", ")})`, {
        unknown,
      });
    }
  }
  const http = compileHttpConfig(nodeType, raw);
  let op: HttpOperationDescriptor;
  try {
    op = operationDescriptorOf(nodeType);
  } catch (err) {
    if (isSdkConfigurationError(err)) throw asInvalidConfiguration(err, nodeType);
    throw err;
  }
  const tokenHosts = Object.values(op.security_schemes).flatMap((scheme) => {
    if (scheme.type !== "oauth2" || !scheme.token_url) return [];
    try {
      return [new URL(scheme.token_url).host.toLowerCase()];
    } catch {
      return []; // refused, naming the scheme, when the token is asked for
    }
  });
  return { op, http, tokenHosts };
}

function openApiNodeTypeOf(nodeType: NodeTypeOfContext): OpenApiNodeType {
  let found = compiled.get(nodeType);
  if (!found) {
    try {
      found = compile(nodeType);
    } catch (err) {
      if (!HandlerError.is(err)) throw err;
      found = err;
    }
    compiled.set(nodeType, found);
  }
  if (found instanceof Error) throw found;
  return found;
}

/** `egress.secretFor`, its refusal naming the node type and what the secret was for. */
function boundSecret(egress: HandlerEgress, nodeType: NodeTypeOfContext, name: string, url: URL, what: string): string | undefined {
  try {
    return egress.secretFor(name, url);
  } catch (err) {
    if (!HandlerError.is(err)) throw err;
    throw new HandlerError(err.code, `${nameOf(nodeType)}: ${what} ${name}: ${err.message}`, { retryable: false, details: { ...err.details, field: OPENAPI_EXTENSION } });
  }
}

/** Runs one execution of a node type whose `extensions["nodefabric.openapi"]` describes its operation. */
export async function runOpenApiOperation(inputs: JsonObject, ctx: AtomicContext, egress: HandlerEgress): Promise<JsonObject> {
  const nodeType = ctx.nodeType;
  const { op, http, tokenHosts } = openApiNodeTypeOf(nodeType);
  // Never past the execution's deadline: the executor stops waiting then, and a late answer is thrown away.
  const timeoutMs = Math.max(1, Math.min(http.timeoutMs, ctx.deadline - Date.now()));
  let allowedHosts: readonly string[] = http.allowedHosts;
  const settingsRead = new Set<string>();

  let request;
  try {
    request = await buildOperationRequest(op, inputs, {
      ...(http.baseUrl !== undefined ? { baseUrl: http.baseUrl } : {}),
      setting: (name) => {
        const value = ctx.secrets.get(name);
        if (value !== undefined && value !== "") settingsRead.add(name);
        return value;
      },
      checkUrl: (url) => {
        if (!http.allowedHostsConfigured) allowedHosts = [url.host.toLowerCase(), ...tokenHosts];
        checkEgress(url, allowedHosts);
        // A setting shapes the URL (a base URL, a server variable): like any secret, it goes only where it is bound.
        for (const name of settingsRead) boundSecret(egress, nodeType, name, url, "the setting");
      },
      secret: (name, url) => boundSecret(egress, nodeType, name, url, "the secret"),
      fetch: (input, init) => {
        const url = new URL(String(input));
        checkEgress(url, allowedHosts, "the OAuth 2 token URL");
        return egress.fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
      },
    });
  } catch (err) {
    if (isSdkConfigurationError(err)) throw asInvalidConfiguration(err, nodeType);
    throw err;
  }
  const answer = await boundedExchange(
    egress.fetch,
    request,
    { allowedHosts, maxResponseBytes: http.maxResponseBytes, timeoutMs, followRedirects: http.followRedirects, maxRedirects: http.maxRedirects },
    ctx.signal,
  );
  return readOperationAnswer(op, answer.status, answer.headers, answer.body);
}
