/**
 * Where a running executor's handlers get `ctx.secrets` from: environment variables `FABRIC_SECRET_<NAME>`, read
 * once at start. Secrets never go through the configuration file, so they are never printed with it.
 */

/** The prefix of an environment variable that holds a secret for handlers. */
export const SECRET_ENV_PREFIX = "FABRIC_SECRET_";

/** The secrets in `env`: `FABRIC_SECRET_WEATHER_API_KEY=…` is the secret `WEATHER_API_KEY`. */
export function secretsFromEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (key.startsWith(SECRET_ENV_PREFIX) && key.length > SECRET_ENV_PREFIX.length && value !== undefined) out[key.slice(SECRET_ENV_PREFIX.length)] = value;
  }
  return out;
}
