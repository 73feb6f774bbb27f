/**
 * The tokens a service presents when it calls another: minted locally with a configured signing key, or obtained
 * with OAuth2 client credentials from a token endpoint. Either way one token per target audience (and, for an
 * executor, per executor it is bound to) is cached and renewed in the background shortly before it expires, so no
 * request ever waits on a token fetch but the first. A signing key file is read again as soon as it changes
 * (`fabric keys generate --rotate`): tokens are then minted with the new key, and those of the old one dropped.
 */
import { randomUUID } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { SignJWT, importJWK, type JWK, type CryptoKey } from "jose";
import { request } from "undici";
import { FabricError } from "../http/errors.js";
import { audienceOf, outboundScopes } from "../http/auth-scopes.js";
import type { ServiceName } from "../service-names.js";
import { EXECUTOR_BINDING_CLAIM, executorBinding, type ServiceTokens } from "../http/outbound-tokens.js";
import { clock } from "../clock.js";
import { trackCache } from "../observe/caches.js";

export type { ServiceTokens } from "../http/outbound-tokens.js";

/** The `headers` option of an HttpClient that sends `tokens`' token for `target` (none without tokens). */
export function bearerHeaders(tokens: ServiceTokens | undefined, target: ServiceName): (() => Promise<Record<string, string>>) | undefined {
  if (!tokens) return undefined;
  return async () => ({ authorization: `Bearer ${await tokens.token(target)}` });
}

interface Issued {
  token: string;
  /** ms since the epoch */
  expiresAt: number;
  /** The signing key's `kid`, for tokens minted locally. */
  kid?: string;
}

interface CacheEntry {
  current?: Issued;
  /** When to start renewing in the background. */
  renewAt: number;
  pending?: Promise<Issued>;
}

/** No token is used in its last few seconds: a request may take that long to arrive. */
const EXPIRY_MARGIN_MS = 5_000;

/** Tokens bound to executors are cached per executor; past this many, the oldest are forgotten. */
const MAX_CACHED = 1_000;

/** Caches one token per target (and executor) and renews it ahead of expiry; subclasses say how a token is obtained. */
abstract class CachedServiceTokens implements ServiceTokens {
  private readonly cache = new Map<string, CacheEntry>();

  constructor() {
    trackCache("auth.service_tokens", this, (t) => ({ entries: t.cache.size }), { max_entries: MAX_CACHED });
  }

  protected abstract issue(target: ServiceName, executor?: string): Promise<Issued>;

  /** The `kid` tokens are signed with now, when they are minted locally: a token of another key is not used. */
  protected currentKid(): string | undefined {
    return undefined;
  }

  /** Whether issued tokens can be bound to an executor (otherwise one token serves every executor of a kind). */
  protected bindsExecutors(): boolean {
    return false;
  }

  token(target: ServiceName, executor?: string): Promise<string> {
    const bound = executor === undefined || !this.bindsExecutors() ? undefined : executorBinding(executor);
    const key = bound === undefined ? target : `${target} ${bound}`;
    const now = clock.now();
    const kid = this.currentKid();
    const e = this.cache.get(key);
    if (e?.current && now < e.current.expiresAt - EXPIRY_MARGIN_MS && (kid === undefined || e.current.kid === kid)) {
      if (now >= e.renewAt && !e.pending) void this.renew(target, bound, e).catch(() => undefined);
      return Promise.resolve(e.current.token);
    }
    let entry = e;
    if (!entry) {
      if (this.cache.size >= MAX_CACHED) this.cache.delete(this.cache.keys().next().value as string);
      entry = { renewAt: 0 };
      this.cache.set(key, entry);
    }
    const fresh = entry;
    return this.renew(target, bound, fresh).then((t) => {
      // Begun before the signing key changed: mint once more with the new one.
      const latest = this.currentKid();
      if (latest === undefined || t.kid === latest) return t.token;
      return this.renew(target, bound, fresh).then((again) => again.token);
    });
  }

  private renew(target: ServiceName, executor: string | undefined, entry: CacheEntry): Promise<Issued> {
    if (entry.pending) return entry.pending;
    const p = this.issue(target, executor).then(
      (issued) => {
        const lifetime = issued.expiresAt - clock.now();
        entry.current = issued;
        // Renew with a fifth of the lifetime left (at most a minute before expiry).
        entry.renewAt = issued.expiresAt - Math.min(60_000, Math.max(0, lifetime / 5));
        entry.pending = undefined;
        return issued;
      },
      (err: unknown) => {
        entry.pending = undefined;
        throw err;
      },
    );
    entry.pending = p;
    return p;
  }
}

export interface SigningKeyOptions {
  /** A private JWK (with `kid` and `alg`), as `fabric keys generate` writes it; or `keyFile`. */
  jwk?: JWK;
  /** Where that JWK is kept: read again whenever the file changes, so a rotated key is used without a restart. */
  keyFile?: SigningKeyFile;
  /** `iss` of the tokens; verifiers expect the same. */
  issuer: string;
  /** The service the tokens speak for: `sub` is `nodefabric-<service>` unless `subject` says otherwise. */
  service: ServiceName;
  subject?: string;
  /** Lifetime of a token, in seconds (default 300). */
  ttlSeconds?: number;
  /** `typ` header (default `at+jwt`, RFC 9068). */
  typ?: string;
}

/** Reads a private JWK file. */
export function readSigningKey(file: string): JWK {
  let jwk: JWK;
  try {
    jwk = JSON.parse(readFileSync(file, "utf8")) as JWK;
  } catch (err) {
    throw new Error(`cannot read the signing key ${file}: ${(err as Error).message}`);
  }
  if (typeof jwk !== "object" || jwk === null || typeof jwk.kty !== "string") throw new Error(`${file} does not hold a JWK`);
  if (jwk.kty === "oct" || jwk.d === undefined) throw new Error(`${file} must hold a private asymmetric key (RSA, EC or OKP)`);
  if (typeof jwk.alg !== "string" || typeof jwk.kid !== "string") throw new Error(`${file}: the key needs an "alg" and a "kid"`);
  return jwk;
}

/** A private key and its imported form. */
interface LoadedKey {
  jwk: JWK;
  key: Promise<CryptoKey | Uint8Array>;
}

function loaded(jwk: JWK): LoadedKey {
  const key = importJWK(jwk, jwk.alg);
  key.catch(() => undefined);
  return { jwk, key };
}

/**
 * A signing key file (a private JWK), read again as soon as it changes: one stat per use, so every token minted after
 * `fabric keys generate --rotate` has replaced the file carries the new key. Shared by the services of a process.
 */
export class SigningKeyFile {
  private current: LoadedKey;
  private stamp: string;

  constructor(readonly file: string) {
    this.stamp = this.stat();
    this.current = loaded(readSigningKey(file));
  }

  private stat(): string {
    const st = statSync(this.file);
    return `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
  }

  /** The key in the file now; while the file cannot be read (being replaced by hand), the last good one. */
  get(): LoadedKey {
    try {
      const stamp = this.stat();
      if (stamp !== this.stamp) {
        const jwk = readSigningKey(this.file);
        this.stamp = stamp;
        if (jwk.kid !== this.current.jwk.kid || jwk.d !== this.current.jwk.d) this.current = loaded(jwk);
      }
    } catch {
      // Keep signing with the last good key; the file is looked at again on the next use.
    }
    return this.current;
  }
}

/**
 * Mints short-lived tokens with a local signing key. A token for an executor call names that executor
 * (EXECUTOR_BINDING_CLAIM), so it is good at that executor alone.
 */
export class SignedServiceTokens extends CachedServiceTokens {
  private readonly fixed?: LoadedKey;

  constructor(private readonly o: SigningKeyOptions) {
    super();
    if (!o.keyFile) {
      if (!o.jwk) throw new Error("SignedServiceTokens needs a jwk or a keyFile");
      this.fixed = loaded(o.jwk);
    }
  }

  private signingKey(): LoadedKey {
    return this.o.keyFile ? this.o.keyFile.get() : this.fixed!;
  }

  protected override currentKid(): string | undefined {
    return this.signingKey().jwk.kid;
  }

  protected override bindsExecutors(): boolean {
    return true;
  }

  protected async issue(target: ServiceName, executor?: string): Promise<Issued> {
    const { jwk, key } = this.signingKey();
    const ttl = this.o.ttlSeconds ?? 300;
    const now = clock.now();
    const claims: Record<string, unknown> = { scope: outboundScopes(this.o.service, target).join(" ") };
    if (executor !== undefined) claims[EXECUTOR_BINDING_CLAIM] = executor;
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: jwk.alg!, kid: jwk.kid, typ: this.o.typ ?? "at+jwt" })
      .setIssuer(this.o.issuer)
      .setSubject(this.o.subject ?? `nodefabric-${this.o.service}`)
      .setAudience(audienceOf(target))
      .setIssuedAt(Math.floor(now / 1000))
      .setExpirationTime(Math.floor(now / 1000) + ttl)
      .setJti(randomUUID())
      .sign(await key);
    return { token, expiresAt: now + ttl * 1000, kid: jwk.kid };
  }
}

export interface ClientCredentialsOptions {
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  /** The service asking: the scopes it asks for are what it needs of each target, unless `scope` is given. */
  service: ServiceName;
  /** A fixed `scope` parameter for every request (default: the scopes the service needs of the target). */
  scope?: string;
  /** The form parameter naming the target's audience: `audience` (default), `resource` (RFC 8707), or none. */
  audienceParameter?: "audience" | "resource" | "none";
  /** How the client authenticates: HTTP Basic (default) or form fields. */
  clientAuth?: "basic" | "post";
  timeoutMs?: number;
}

/**
 * Obtains tokens with the OAuth2 client credentials grant (RFC 6749 §4.4). The identity provider writes the claims,
 * so a token for an executor is not bound to one (docs/auth.md, "Executor binding").
 */
export class ClientCredentialsServiceTokens extends CachedServiceTokens {
  constructor(private readonly o: ClientCredentialsOptions) {
    super();
  }

  protected async issue(target: ServiceName): Promise<Issued> {
    const form = new URLSearchParams({ grant_type: "client_credentials" });
    form.set("scope", this.o.scope ?? outboundScopes(this.o.service, target).join(" "));
    const param = this.o.audienceParameter ?? "audience";
    if (param !== "none") form.set(param, audienceOf(target));
    const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded", accept: "application/json" };
    if ((this.o.clientAuth ?? "basic") === "basic") {
      const enc = (s: string) => encodeURIComponent(s);
      headers.authorization = `Basic ${Buffer.from(`${enc(this.o.clientId)}:${enc(this.o.clientSecret)}`).toString("base64")}`;
    } else {
      form.set("client_id", this.o.clientId);
      form.set("client_secret", this.o.clientSecret);
    }
    const started = clock.now();
    let status: number;
    let body: { access_token?: unknown; expires_in?: unknown; error?: unknown; error_description?: unknown } | null;
    try {
      const res = await request(this.o.tokenUrl, {
        method: "POST",
        headers,
        body: form.toString(),
        headersTimeout: this.o.timeoutMs ?? 10_000,
        bodyTimeout: this.o.timeoutMs ?? 10_000,
      });
      status = res.statusCode;
      body = (await res.body.json().catch(() => null)) as typeof body;
    } catch (err) {
      throw new FabricError("upstream_unavailable", `the token endpoint ${this.o.tokenUrl} cannot be reached: ${(err as Error).message}`, { retryable: true });
    }
    if (status !== 200 || !body || typeof body.access_token !== "string") {
      const why = body && typeof body.error === "string" ? `${body.error}${typeof body.error_description === "string" ? `: ${body.error_description}` : ""}` : `status ${status}`;
      throw new FabricError("upstream_unavailable", `the token endpoint ${this.o.tokenUrl} refused a token for ${audienceOf(target)} (${why})`, { retryable: status >= 500 });
    }
    const expiresIn = typeof body.expires_in === "number" && body.expires_in > 0 ? body.expires_in : 300;
    return { token: body.access_token, expiresAt: started + expiresIn * 1000 };
  }
}
