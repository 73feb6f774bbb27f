/**
 * `fabric keys generate`: a signing key pair for a fabric that mints its own tokens. The private JWK signs service
 * tokens (auth.signing_key_file) and `fabric token mint` tokens; the JWKS beside it verifies them (auth.jwks_file).
 * `--rotate` works while services run: they look at both files again as soon as they change (docs/auth.md, "Rotating
 * keys"), so they sign with the new key at once, and stop accepting the old one within seconds of its removal.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from "jose";
import type { FabricConfig } from "../config.js";
import { EXIT_OK, UsageError, loadClientConfig, reportError } from "./run-cli-context.js";

/** The issuer of the tokens of a fabric that has no issuer of its own configured (`fabric dev --auth`, `fabric token mint`). */
export const DEV_ISSUER = "urn:nodefabric:dev";

/** Algorithms `fabric keys generate` offers; all are in the verifier's default allow-list. */
export const KEY_ALGORITHMS = ["ES256", "RS256", "EdDSA"] as const;
export type KeyAlgorithm = (typeof KEY_ALGORITHMS)[number];

export const SIGNING_KEY_FILE = "signing-key.json";
export const JWKS_FILE = "jwks.json";

export interface GenerateKeysOptions {
  outDir: string;
  /** Default ES256. */
  alg?: KeyAlgorithm;
  /** Replace an existing signing key, keeping the old public keys in the JWKS. */
  rotate?: boolean;
}

export interface GeneratedKeys {
  kid: string;
  alg: KeyAlgorithm;
  signingKeyFile: string;
  jwksFile: string;
  /** The public keys in the JWKS now, the new one included. */
  publicKeys: number;
}

/** Where keys go when no folder is named: `<data_dir>/keys`, relative to the configuration's folder. */
export function defaultKeysDir(config: FabricConfig): string {
  return path.resolve(config.base_dir, config.data_dir, "keys");
}

/** Writes a file by renaming a complete temporary one over it, so a reader never sees half of it. */
function writeFileAtomic(file: string, text: string, mode: number): void {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  try {
    writeFileSync(tmp, text, { mode, flag: "wx" });
    // The mode given at creation is narrowed by the umask, never widened; chmod makes it exact either way.
    chmodSync(tmp, mode);
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

function readJwks(file: string): JWK[] {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const keys = (doc as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) throw new UsageError(`${file} is not a JWKS (an object with a "keys" array)`);
  return keys as JWK[];
}

/** Generates a key pair and writes the private JWK (mode 0600) and the JWKS; a UsageError when keys exist and `rotate` is not set. */
export async function generateKeys(o: GenerateKeysOptions): Promise<GeneratedKeys> {
  const alg = o.alg ?? "ES256";
  if (!(KEY_ALGORITHMS as readonly string[]).includes(alg)) throw new UsageError(`--alg ${alg}: must be one of ${KEY_ALGORITHMS.join(", ")}`);
  const outDir = path.resolve(o.outDir);
  const signingKeyFile = path.join(outDir, SIGNING_KEY_FILE);
  const jwksFile = path.join(outDir, JWKS_FILE);
  let kept: JWK[] = [];
  if (!o.rotate) {
    // Overwriting either file would stop every token already signed from verifying.
    for (const f of [signingKeyFile, jwksFile]) {
      if (existsSync(f)) throw new UsageError(`${f} already exists; --rotate replaces the signing key and keeps the old public keys in ${JWKS_FILE}`);
    }
  } else if (existsSync(jwksFile)) {
    kept = readJwks(jwksFile);
  }

  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const pub = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(pub);
  const publicJwk: JWK = { ...pub, kid, alg, use: "sig" };
  const privateJwk: JWK = { ...(await exportJWK(privateKey)), kid, alg, use: "sig" };

  mkdirSync(outDir, { recursive: true });
  const keys = [...kept.filter((k) => k.kid !== kid), publicJwk];
  // The JWKS first: a service must know the new public key before anything signs with the new private one.
  writeFileAtomic(jwksFile, `${JSON.stringify({ keys }, null, 2)}\n`, 0o644);
  writeFileAtomic(signingKeyFile, `${JSON.stringify(privateJwk, null, 2)}\n`, 0o600);
  return { kid, alg, signingKeyFile, jwksFile, publicKeys: keys.length };
}

/** A path as short as it can be said from the working directory. */
export function displayPath(p: string): string {
  const rel = path.relative(process.cwd(), p);
  return rel && !rel.startsWith("..") && !path.isAbsolute(rel) ? rel : p;
}

export interface KeysGenerateFlags {
  out?: string;
  alg?: KeyAlgorithm;
  rotate?: boolean;
  config?: string;
}

/** `fabric keys generate`: writes the keys and says where; returns the exit code. */
export async function keysGenerateCommand(flags: KeysGenerateFlags): Promise<number> {
  try {
    const outDir = flags.out ?? defaultKeysDir(loadClientConfig(flags.config));
    const k = await generateKeys({ outDir, alg: flags.alg, rotate: flags.rotate });
    const kept = k.publicKeys - 1;
    process.stdout.write(
      `wrote ${displayPath(k.signingKeyFile)} (private ${k.alg} key, mode 0600: keep it secret)\n` +
        `wrote ${displayPath(k.jwksFile)} (${k.publicKeys === 1 ? "1 public key" : `${k.publicKeys} public keys: the new one and ${kept} kept, which verify tokens already signed until you remove them`})\n` +
        `kid: ${k.kid}\n` +
        `configure: auth.signing_key_file = ${displayPath(k.signingKeyFile)}, auth.jwks_file = ${displayPath(k.jwksFile)}\n` +
        (kept > 0
          ? `running services sign with the new key from now on, without a restart; once tokens signed with the old ` +
            `${kept === 1 ? "key have" : "keys have"} expired, remove ${kept === 1 ? "it" : "them"} from ${displayPath(k.jwksFile)}: ` +
            `services refuse ${kept === 1 ? "its" : "their"} tokens within seconds\n`
          : ""),
    );
    return EXIT_OK;
  } catch (err) {
    return reportError(err);
  }
}
