/**
 * Where a running executor's handlers get `ctx.secrets` from: environment variables `FABRIC_SECRET_<NAME>`, read
 * once at start. Secrets never go through the configuration file, so they are never printed with it.
 *
 * A secret's binding says which hosts it may be sent to by egress-checked requests (`ctx.egress.secretFor`, which
 * `http.request` uses for `secret_headers`): `executor.secret_hosts.<NAME>` in the configuration, or
 * `FABRIC_EXECUTOR_SECRET_HOSTS_<NAME>=api.example.com,*.example.org`. A secret with no binding is sent nowhere that
 * way. Code handlers reading `ctx.secrets.get(NAME)` are not affected: the operator installed their code.
 */

/** The prefix of an environment variable that holds a secret for handlers. */
export const SECRET_ENV_PREFIX = "FABRIC_SECRET_";

/** The prefix of an environment variable that binds a secret to hosts: `FABRIC_EXECUTOR_SECRET_HOSTS_<NAME>`. */
export const SECRET_HOSTS_ENV_PREFIX = "FABRIC_EXECUTOR_SECRET_HOSTS_";

/** The secrets in `env`: `FABRIC_SECRET_WEATHER_API_KEY=…` is the secret `WEATHER_API_KEY`. */
export function secretsFromEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (key.startsWith(SECRET_ENV_PREFIX) && key.length > SECRET_ENV_PREFIX.length && value !== undefined) out[key.slice(SECRET_ENV_PREFIX.length)] = value;
  }
  return out;
}

/** The bindings in `env`: `FABRIC_EXECUTOR_SECRET_HOSTS_WEATHER_API_KEY=api.weather.example,*.weather.example`. */
export function secretHostsFromEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [key, value] of Object.entries(env)) {
    if (!key.startsWith(SECRET_HOSTS_ENV_PREFIX) || key.length === SECRET_HOSTS_ENV_PREFIX.length || value === undefined) continue;
    out[key.slice(SECRET_HOSTS_ENV_PREFIX.length)] = value
      .split(",")
      .map((h) => h.trim())
      .filter(Boolean);
  }
  return out;
}

// A host name or IPv4 address, or an IPv6 one in brackets, with an optional "*." and an optional port.
const HOST_ENTRY = /^(?:\*\.)?(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*(?::\d{1,5})?$|^\[[0-9a-f:.]+\](?::\d{1,5})?$/;

/** Why `entry` cannot be a host a secret is bound to, or undefined when it can. */
export function checkSecretHost(entry: string): string | undefined {
  if (!HOST_ENTRY.test(entry.trim().toLowerCase())) {
    return `"${entry}" is not a host with an optional port, such as "api.example.com", "*.example.org" or "api.example.com:8443"`;
  }
  return undefined;
}

/** Where an operator binds the secret `name`, for messages. */
export function secretBindingHint(name: string): string {
  return `executor.secret_hosts.${name} in fabric.config.json, or ${SECRET_HOSTS_ENV_PREFIX}${name}=api.example.com,*.example.org`;
}

/** Why a secret may not go to a URL. */
export interface SecretRefusal {
  reason: "secret_unbound" | "secret_host_not_bound";
  message: string;
}

/**
 * The hosts each secret may be sent to. An entry is `host`, `host:port` or `*.domain`, compared with the URL's `host`
 * (which carries the port only when it is not the scheme's default), as `nodefabric.http.allowed_hosts` is.
 */
export class SecretBindings {
  private readonly hosts = new Map<string, string[]>();

  constructor(bindings: Readonly<Record<string, readonly string[]>> = {}) {
    for (const [name, entries] of Object.entries(bindings)) {
      const list = entries.map((e) => {
        const problem = checkSecretHost(e);
        if (problem) throw new Error(`secret_hosts.${name}: ${problem}`);
        return e.trim().toLowerCase();
      });
      if (list.length > 0) this.hosts.set(name, list);
    }
  }

  /** The hosts `name` is bound to; undefined when it is bound to none. */
  hostsOf(name: string): readonly string[] | undefined {
    return this.hosts.get(name);
  }

  /** Why the secret `name` may not be sent to `url`, or undefined when it may. */
  refusal(name: string, url: URL): SecretRefusal | undefined {
    const entries = this.hosts.get(name);
    if (!entries) {
      return {
        reason: "secret_unbound",
        message: `the secret ${name} is bound to no host, so it is sent to none (${url.host} asked for it). An operator binds it to the hosts it belongs to: ${secretBindingHint(name)}`,
      };
    }
    const host = url.host.toLowerCase();
    const ok = (url.protocol === "http:" || url.protocol === "https:") && entries.some((e) => (e.startsWith("*.") ? host.endsWith(e.slice(1)) : host === e));
    if (ok) return undefined;
    return {
      reason: "secret_host_not_bound",
      message: `the secret ${name} is not bound to ${url.host}, so it is not sent there. An operator binds it to the hosts it belongs to: ${secretBindingHint(name)}`,
    };
  }
}
