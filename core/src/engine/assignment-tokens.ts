/**
 * `assignment_token`: a short-lived bearer token the coordinator mints for one composite NodeRun, so its executor
 * can act for exactly that NodeRun (create and read its children, evaluate them, complete it), and for an atomic
 * NodeRun whose handler reports progress or saves a checkpoint (minted only then, `minter`). Only the coordinator
 * mints and checks them, so they are HS256 with a secret of its own; their `typ` tells them apart from the tokens
 * verified against the JWKS, whose algorithm allow-list never includes HS256.
 */
import { createHmac, randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { decodeProtectedHeader, errors as joseErrors, jwtVerify } from "jose";
import type { AssignmentBinding, AssignmentVerifier } from "../http/auth-plugin.js";
import { unauthenticated } from "../http/token-verifier.js";
import { clock } from "../clock.js";

export const ASSIGNMENT_AUDIENCE = "nodefabric-run-coordinator";
export const ASSIGNMENT_TYP = "nodefabric-assignment+jwt";
/** Default lifetime; the coordinator sends a fresh token to a composite that lives longer (see RunEngine). */
export const DEFAULT_ASSIGNMENT_TTL_SECONDS = 900;

export type AssignmentClaims = AssignmentBinding;

/** Reads the coordinator's assignment secret from `file`, creating it (32 random bytes, mode 0600) when missing. */
export function loadOrCreateAssignmentSecret(file: string): Uint8Array {
  try {
    return Buffer.from(readFileSync(file, "utf8").trim(), "base64url");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  mkdirSync(path.dirname(file), { recursive: true });
  const secret = randomBytes(32);
  try {
    writeFileSync(file, secret.toString("base64url") + "\n", { mode: 0o600, flag: "wx" });
  } catch (err) {
    // Another coordinator on the same data directory wrote it first.
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return Buffer.from(readFileSync(file, "utf8").trim(), "base64url");
    throw err;
  }
  chmodSync(file, 0o600);
  return secret;
}

function checkedKey(key: Uint8Array): Uint8Array {
  if (key.length < 32) throw new Error("an assignment secret needs at least 32 bytes");
  return key;
}

/** Mints and checks assignment tokens with one secret. */
export class AssignmentTokens implements AssignmentVerifier {
  private key: Uint8Array | undefined;
  private readonly load: (() => Promise<Uint8Array>) | undefined;
  private loading: Promise<Uint8Array> | undefined;

  /**
   * `secret` may be a function that reads it (from a database that may be down when the coordinator starts): it is
   * read at the first mint or check, and read again at the next one when that failed.
   */
  constructor(
    secret?: Uint8Array | (() => Promise<Uint8Array>),
    readonly ttlSeconds = DEFAULT_ASSIGNMENT_TTL_SECONDS,
  ) {
    if (typeof secret === "function") this.load = secret;
    else this.key = checkedKey(secret ?? randomBytes(32));
  }

  /** The key, or the promise of it while it is being read. */
  private keyNow(): Uint8Array | Promise<Uint8Array> {
    if (this.key) return this.key;
    this.loading ??= this.load!().then(
      (k) => (this.key = checkedKey(k)),
      (err: unknown) => {
        this.loading = undefined;
        throw err;
      },
    );
    return this.loading;
  }

  /** A token bound to (run_id, node_run_id), issued at `issuedAtMs` (default: now). */
  mint(claims: AssignmentClaims, issuedAtMs = clock.now()): Promise<string> {
    const key = this.keyNow();
    return key instanceof Uint8Array ? Promise.resolve(this.sign(claims, key, issuedAtMs)) : key.then((k) => this.sign(claims, k, issuedAtMs));
  }

  /**
   * The token of `claims` as it would be minted now, signed only when first asked for and then kept: the same `iat`
   * and `exp` whenever that is, so a token minted late lives no longer than one minted at once. A mint that failed
   * (the secret could not be read) is tried again at the next ask.
   */
  minter(claims: AssignmentClaims): () => Promise<string> {
    const issuedAtMs = clock.now();
    let minted: Promise<string> | undefined;
    return () =>
      (minted ??= this.mint(claims, issuedAtMs).catch((err: unknown) => {
        minted = undefined;
        throw err;
      }));
  }

  private sign(claims: AssignmentClaims, key: Uint8Array, issuedAtMs: number): string {
    const now = Math.floor(issuedAtMs / 1000);
    // The same compact HS256 JWT jose's SignJWT makes, signed synchronously with node:crypto, where jose's async
    // WebCrypto signing cost about 57 µs each.
    const payload = {
      run_id: claims.run_id,
      node_run_id: claims.node_run_id,
      iss: ASSIGNMENT_AUDIENCE,
      aud: ASSIGNMENT_AUDIENCE,
      sub: `node-run:${claims.node_run_id}`,
      iat: now,
      exp: now + this.ttlSeconds,
    };
    const signingInput = `${this.header}.${Buffer.from(JSON.stringify(payload)).toString("base64url")}`;
    return `${signingInput}.${createHmac("sha256", key).update(signingInput).digest("base64url")}`;
  }

  private readonly header = Buffer.from(JSON.stringify({ alg: "HS256", typ: ASSIGNMENT_TYP })).toString("base64url");

  recognizes(token: string): boolean {
    try {
      return decodeProtectedHeader(token).typ === ASSIGNMENT_TYP;
    } catch {
      return false;
    }
  }

  /** The binding of a valid token; a 401 FabricError otherwise. */
  async verify(token: string): Promise<AssignmentClaims> {
    let payload;
    try {
      ({ payload } = await jwtVerify(token, await this.keyNow(), {
        algorithms: ["HS256"],
        audience: ASSIGNMENT_AUDIENCE,
        issuer: ASSIGNMENT_AUDIENCE,
        typ: ASSIGNMENT_TYP,
        requiredClaims: ["exp"],
        currentDate: new Date(clock.now()),
      }));
    } catch (err) {
      if (err instanceof joseErrors.JWTExpired) throw unauthenticated("the assignment token has expired", ASSIGNMENT_AUDIENCE);
      throw unauthenticated("the assignment token is not one this coordinator issued", ASSIGNMENT_AUDIENCE);
    }
    if (typeof payload.run_id !== "string" || typeof payload.node_run_id !== "string") {
      throw unauthenticated("the assignment token names no NodeRun", ASSIGNMENT_AUDIENCE);
    }
    return { run_id: payload.run_id, node_run_id: payload.node_run_id };
  }
}
