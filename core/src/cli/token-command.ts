/**
 * `fabric token mint`: a client token signed with this fabric's own signing key, for `curl`, `fabric run` and tests.
 * Only the token goes to stdout, so `export FABRIC_TOKEN=$(npx fabric token mint …)` works. Scopes meant for the
 * fabric's own services (SERVICE_ONLY_SCOPES) are minted only with `--allow-service-scopes`.
 */
import { randomUUID } from "node:crypto";
import path from "node:path";
import { SignJWT, importJWK } from "jose";
import { SERVICE_NAMES } from "../service-names.js";
import { SCOPES, SERVICE_ONLY_SCOPES, audienceOf } from "../http/auth-scopes.js";
import { readSigningKey } from "../clients/service-tokens.js";
import { clock } from "../clock.js";
import { DEV_ISSUER, SIGNING_KEY_FILE, defaultKeysDir } from "./keys-command.js";
import { EXIT_OK, UsageError, loadClientConfig, reportError } from "./run-cli-context.js";

/** Tokens live no longer than a day: a leaked one should not outlast a working day. */
export const MAX_TOKEN_TTL_S = 24 * 3600;
const DEFAULT_TOKEN_TTL_S = 3600;

export interface TokenMintFlags {
  aud: string[];
  scope: string[];
  tenant?: string;
  sub?: string;
  ttl?: string;
  key?: string;
  issuer?: string;
  config?: string;
  /** Mint scopes meant for the fabric's own services (identity:delegate, executors:register). */
  allowServiceScopes?: boolean;
}

/** The audience for `--aud`: a service name or a full `nodefabric-<service>` audience. */
export function audienceFor(value: string): string {
  for (const s of SERVICE_NAMES) if (value === s || value === audienceOf(s)) return audienceOf(s);
  throw new UsageError(`--aud ${value}: not a service of this fabric; use one of ${SERVICE_NAMES.join(", ")} (or ${SERVICE_NAMES.map(audienceOf).join(", ")})`);
}

/** Seconds from `--ttl`: `3600`, `90s`, `15m`, `1h`; at most MAX_TOKEN_TTL_S. */
export function parseTtl(value: string): number {
  const m = /^(\d+)([smh]?)$/.exec(value.trim());
  if (!m) throw new UsageError(`--ttl ${value}: expected seconds or a number with s, m or h (3600, 15m, 1h)`);
  const seconds = Number(m[1]) * (m[2] === "h" ? 3600 : m[2] === "m" ? 60 : 1);
  if (seconds < 1 || seconds > MAX_TOKEN_TTL_S) throw new UsageError(`--ttl ${value}: must be between 1 second and 24h`);
  return seconds;
}

/**
 * The scopes of `--scope` (space-separated, repeatable), each one the fabric knows; a scope for services only
 * (SERVICE_ONLY_SCOPES) only with `allowServiceScopes`.
 */
export function parseScopes(values: string[], allowServiceScopes = false): string[] {
  const scopes = [...new Set(values.flatMap((v) => v.split(/\s+/)).filter(Boolean))];
  if (scopes.length === 0) throw new UsageError(`--scope names no scope; use some of ${SCOPES.join(", ")}`);
  for (const s of scopes) {
    if (!(SCOPES as readonly string[]).includes(s)) throw new UsageError(`--scope: unknown scope "${s}"; the scopes are ${SCOPES.join(", ")}`);
  }
  const service = scopes.filter((s) => SERVICE_ONLY_SCOPES.has(s as never));
  if (service.length > 0 && !allowServiceScopes) {
    throw new UsageError(
      `--scope: ${service.join(", ")} ${service.length === 1 ? "is a scope" : "are scopes"} for the fabric's own services, not for clients ` +
        `(identity:delegate acts for any caller, executors:register receives other tenants' inputs); ` +
        `add --allow-service-scopes to mint it anyway, for a service identity of your own`,
    );
  }
  return scopes;
}

/** Signs a token from the flags and the configuration; usage mistakes are UsageErrors. */
export async function mintToken(flags: TokenMintFlags): Promise<string> {
  if (flags.aud.length === 0) throw new UsageError(`--aud is required: the service the token is for (${SERVICE_NAMES.join(", ")})`);
  const audiences = [...new Set(flags.aud.map(audienceFor))];
  const scopes = parseScopes(flags.scope, flags.allowServiceScopes === true);
  const ttl = flags.ttl === undefined ? DEFAULT_TOKEN_TTL_S : parseTtl(flags.ttl);
  if (flags.tenant !== undefined && flags.tenant === "") throw new UsageError("--tenant must not be empty");
  if (flags.sub !== undefined && flags.sub === "") throw new UsageError("--sub must not be empty");

  const config = loadClientConfig(flags.config);
  const keyFile = flags.key
    ? path.resolve(flags.key)
    : config.auth.signing_key_file
      ? path.resolve(config.base_dir, config.auth.signing_key_file)
      : path.join(defaultKeysDir(config), SIGNING_KEY_FILE);
  let jwk;
  try {
    jwk = readSigningKey(keyFile);
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n  (create a key with: fabric keys generate, or name one with --key <file>)`);
  }

  let key;
  try {
    key = await importJWK(jwk, jwk.alg);
  } catch (err) {
    throw new UsageError(`cannot sign with ${keyFile}: ${(err as Error).message}`);
  }
  const now = Math.floor(clock.now() / 1000);
  const claims: Record<string, unknown> = { scope: scopes.join(" ") };
  if (flags.tenant !== undefined) claims.tenant_id = flags.tenant;
  return new SignJWT(claims)
    .setProtectedHeader({ alg: jwk.alg!, kid: jwk.kid, typ: config.auth.typ ?? "at+jwt" })
    .setIssuer(flags.issuer ?? config.auth.issuer ?? DEV_ISSUER)
    .setSubject(flags.sub ?? "fabric-cli")
    .setAudience(audiences.length === 1 ? audiences[0] : audiences)
    .setIssuedAt(now)
    .setExpirationTime(now + ttl)
    .setJti(randomUUID())
    .sign(key);
}

/** `fabric token mint`: prints the token alone; returns the exit code. */
export async function tokenMintCommand(flags: TokenMintFlags): Promise<number> {
  try {
    process.stdout.write(`${await mintToken(flags)}\n`);
    return EXIT_OK;
  } catch (err) {
    return reportError(err);
  }
}
