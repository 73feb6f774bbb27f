/**
 * A small identity provider for tests, over real loopback HTTP with real keys: a JWKS whose keys can be rotated,
 * an OIDC discovery document, an OAuth2 client-credentials token endpoint, and a minting function for any claims
 * (including the broken ones attacks are made of).
 */
import { createServer, type Server } from "node:http";
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { SignJWT, calculateJwkThumbprint, exportJWK, exportSPKI, generateKeyPair, type CryptoKey, type JWK } from "jose";

export interface TestKey {
  kid: string;
  alg: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
  privateJwk: JWK;
  publicPem: string;
}

/** A fresh key pair with its kid (the JWK thumbprint). */
export async function makeKey(alg: "ES256" | "RS256" | "EdDSA" = "ES256"): Promise<TestKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(publicJwk);
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg, use: "sig" };
  return { kid, alg, privateKey, publicJwk: { ...publicJwk, kid, alg, use: "sig" }, privateJwk, publicPem: await exportSPKI(publicKey) };
}

export interface MintOptions {
  aud?: string | string[];
  scope?: string;
  tenant_id?: string;
  sub?: string;
  iss?: string;
  /** Seconds from now; negative for an expired token. */
  expiresIn?: number;
  /** Seconds from now. */
  notBefore?: number;
  /** Leave `exp` out. */
  noExp?: boolean;
  typ?: string;
  key?: TestKey;
  /** Sign with a kid other than the key's. */
  kid?: string;
  extra?: Record<string, unknown>;
}

export interface TestIssuer {
  issuer: string;
  url: string;
  jwksUrl: string;
  discoveryUrl: string;
  tokenUrl: string;
  keys: TestKey[];
  /** How many times each path was requested. */
  hits: Map<string, number>;
  /** What the JWKS serves now (public keys of `keys`, unless overridden). */
  publish(keys: TestKey[]): void;
  /** Makes the JWKS endpoint fail (500) until called with false. */
  failJwks(fail: boolean): void;
  mint(o?: MintOptions): Promise<string>;
  /** Writes the current JWKS to a file. */
  writeJwks(file: string, keys?: TestKey[]): void;
  /** client_id → secret accepted by the token endpoint; tokens it issues live `tokenLifetime` seconds. */
  clients: Map<string, string>;
  tokenLifetime: number;
  close(): Promise<void>;
}

/** Starts a test identity provider on 127.0.0.1. */
export async function startTestIssuer(): Promise<TestIssuer> {
  const first = await makeKey("ES256");
  let published: TestKey[] = [first];
  let failing = false;
  const hits = new Map<string, number>();
  const clients = new Map<string, string>();
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (path === "/jwks.json") {
      if (failing) return json(500, { error: "down" });
      return json(200, { keys: published.map((k) => k.publicJwk) });
    }
    if (path === "/.well-known/openid-configuration") {
      return json(200, { issuer: it.issuer, jwks_uri: it.jwksUrl, token_endpoint: it.tokenUrl });
    }
    if (path === "/token" && req.method === "POST") {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        const form = new URLSearchParams(body);
        const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? "");
        const [id, secret] = basic ? Buffer.from(basic[1]!, "base64").toString().split(":").map(decodeURIComponent) : [form.get("client_id"), form.get("client_secret")];
        if (!id || clients.get(id) !== secret) return json(401, { error: "invalid_client" });
        if (form.get("grant_type") !== "client_credentials") return json(400, { error: "unsupported_grant_type" });
        void it
          .mint({ aud: form.get("audience") ?? undefined, scope: form.get("scope") ?? "", sub: id, expiresIn: it.tokenLifetime })
          .then((access_token) => json(200, { access_token, token_type: "Bearer", expires_in: it.tokenLifetime }));
      });
      return;
    }
    json(404, { error: "not found" });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const addr = server.address() as { port: number };
  const url = `http://127.0.0.1:${addr.port}`;
  const it: TestIssuer = {
    issuer: `${url}/`,
    url,
    jwksUrl: `${url}/jwks.json`,
    discoveryUrl: `${url}/.well-known/openid-configuration`,
    tokenUrl: `${url}/token`,
    keys: [first],
    hits,
    clients,
    tokenLifetime: 300,
    publish(keys) {
      published = keys;
    },
    failJwks(fail) {
      failing = fail;
    },
    async mint(o = {}) {
      const key = o.key ?? first;
      const now = Math.floor(Date.now() / 1000);
      const claims: Record<string, unknown> = { ...o.extra };
      if (o.scope !== undefined) claims.scope = o.scope;
      if (o.tenant_id !== undefined) claims.tenant_id = o.tenant_id;
      let jwt = new SignJWT(claims)
        .setProtectedHeader({ alg: key.alg, kid: o.kid ?? key.kid, ...(o.typ ? { typ: o.typ } : {}) })
        .setIssuer(o.iss ?? it.issuer)
        .setSubject(o.sub ?? "alice")
        .setIssuedAt(now)
        .setJti(randomUUID());
      if (o.aud !== undefined) jwt = jwt.setAudience(o.aud);
      if (!o.noExp) jwt = jwt.setExpirationTime(now + (o.expiresIn ?? 300));
      if (o.notBefore !== undefined) jwt = jwt.setNotBefore(now + o.notBefore);
      return jwt.sign(key.privateKey);
    },
    writeJwks(file, keys = published) {
      writeFileSync(file, JSON.stringify({ keys: keys.map((k) => k.publicJwk) }));
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return it;
}
