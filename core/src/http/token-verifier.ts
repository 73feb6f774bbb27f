/**
 * Verifies bearer JWTs with jose against a JWKS (a URL, OIDC discovery, or a local file): an explicit allow-list of
 * algorithms, `iss`, the service's `aud`, `exp` (required) and `nbf` with a clock tolerance, and `typ` when asked.
 * Every refusal is a 401 `unauthenticated` whose message says exactly what was wrong; keys that cannot be fetched
 * are a 503, because the caller did nothing wrong. The claims this fabric reads (`sub`, `tenant_id`, `scope`, `scp`,
 * `executor_endpoint`) fail closed: one that is present with the wrong type is a 401, never read as absent.
 */
import { readFileSync, statSync } from "node:fs";
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  errors as joseErrors,
  jwksCache,
  jwtVerify,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyGetKey,
} from "jose";
import { request } from "undici";
import { FabricError } from "./errors.js";
import { EXECUTOR_BINDING_CLAIM } from "./outbound-tokens.js";
import { clock } from "../clock.js";
import { trackCache } from "../observe/caches.js";

/** Algorithms accepted when none are configured: asymmetric only, so a public key can never serve as a secret. */
export const DEFAULT_ALGORITHMS = ["RS256", "PS256", "ES256", "EdDSA"] as const;

/** Where the verification keys come from. */
export type KeySource = { jwksUrl: string } | { jwksFile: string } | { oidcDiscoveryUrl: string };

export interface TokenVerifierOptions {
  keys: KeySource;
  /** The `iss` every token must carry; with OIDC discovery it defaults to the discovered issuer. */
  issuer?: string;
  /** Allowed `alg` values (default DEFAULT_ALGORITHMS). `none` and HS* are refused: a JWKS holds public keys. */
  algorithms?: readonly string[];
  /** Leeway for `exp` and `nbf`, in seconds (default 60). */
  clockToleranceSeconds?: number;
  /** The `typ` header every token must carry (e.g. `at+jwt`); unchecked when absent. */
  typ?: string;
  /** How long fetched keys are used before they are fetched again, in ms (default 10 min). */
  cacheMaxAgeMs?: number;
  /** After a fetch, how long an unknown `kid` does not cause another one, in ms (default 30 s). */
  cooldownMs?: number;
  /** Time allowed for fetching keys or the discovery document, in ms (default 5 s). */
  timeoutMs?: number;
  /** How often a JWKS file is looked at for changes, in ms (default 1 s): a key removed from it stops working by then. */
  fileCheckIntervalMs?: number;
}

/** What a verified token says about its bearer. */
export interface VerifiedToken {
  iss: string;
  sub?: string;
  tenant_id?: string;
  scopes: ReadonlySet<string>;
  /** The executor the token is bound to (EXECUTOR_BINDING_CLAIM), when it is. */
  executor_endpoint?: string;
  /** Expiry, in ms since the epoch. */
  expiresAt: number;
  claims: JWTPayload;
}

/** A 401 with the RFC 6750 challenge that says why. */
export function unauthenticated(description: string, realm: string): FabricError {
  const safe = description.replace(/["\\]/g, "'");
  return new FabricError("unauthenticated", description, {
    headers: { "www-authenticate": `Bearer realm="${realm}", error="invalid_token", error_description="${safe}"` },
  });
}

/** The keys could not be obtained: not the caller's fault, so 503 and not 401. */
class KeysUnavailable extends Error {}

function keysUnavailable(err: unknown): never {
  if (err instanceof KeysUnavailable) throw err;
  throw new KeysUnavailable(`the signing keys could not be fetched: ${(err as Error).message}`, { cause: err });
}

/** Where verification keys come from, and a number that changes whenever they do. */
interface KeySet {
  getKey: JWTVerifyGetKey;
  /** Changes when the keys change; a token verified under another generation is verified again. */
  generation(): number;
}

/**
 * A JWKS file, looked at again (one stat) at most every `checkIntervalMs` and at once for an unknown `kid`, and read
 * again when it changed: a new key is picked up at once, a removed one stops working within the interval.
 */
function fileKeySet(file: string, checkIntervalMs: number): KeySet {
  let local: JWTVerifyGetKey;
  let stamp = "";
  let text = "";
  let generation = 0;
  let checkedAt = 0;
  const load = (initial: boolean) => {
    checkedAt = clock.now();
    try {
      const st = statSync(file);
      const now = `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
      if (now === stamp) return;
      const read = readFileSync(file, "utf8");
      stamp = now;
      if (read === text) return;
      const jwks = JSON.parse(read) as JSONWebKeySet;
      local = createLocalJWKSet(jwks);
      text = read;
      generation++;
    } catch (err) {
      // At start a bad file stops the service; later (a file being replaced by hand), the keys already loaded stay
      // in use, and the file is read again at the next look.
      stamp = "";
      if (initial) throw new Error(`cannot use the JWKS file ${file}: ${(err as Error).message}`);
    }
  };
  const fresh = () => {
    if (clock.now() - checkedAt >= checkIntervalMs) load(false);
  };
  load(true);
  return {
    getKey: async (header, token) => {
      fresh();
      try {
        return await local(header, token);
      } catch (err) {
        if (err instanceof joseErrors.JWKSNoMatchingKey) {
          const before = generation;
          load(false);
          if (generation !== before) return local(header, token);
        }
        throw err;
      }
    },
    generation: () => {
      fresh();
      return generation;
    },
  };
}

function remoteKeySet(url: string, o: Required<Pick<TokenVerifierOptions, "cacheMaxAgeMs" | "cooldownMs" | "timeoutMs">>): KeySet {
  // Built once: jose caches the set, refetches after cacheMaxAge, and on an unknown kid once the cooldown has passed.
  // It records each successful fetch in `cache.uat`, which serves as the generation.
  const cache: { uat?: number } = {};
  const remote = createRemoteJWKSet(new URL(url), { cacheMaxAge: o.cacheMaxAgeMs, cooldownDuration: o.cooldownMs, timeoutDuration: o.timeoutMs, [jwksCache]: cache as Record<string, never> });
  return {
    getKey: async (header, token) => {
      try {
        return await remote(header, token);
      } catch (err) {
        if (err instanceof joseErrors.JWKSNoMatchingKey || err instanceof joseErrors.JWKSMultipleMatchingKeys) throw err;
        if (err instanceof joseErrors.JOSENotSupported) throw err;
        return keysUnavailable(err);
      }
    },
    generation: () => cache.uat ?? 0,
  };
}

interface Discovered {
  issuer: string;
  keys: KeySet;
}

/** Verifies tokens for any of the services of this process; each call names the audience it needs. */
/** Verified tokens remembered at most (the oldest forgotten first). */
const MAX_VERIFIED = 10_000;

export class TokenVerifier {
  private readonly algorithms: string[];
  private readonly toleranceS: number;
  private readonly cacheMaxAgeMs: number;
  private readonly cooldownMs: number;
  private readonly timeoutMs: number;
  private keys?: KeySet;
  private issuer?: string;
  private discovery?: Promise<Discovered>;
  private discoveryFailedAt = 0;
  /**
   * Tokens already verified, until they expire, a minute has passed, or the keys change (the generation of the key
   * set they were verified under), whichever is first: a key removed from the JWKS takes its tokens along.
   */
  private readonly verified = new Map<string, { token: VerifiedToken; until: number; keys: KeySet; generation: number }>();

  constructor(private readonly o: TokenVerifierOptions) {
    trackCache("auth.verified_tokens", this, (v) => ({ entries: v.verified.size }), { max_entries: MAX_VERIFIED });
    this.algorithms = [...(o.algorithms ?? DEFAULT_ALGORITHMS)];
    const weak = this.algorithms.filter((a) => a === "none" || /^HS/i.test(a));
    if (weak.length > 0) throw new Error(`auth.algorithms: ${weak.join(", ")} cannot be verified with a JWKS of public keys; use RS*, PS*, ES* or EdDSA`);
    if (this.algorithms.length === 0) throw new Error("auth.algorithms must name at least one algorithm");
    this.toleranceS = o.clockToleranceSeconds ?? 60;
    this.cacheMaxAgeMs = o.cacheMaxAgeMs ?? 600_000;
    this.cooldownMs = o.cooldownMs ?? 30_000;
    this.timeoutMs = o.timeoutMs ?? 5_000;
    this.issuer = o.issuer;
    const opts = { cacheMaxAgeMs: this.cacheMaxAgeMs, cooldownMs: this.cooldownMs, timeoutMs: this.timeoutMs };
    if ("jwksUrl" in o.keys) this.keys = remoteKeySet(o.keys.jwksUrl, opts);
    else if ("jwksFile" in o.keys) this.keys = fileKeySet(o.keys.jwksFile, o.fileCheckIntervalMs ?? 1_000);
    if (!("oidcDiscoveryUrl" in o.keys) && !this.issuer) throw new Error("auth.issuer is required to verify tokens (only OIDC discovery can find it)");
  }

  /** Where keys come from, for health checks and messages. */
  describeKeys(): string {
    const k = this.o.keys;
    return "jwksUrl" in k ? k.jwksUrl : "jwksFile" in k ? k.jwksFile : k.oidcDiscoveryUrl;
  }

  /** Fetches the OIDC discovery document once (again after a failure, once the cooldown has passed). */
  private discover(url: string): Promise<Discovered> {
    if (this.discovery) return this.discovery;
    if (clock.now() - this.discoveryFailedAt < Math.min(this.cooldownMs, 5_000)) {
      return Promise.reject(new KeysUnavailable(`OIDC discovery at ${url} failed moments ago`));
    }
    const doc = url.includes("/.well-known/") ? url : `${url.replace(/\/+$/, "")}/.well-known/openid-configuration`;
    this.discovery = (async () => {
      const res = await request(doc, { headersTimeout: this.timeoutMs, bodyTimeout: this.timeoutMs, headers: { accept: "application/json" } });
      const body = (await res.body.json().catch(() => null)) as { issuer?: unknown; jwks_uri?: unknown } | null;
      if (res.statusCode !== 200 || !body || typeof body.jwks_uri !== "string" || typeof body.issuer !== "string") {
        throw new Error(`${doc} answered ${res.statusCode} without an issuer and a jwks_uri`);
      }
      if (this.o.issuer && body.issuer !== this.o.issuer) throw new Error(`${doc} names the issuer ${body.issuer}, not the configured ${this.o.issuer}`);
      return { issuer: body.issuer, keys: remoteKeySet(body.jwks_uri, { cacheMaxAgeMs: this.cacheMaxAgeMs, cooldownMs: this.cooldownMs, timeoutMs: this.timeoutMs }) };
    })();
    this.discovery.catch(() => {
      this.discovery = undefined;
      this.discoveryFailedAt = clock.now();
    });
    return this.discovery;
  }

  /** Verifies `token` for `audience`; throws a FabricError (401 unauthenticated, or 503 unavailable). */
  async verify(token: string, audience: string): Promise<VerifiedToken> {
    const cacheKey = `${audience} ${token}`;
    const now = clock.now();
    const hit = this.verified.get(cacheKey);
    if (hit) {
      if (now < hit.until && hit.keys.generation() === hit.generation) return hit.token;
      this.verified.delete(cacheKey);
    }
    let keys = this.keys;
    let issuer = this.issuer;
    try {
      if (!keys) {
        const d = await this.discover((this.o.keys as { oidcDiscoveryUrl: string }).oidcDiscoveryUrl);
        keys = d.keys;
        issuer = this.o.issuer ?? d.issuer;
      }
      const generation = keys.generation();
      const { payload } = await jwtVerify(token, keys.getKey, {
        algorithms: this.algorithms,
        issuer,
        audience,
        clockTolerance: this.toleranceS,
        requiredClaims: ["exp"],
        typ: this.o.typ,
        currentDate: new Date(now),
      });
      const verified = toVerified(payload, audience);
      // Cached no longer than the keys are: a key removed from the JWKS stops working as soon as it would anyway.
      const until = Math.min(verified.expiresAt + this.toleranceS * 1000, now + Math.min(this.cacheMaxAgeMs, 60_000));
      if (this.verified.size >= MAX_VERIFIED) this.verified.delete(this.verified.keys().next().value as string);
      // Remembered under the generation the keys had before the check: had they changed during it, it is checked again.
      this.verified.set(cacheKey, { token: verified, until, keys, generation });
      return verified;
    } catch (err) {
      throw refusal(err, audience, issuer);
    }
  }
}

/** A claim that is present but cannot be read: the token is refused, never read as if the claim were absent. */
function badClaim(claim: string, expected: string, realm: string): FabricError {
  return unauthenticated(`the token's ${claim} claim must be ${expected} when present`, realm);
}

/** A claim that, when present, must be a non-empty string. */
function optionalString(payload: JWTPayload, claim: string, realm: string): string | undefined {
  if (!Object.prototype.hasOwnProperty.call(payload, claim)) return undefined;
  const v = payload[claim];
  if (typeof v !== "string" || v === "") throw badClaim(claim, "a non-empty string", realm);
  return v;
}

/** `scope` is a space-separated string (RFC 8693); `scp` a string or an array of strings. Anything else is refused. */
function scopesOf(payload: JWTPayload, realm: string): Set<string> {
  const out = new Set<string>();
  const add = (claim: "scope" | "scp", allowArray: boolean) => {
    if (!Object.prototype.hasOwnProperty.call(payload, claim)) return;
    const v = payload[claim];
    if (typeof v === "string") {
      for (const s of v.split(" ")) if (s !== "") out.add(s);
      return;
    }
    if (allowArray && Array.isArray(v) && v.every((s) => typeof s === "string")) {
      for (const s of v as string[]) for (const part of s.split(" ")) if (part !== "") out.add(part);
      return;
    }
    throw badClaim(claim, allowArray ? "a space-separated string or an array of strings" : "a space-separated string", realm);
  };
  // Some providers send `scope` as an array as well; it is read like `scp`.
  add("scope", true);
  add("scp", true);
  return out;
}

function toVerified(payload: JWTPayload, realm: string): VerifiedToken {
  const v: VerifiedToken = { iss: payload.iss!, scopes: scopesOf(payload, realm), expiresAt: payload.exp! * 1000, claims: payload };
  const sub = optionalString(payload, "sub", realm);
  if (sub !== undefined) v.sub = sub;
  // A tenant that cannot be read must not become "no tenant", which sees every tenant's runs.
  const tenant = optionalString(payload, "tenant_id", realm);
  if (tenant !== undefined) v.tenant_id = tenant;
  const executor = optionalString(payload, EXECUTOR_BINDING_CLAIM, realm);
  if (executor !== undefined) v.executor_endpoint = executor;
  return v;
}

/** Says, in the caller's terms, why a token was refused. */
function refusal(err: unknown, audience: string, issuer: string | undefined): FabricError {
  // The realm is the service's audience, so a client with several services can tell which one refused.
  const deny = (description: string) => unauthenticated(description, audience);
  if (FabricError.is(err)) return err;
  if (err instanceof KeysUnavailable) {
    return new FabricError("unavailable", err.message, { headers: { "retry-after": "5" }, retryable: true });
  }
  if (err instanceof joseErrors.JWTExpired) return deny("the token has expired");
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    switch (err.claim) {
      case "nbf":
        return deny("the token is not valid yet (nbf is in the future)");
      case "iat":
        return deny("the token was issued in the future (iat)");
      case "iss":
        return deny(`the token was not issued by ${issuer}`);
      case "aud":
        return deny(`the token is not meant for this service (its audience is not ${audience})`);
      case "exp":
        return deny("the token has no expiry (exp)");
      case "typ":
        return deny(`the token's typ header is not the one this service requires`);
      default:
        return deny(`the token's ${err.claim} claim is not valid: ${err.reason}`);
    }
  }
  if (err instanceof joseErrors.JOSEAlgNotAllowed || err instanceof joseErrors.JOSENotSupported) {
    return deny("the token is signed with an algorithm this service does not accept");
  }
  if (err instanceof joseErrors.JWKSNoMatchingKey) return deny("no key in the JWKS matches the token's kid");
  if (err instanceof joseErrors.JWKSMultipleMatchingKeys) return deny("several keys in the JWKS match the token; it needs a kid");
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return deny("the token's signature does not verify");
  if (err instanceof joseErrors.JWSInvalid || err instanceof joseErrors.JWTInvalid || err instanceof joseErrors.JOSEError) {
    return deny("the token is malformed");
  }
  if (err instanceof TypeError || err instanceof SyntaxError) return deny("the token is malformed");
  return new FabricError("unavailable", `tokens cannot be verified right now: ${(err as Error).message}`, { headers: { "retry-after": "5" }, retryable: true });
}
