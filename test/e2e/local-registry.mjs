/**
 * A real npm registry on loopback for the release tests: Verdaccio, in its own process, with its own storage in a
 * temporary folder. Our packages (`@nodefabric/*`, `create-fabric-handler`, and the handler packages the tests
 * scaffold, `my-*`) live only there; every other package is proxied from the registry npm is configured with.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

export const repo = fileURLToPath(new URL("../..", import.meta.url));


/** @returns {Promise<number>} */
async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = /** @type {net.AddressInfo} */ (server.address()).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The registry this machine's npm reaches, which Verdaccio proxies for everything that is not ours. */
/** @returns {string} */
function upstreamRegistry() {
  const configured = process.env.npm_config_registry ?? execFileSync("npm", ["config", "get", "registry"], { encoding: "utf8" }).trim();
  return configured.endsWith("/") ? configured : `${configured}/`;
}

/** @param {string} dir @param {string} uplink */
function verdaccioConfig(dir, uplink) {
  /** @param {string} pattern */
  const local = (pattern) => [`  '${pattern}':`, "    access: $all", "    publish: $authenticated", "    unpublish: $authenticated"];
  return [
    `storage: ${JSON.stringify(path.join(dir, "storage"))}`,
    "auth:",
    "  htpasswd:",
    `    file: ${JSON.stringify(path.join(dir, "htpasswd"))}`,
    "    max_users: 100",
    "uplinks:",
    "  upstream:",
    `    url: ${JSON.stringify(uplink)}`,
    "    timeout: 60s",
    "    maxage: 30m",
    "packages:",
    ...local("@nodefabric/*"),
    ...local("create-fabric-handler"),
    ...local("my-*"),
    "  '**':",
    "    access: $all",
    "    publish: $authenticated",
    "    proxy: upstream",
    // Signed tokens: checking one is an HMAC. Verdaccio's legacy token carries the password, which it checks
    // against htpasswd's bcrypt hash on every request, about 0.4 s of CPU each on this machine.
    "security:",
    "  api:",
    "    legacy: false",
    "    jwt:",
    "      sign:",
    "        expiresIn: 7d",
    "  web:",
    "    sign:",
    "      expiresIn: 7d",
    "server:",
    "  keepAliveTimeout: 60",
    "log: { type: stdout, format: json, level: warn }",
    "",
  ].join("\n");
}

/** Starts Verdaccio in `dir` and signs a user in, as `npm login` would. */
/**
 * @param {string} dir
 * @returns {Promise<import("./local-registry.d.mts").LocalRegistry>}
 */
export async function startLocalRegistry(dir) {
  mkdirSync(dir, { recursive: true });
  const config = path.join(dir, "verdaccio.yaml");
  writeFileSync(config, verdaccioConfig(dir, upstreamRegistry()));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const bin = createRequire(path.join(repo, "package.json")).resolve("verdaccio/bin/verdaccio");
  const child = spawn(process.execPath, [bin, "--config", config, "--listen", `127.0.0.1:${port}`], {
    cwd: dir,
    env: { ...process.env, NODE_ENV: "production" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (c) => (out += c.toString()));
  child.stderr.on("data", (c) => (out += c.toString()));
  const exited = new Promise((resolve) => child.once("exit", () => resolve()));

  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`Verdaccio exited with ${child.exitCode}:\n${out}`);
    try {
      if ((await fetch(`${url}/-/ping`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`Verdaccio did not answer on ${url} within 30 s:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }

  // `npm adduser` does this PUT, then writes the token into the user's .npmrc.
  const res = await fetch(`${url}/-/user/org.couchdb.user:release-test`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "release-test", password: "release-test-password" }),
  });
  const body = /** @type {{ token?: string }} */ (await res.json());
  if (!res.ok || !body.token) throw new Error(`Verdaccio refused to create a user: ${res.status} ${JSON.stringify(body)}`);
  const npmrc = path.join(dir, "user.npmrc");
  writeFileSync(npmrc, `//127.0.0.1:${port}/:_authToken=${body.token}\n`, { mode: 0o600 });

  return {
    url,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      TMPDIR: process.env.TMPDIR,
      LANG: process.env.LANG,
      npm_config_registry: `${url}/`,
      npm_config_userconfig: npmrc,
      npm_config_cache: path.join(dir, "npm-cache"),
      npm_config_audit: "false",
      npm_config_fund: "false",
      npm_config_update_notifier: "false",
      FABRIC_LOG_LEVEL: "warn",
    },
    stop: async () => {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}
