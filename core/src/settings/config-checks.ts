/**
 * The checks a configuration passes before anything starts: the schema (from the settings table), then what a schema
 * cannot say (auth combinations, CIDR ranges and host entries, coordinator URLs). Each names every bad option.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import { checkSecretHost } from "@nodefabric/sdk/runtime";
import { checkAllowHost, parseCidr } from "../http/ip-ranges.js";
import { ConfigError } from "../config-error.js";
import { CONFIG_SCHEMA, type AuthConfig, type FabricConfig } from "./fabric-settings.js";

let configValidator: ReturnType<Ajv2020["compile"]> | undefined;

/** Validates a merged configuration, throwing a ConfigError that names every bad option. */
export function validateConfig(candidate: unknown, source: string): void {
  configValidator ??= new Ajv2020({ allErrors: true, strict: false }).compile(CONFIG_SCHEMA);
  if (configValidator(candidate)) return;
  const lines = (configValidator.errors ?? []).map((e) => {
    const where = e.instancePath ? e.instancePath.slice(1).replace(/\//g, ".") : "(top level)";
    if (e.keyword === "additionalProperties") return `  - ${where === "(top level)" ? "" : where + "."}${String(e.params.additionalProperty)}: unknown option`;
    if (e.keyword === "enum") return `  - ${where}: must be one of ${(e.params.allowedValues as unknown[]).join(", ")}`;
    return `  - ${where}: ${e.message}`;
  });
  throw new ConfigError(`invalid configuration (${source}):\n${lines.join("\n")}`);
}

const stop = (problems: string[]): void => {
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
};

/** The CIDR ranges and host entries of executor.egress and executor.secret_hosts, each bad one named. */
export function checkEgressConfig(executor: FabricConfig["executor"]): void {
  const problems: string[] = [];
  const egress = executor.egress ?? {};
  (egress.allow_cidrs ?? []).forEach((c, i) => {
    try {
      parseCidr(c);
    } catch (err) {
      problems.push(`executor.egress.allow_cidrs[${i}]: ${(err as Error).message}`);
    }
  });
  (egress.allow_hosts ?? []).forEach((h, i) => {
    const problem = checkAllowHost(h);
    if (problem) problems.push(`executor.egress.allow_hosts[${i}]: ${problem}`);
  });
  for (const [name, hosts] of Object.entries(executor.secret_hosts ?? {})) {
    hosts.forEach((h, i) => {
      const problem = checkSecretHost(h);
      if (problem) problems.push(`executor.secret_hosts.${name}[${i}]: ${problem}`);
    });
  }
  stop(problems);
}

/** gateway.coordinators: each an http(s) base URL with no path (the gateway adds the API's paths). */
export function checkGatewayCoordinators(urls: readonly string[]): void {
  stop(
    urls.flatMap((u, i) => {
      const url = URL.canParse(u) ? new URL(u) : undefined;
      const base = url && (url.protocol === "http:" || url.protocol === "https:") && url.pathname === "/" && !url.search && !url.hash && !url.username;
      return base ? [] : [`gateway.coordinators[${i}]: ${JSON.stringify(u)} is not a coordinator base URL such as http://10.0.0.7:8081`];
    }),
  );
}

/** The combinations of auth options that cannot work, each named. */
export function checkAuthConfig(a: AuthConfig): void {
  const problems: string[] = [];
  const sources = (["jwks_url", "jwks_file", "oidc_discovery_url"] as const).filter((k) => a[k] !== undefined);
  if (sources.length > 1) problems.push(`auth: set only one of ${sources.join(", ")}`);
  if (a.mode !== "disabled") {
    if (sources.length === 0) {
      problems.push(
        `auth.mode is "${a.mode}" but no keys to verify tokens with: set auth.jwks_url, auth.jwks_file or auth.oidc_discovery_url ` +
          `(\`fabric keys generate\` writes a jwks.json and a signing key; or use --auth disabled for local development on loopback)`,
      );
    }
    if (!a.issuer && a.oidc_discovery_url === undefined) problems.push(`auth.issuer is needed to verify tokens (only OIDC discovery can find it)`);
  }
  if (a.signing_key_file !== undefined && a.token_url !== undefined) problems.push("auth: set either signing_key_file (local tokens) or token_url (client credentials), not both");
  if (a.signing_key_file !== undefined && !a.issuer) problems.push("auth.signing_key_file needs auth.issuer: minted tokens carry it");
  if (a.token_url !== undefined) {
    if (!a.client_id) problems.push("auth.token_url needs auth.client_id");
    if ((a.client_secret === undefined) === (a.client_secret_file === undefined)) problems.push("auth.token_url needs exactly one of auth.client_secret and auth.client_secret_file");
  }
  stop(problems);
}
