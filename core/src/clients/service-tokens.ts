/**
 * The tokens a service presents when it calls another: minted locally with a configured signing key, or obtained
 * with OAuth2 client credentials from a token endpoint. Either way one token per target audience is cached and
 * renewed in the background shortly before it expires, so no request ever waits on a token fetch but the first.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { SignJWT, importJWK, type JWK, type CryptoKey } from "jose";
import { request } from "undici";
import { FabricError } from "../http/errors.js";
import { audienceOf, outboundScopes } from "../http/auth-scopes.js";
import type { ServiceName } from "../http/service.js";
import { clock } from "../clock.js";

/** Bearer tokens for one service's calls to the others. */
export interface ServiceTokens {
  /** A token for calls to `target`. */
  token(target: ServiceName): Promise<string>;
}

/** The `headers` option of an HttpClient that sends `tokens`' token for `target` (none without tokens). */
export function bearerHeaders(tokens: ServiceTokens | undefined, target: ServiceName): (() => Promise<Record<string, string>>) | undefined {
  if (!tokens) return undefined;
  return async () => ({ authorization: `Bearer ${await tokens.token(target)}` });
}

interface Issued {
  token: string;
  /** ms since the epoch */
  expiresAt: number;
}

interface CacheEntry {
  current?: Issued;
  /** When to start renewing in the background. */
  renewAt: number;
  pending?: Promise<Issued>;
}

/** No token is used in its last few seconds: a request may take that long to arrive. */
const EXPIRY_MARGIN_MS = 5_000;

/** Caches one token per target and renews it ahead of expiry; subclasses say how a token is obtained. */
abstract class CachedServiceTokens implements ServiceTokens {
  private readonly cache = new Map<ServiceName, CacheEntry>();

  protected abstract issue(target: ServiceName): Promise<Issued>;

  token(target: ServiceName): Promise<string> {
    const now = clock.now();
    const e = this.cache.get(target);
    if (e?.current && now < e.current.expiresAt - EXPIRY_MARGIN_MS) {
      if (now >= e.renewAt && !e.pending) void this.renew(target, e).catch(() => undefined);
      return Promise.resolve(e.current.token);
    }
    const entry = e ?? { renewAt: 0 };
    this.cache.set(target, entry);
    return this.renew(target, entry).then((t) => t.token);
  }

  private renew(target: ServiceName, entry: CacheEntry): Promise<Issued> {
    if (entry.pending) return entry.pending;
    const p = this.issue(target).then(
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
  /** A private JWK (with `kid` and `alg`), as `fabric keys generate` writes it. */
  jwk: JWK;
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

/** Mints short-lived tokens with a local signing key. */
export class SignedServiceTokens extends CachedServiceTokens {
  private key?: Promise<CryptoKey | Uint8Array>;

  constructor(private readonly o: SigningKeyOptions) {
    super();
  }

  protected async issue(target: ServiceName): Promise<Issued> {
    const { jwk } = this.o;
    this.key ??= importJWK(jwk, jwk.alg);
    const ttl = this.o.ttlSeconds ?? 300;
    const now = clock.now();
    const token = await new SignJWT({ scope: outboundScopes(this.o.service, target).join(" ") })
      .setProtectedHeader({ alg: jwk.alg!, kid: jwk.kid, typ: this.o.typ ?? "at+jwt" })
      .setIssuer(this.o.issuer)
      .setSubject(this.o.subject ?? `nodefabric-${this.o.service}`)
      .setAudience(audienceOf(target))
      .setIssuedAt(Math.floor(now / 1000))
      .setExpirationTime(Math.floor(now / 1000) + ttl)
      .setJti(randomUUID())
      .sign(await this.key);
    return { token, expiresAt: now + ttl * 1000 };
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

/** Obtains tokens with the OAuth2 client credentials grant (RFC 6749 §4.4). */
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
