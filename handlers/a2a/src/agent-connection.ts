/**
 * Reaching a remote A2A agent from one execution: every request through the executor's egress policy
 * (`ctx.egress.fetch`), with the node type's headers and its credentials (executor secrets, each sent only to a host
 * the operator bound it to, per tenant where the name says `{tenant}`); never the caller's own token, which the
 * executor does not even hold. Then the agent's card, the check of the pinned skill, and an `@a2a-js/sdk` client
 * over that same fetch (JSON-RPC or HTTP+JSON, whichever the card offers; A2A 1.0, and 0.3 agents through the SDK's
 * compatibility layer).
 */
import { HandlerError, networkFailureOf, type AtomicContext, type HandlerEgress } from "@nodefabric/sdk";
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory, type Client } from "@a2a-js/sdk/client";
import type { AgentCard } from "@a2a-js/sdk";
import { A2A_EXTENSION, TENANT_PLACEHOLDER, type A2aConfig } from "./a2a-config.js";
import { skillDefinitionHash, type A2aSkill } from "./skill-definition.js";
import { fail } from "./failure-codes.js";

/** `<node type>@<version>`, for messages. */
export function nameOf(ctx: AtomicContext): string {
  return `${ctx.nodeType.node_type_id}@${ctx.nodeType.version}`;
}

/** Time left for this execution: the node type's time-out as the executor set the deadline. */
export function remainingMs(ctx: AtomicContext): number {
  return Math.max(1, ctx.deadline - Date.now());
}

function egressOf(ctx: AtomicContext): HandlerEgress {
  const egress = (ctx as Partial<Pick<AtomicContext, "egress">>).egress;
  if (!egress || typeof egress.fetch !== "function" || typeof egress.secretFor !== "function") {
    throw fail("invalid_configuration", "this executor gives handlers no ctx.egress; @nodefabric/handler-a2a needs a newer @nodefabric/core", { retryable: false });
  }
  return egress;
}

/**
 * The secret a configured name stands for in this run: `{tenant}` replaced by the run's tenant. A per-tenant secret
 * in a run without a tenant, or of a tenant whose id cannot be part of a secret's name, is refused: no other
 * tenant's credentials, and no shared ones, are used instead.
 */
function secretNameFor(template: string, field: string, ctx: AtomicContext): string {
  if (!template.includes(TENANT_PLACEHOLDER)) return template;
  const tenant = ctx.tenant_id;
  if (typeof tenant !== "string" || !/^[A-Za-z0-9_]{1,64}$/.test(tenant)) {
    throw new HandlerError(
      "upstream_unauthorized",
      `${nameOf(ctx)}: ${A2A_EXTENSION}.${field} names a secret per tenant (${template}), and this run ${typeof tenant === "string" && tenant !== "" ? `has a tenant id (${JSON.stringify(tenant.slice(0, 80))}) that cannot be part of a secret's name` : "has no tenant"}`,
      { retryable: false, details: { field: `${A2A_EXTENSION}.${field}`, secret: template, ...(tenant ? { tenant_id: tenant } : {}) } },
    );
  }
  return template.replaceAll(TENANT_PLACEHOLDER, tenant);
}

/** The node type's headers for a request to `url`: plain ones, then each secret, if it is bound to `url`'s host. */
function headersFor(config: A2aConfig, url: URL, ctx: AtomicContext, egress: HandlerEgress): Array<[string, string]> {
  const headers: Array<[string, string]> = config.headers.map(([k, v]) => [k, v]);
  for (const s of config.secretHeaders) {
    const field = `secret_headers.${s.header}`;
    const name = secretNameFor(s.secret, field, ctx);
    let value: string | undefined;
    try {
      value = egress.secretFor(name, url);
    } catch (err) {
      if (!HandlerError.is(err)) throw err;
      throw new HandlerError(err.code, `${nameOf(ctx)}: ${A2A_EXTENSION}.${field}: ${err.message}`, { retryable: false, details: { ...err.details, field: `${A2A_EXTENSION}.${field}` } });
    }
    if (value === undefined) {
      if (name !== s.secret) {
        throw new HandlerError("upstream_unauthorized", `${nameOf(ctx)}: tenant ${ctx.tenant_id} has no credentials for this agent: ${A2A_EXTENSION}.${field} names the secret ${s.secret}, and this executor has no ${name} (FABRIC_SECRET_${name})`, {
          retryable: false,
          details: { field: `${A2A_EXTENSION}.${field}`, secret: name, tenant_id: ctx.tenant_id },
        });
      }
      throw fail("invalid_configuration", `${nameOf(ctx)}: ${A2A_EXTENSION}.${field} names the secret ${name}, which this executor does not have (FABRIC_SECRET_${name})`, {
        retryable: false,
        details: { field: `${A2A_EXTENSION}.${field}`, secret: name },
      });
    }
    headers.push([s.header, s.prefix + value]);
  }
  return headers;
}

/**
 * The fetch the SDK's client is given: the egress policy's, with the node type's headers, bounded by the execution's
 * deadline (an SSE stream lasts as long as the remote task). Once the execution was stopped, a request (CancelTask)
 * goes out as a `final` one: not aborted with the execution, 5 s at most. An HTTP 401/403 becomes
 * `upstream_unauthorized`, a 5xx or 429 `upstream_unavailable`, whatever the SDK would have made of them.
 */
export function agentFetch(config: A2aConfig, ctx: AtomicContext): typeof globalThis.fetch {
  const egress = egressOf(ctx);
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(typeof input === "string" || input instanceof URL ? String(input) : input.url);
    const headers = new Headers(init?.headers);
    for (const [k, v] of headersFor(config, url, ctx, egress)) headers.set(k, v);
    const stopped = ctx.signal.aborted;
    const { signal, ...rest } = init ?? {};
    const res = await egress.fetch(url.href, { ...rest, headers, ...(stopped ? { final: true } : { signal, timeoutMs: remainingMs(ctx) }) } as RequestInit);
    if (res.status === 401 || res.status === 403) {
      await res.body?.cancel().catch(() => undefined);
      throw new HandlerError("upstream_unauthorized", `${nameOf(ctx)}: the A2A agent at ${url.origin} refused the credentials (HTTP ${res.status}): check its secrets`, { retryable: false, details: { status: res.status, url: url.href } });
    }
    if (res.status >= 500 || res.status === 429) {
      const body = (await res.text().catch(() => "")).slice(0, 300);
      throw fail("upstream_unavailable", `${nameOf(ctx)}: the A2A agent at ${url.origin} answered HTTP ${res.status}${body ? `: ${body}` : ""}`, { retryable: true, details: { status: res.status, url: url.href } });
    }
    return res;
  }) as typeof globalThis.fetch;
}

/** Walks `err`'s causes for the first HandlerError (the egress fetch and agentFetch throw them). */
export function handlerErrorIn(err: unknown, depth = 0): HandlerError | undefined {
  if (depth > 8 || typeof err !== "object" || err === null) return undefined;
  if (HandlerError.is(err)) return err;
  return handlerErrorIn((err as { cause?: unknown }).cause, depth + 1);
}

/**
 * The HandlerError of a failure of `phase` talking to the agent. Until the message was sent, or once the remote task's
 * id is saved (a retry resumes it, sending nothing again), a connection failure may be retried; between the two, only
 * if nothing reached the agent (refused, no such host).
 */
export function mapFailure(err: unknown, phase: "card" | "send" | "follow" | "resume", ctx: AtomicContext, agent: string): unknown {
  if (ctx.signal.aborted) return err;
  const mayRetry = phase !== "send";
  const found = handlerErrorIn(err);
  if (found) {
    if (found.code !== "upstream_unavailable") return found;
    const reason = found.details?.reason;
    const nothingSent = reason === "connection_refused" || reason === "dns_failure";
    return new HandlerError(found.code, found.message.startsWith(nameOf(ctx)) ? found.message : `${nameOf(ctx)}: A2A agent ${agent}: ${found.message}`, { retryable: nothingSent || mayRetry, details: { ...found.details, phase }, cause: found });
  }
  const network = networkFailureOf(err);
  if (network) {
    const nothingSent = network.reason === "connection_refused" || network.reason === "dns_failure";
    return fail("upstream_unavailable", `${nameOf(ctx)}: the A2A agent ${agent} is unreachable (${network.reason}: ${network.message})`, { retryable: nothingSent || mayRetry, details: { reason: network.reason, code: network.code, phase }, cause: err });
  }
  const e = err as { name?: string; message?: string; reason?: string };
  return new HandlerError("upstream_protocol_error", `${nameOf(ctx)}: the A2A agent ${agent} answered ${phase === "card" ? "its card request" : "the call"} with an error: ${e.message ?? String(err)}`, {
    retryable: false,
    details: { phase, ...(e.reason ? { a2a_reason: e.reason } : {}), ...(e.name && e.name !== "Error" ? { a2a_error: e.name } : {}) },
  });
}

/** The agent's card as JSON (to compare the skill as the agent wrote it) and as the SDK reads it. */
export interface FetchedCard {
  raw: Record<string, unknown>;
  card: AgentCard;
  resolver: DefaultAgentCardResolver;
}

/** Reads the agent's card through `fetch`. */
export async function fetchCard(config: A2aConfig, ctx: AtomicContext, fetch: typeof globalThis.fetch): Promise<FetchedCard> {
  const resolver = new DefaultAgentCardResolver({ fetchImpl: fetch, legacyCompat: { enabled: true } });
  let raw: unknown;
  try {
    const res = await fetch(config.cardUrl, { headers: { accept: "application/json" }, signal: ctx.signal });
    if (!res.ok) throw new Error(`HTTP ${res.status} for its card`);
    raw = await res.json();
  } catch (err) {
    throw mapFailure(err, "card", ctx, config.cardUrl);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new HandlerError("upstream_protocol_error", `${nameOf(ctx)}: ${config.cardUrl} is not an A2A Agent Card (not a JSON object)`, { retryable: false, details: { phase: "card" } });
  }
  let card: AgentCard;
  try {
    card = resolver.normalizeAgentCard(raw);
  } catch (err) {
    throw mapFailure(err, "card", ctx, config.cardUrl);
  }
  return { raw: raw as Record<string, unknown>, card, resolver };
}

/** Finds the skill on the card and compares it with the node type's pin. */
export function checkSkill(config: A2aConfig, fetched: FetchedCard, ctx: AtomicContext): void {
  const skills = Array.isArray(fetched.raw.skills) ? (fetched.raw.skills as A2aSkill[]) : [];
  const skill = skills.find((s) => s?.id === config.skill);
  if (!skill) {
    throw fail("skill_definition_changed", `${nameOf(ctx)}: the A2A agent at ${config.cardUrl} no longer lists the skill ${config.skill}; import the agent again to review what it offers now`, {
      retryable: false,
      details: { skill: config.skill, expected: config.skillHash ?? null, actual: null },
    });
  }
  if (!config.skillHash) return;
  const actual = skillDefinitionHash(skill);
  if (actual !== config.skillHash) {
    throw fail(
      "skill_definition_changed",
      `${nameOf(ctx)}: the skill ${config.skill} of the A2A agent at ${config.cardUrl} changed since this node type was made from it (its hash is ${actual}, not ${config.skillHash}); ` +
        "it is not called. Import the agent again to publish a new version after reviewing the change",
      { retryable: false, details: { skill: config.skill, expected: config.skillHash, actual } },
    );
  }
}

/** An `@a2a-js/sdk` client for the card, every request through `fetch`. */
export async function clientFor(fetched: FetchedCard, fetch: typeof globalThis.fetch, ctx: AtomicContext, agent: string): Promise<Client> {
  const factory = new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl: fetch, legacyCompat: { enabled: true } }), new RestTransportFactory({ fetchImpl: fetch, legacyCompat: { enabled: true } })],
    cardResolver: fetched.resolver,
    clientConfig: { polling: true },
  });
  try {
    return await factory.createFromAgentCard(fetched.card);
  } catch (err) {
    throw new HandlerError("upstream_protocol_error", `${nameOf(ctx)}: the card of the A2A agent ${agent} offers no interface this client speaks (JSON-RPC or HTTP+JSON): ${(err as Error).message}`, {
      retryable: false,
      details: { phase: "card" },
    });
  }
}
