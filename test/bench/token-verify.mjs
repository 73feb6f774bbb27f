/**
 * `npm run bench:auth`: what verifying a bearer token costs a service, per request. The same ES256 token again and
 * again (a client or service reusing its token: served from the verified-token cache) against a new token every
 * time (a full signature check), in the same run. Prints one JSON line and the medians of --rounds (default 5).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { SignJWT, calculateJwkThumbprint, exportJWK, generateKeyPair } from "jose";
import { TokenVerifier } from "../../core/dist/index.js";
import { median } from "./load.mjs";

const { values: args } = parseArgs({ options: { rounds: { type: "string", default: "5" } } });
const ROUNDS = Number(args.rounds);
const REPEATS = 20_000;
const DISTINCT = 2_000;

const { privateKey, publicKey } = await generateKeyPair("ES256");
const pub = await exportJWK(publicKey);
const kid = await calculateJwkThumbprint(pub);
const dir = mkdtempSync(path.join(os.tmpdir(), "nf-verify-"));
const file = path.join(dir, "jwks.json");
writeFileSync(file, JSON.stringify({ keys: [{ ...pub, kid, alg: "ES256", use: "sig" }] }));
const mint = (i) =>
  new SignJWT({ scope: "runs:read runs:write", tenant_id: "bench", i }).setProtectedHeader({ alg: "ES256", kid }).setIssuer("urn:bench").setSubject("bench").setAudience("nodefabric-run-gateway").setExpirationTime("1h").sign(privateKey);

const cached = [];
const full = [];
for (let r = 0; r < ROUNDS; r++) {
  const verifier = new TokenVerifier({ keys: { jwksFile: file }, issuer: "urn:bench" });
  const same = await mint(-1);
  let t = performance.now();
  for (let i = 0; i < REPEATS; i++) await verifier.verify(same, "nodefabric-run-gateway");
  cached.push(((performance.now() - t) * 1000) / REPEATS);
  const tokens = await Promise.all(Array.from({ length: DISTINCT }, (_, i) => mint(r * DISTINCT + i)));
  t = performance.now();
  for (const tok of tokens) await verifier.verify(tok, "nodefabric-run-gateway");
  full.push(((performance.now() - t) * 1000) / DISTINCT);
}
rmSync(dir, { recursive: true, force: true });
const out = {
  scenario: "token-verify",
  rounds: ROUNDS,
  cached_us: +median(cached).toFixed(2),
  full_es256_us: +median(full).toFixed(1),
  ratio: +(median(full) / median(cached)).toFixed(0),
};
process.stdout.write(`${JSON.stringify(out)}\n\n| token verification (median of ${ROUNDS}) | µs per request |\n|---|---|\n| same token again (cached) | ${out.cached_us} |\n| new token (ES256 signature check) | ${out.full_es256_us} |\n\nnode ${process.version}, ${os.cpus().length} cores, ${new Date().toISOString()}\n`);
