/**
 * Turns the `auth` configuration into what services are built with: one token verifier per process (so every
 * service of a `fabric dev` shares one key cache), each service's own outbound tokens, and the coordinator's
 * assignment tokens. Also refuses to listen beyond loopback with authentication disabled.
 */
import path from "node:path";
import { readFileSync } from "node:fs";
import { ConfigError, isLoopbackHost, servicePort, serviceUrl, type FabricConfig } from "./config.js";
import { TokenVerifier, type KeySource } from "./http/token-verifier.js";
import type { InboundAuthOptions, ServiceSecurityOptions } from "./http/auth-plugin.js";
import type { ServiceName } from "./service-names.js";
import { ClientCredentialsServiceTokens, SignedServiceTokens, SigningKeyFile, type ServiceTokens } from "./clients/service-tokens.js";
import { AssignmentTokens, loadOrCreateAssignmentSecret } from "./engine/assignment-tokens.js";

/** The security of the services of one process. */
export interface FabricSecurity {
  /** What a service is built with. */
  forService(name: ServiceName): ServiceSecurityOptions;
  /** The coordinator's assignment tokens. */
  assignmentTokens(): AssignmentTokens;
}

function keySource(config: FabricConfig): KeySource {
  const a = config.auth;
  if (a.jwks_url) return { jwksUrl: a.jwks_url };
  if (a.jwks_file) return { jwksFile: path.resolve(config.base_dir, a.jwks_file) };
  return { oidcDiscoveryUrl: a.oidc_discovery_url! };
}

/** The services that call others (the registry and the PDP call nobody). */
const CALLERS: ReadonlySet<ServiceName> = new Set(["run-gateway", "run-coordinator", "atomic-executor", "composite-executor", "selection"]);

/** Stops a start that would expose services without authentication. */
export function assertListenAllowed(config: FabricConfig): void {
  if (config.auth.mode === "disabled" && !isLoopbackHost(config.host)) {
    throw new ConfigError(
      `refusing to listen on ${config.host}: authentication is disabled (auth.mode "disabled"), and a fabric without ` +
        `authentication listens on loopback addresses only (127.0.0.1, ::1). Listen on 127.0.0.1, or turn authentication on: ` +
        `\`fabric dev --auth\` (keys generated for you), or auth.mode "required" with auth.issuer and auth.jwks_url, ` +
        `auth.jwks_file or auth.oidc_discovery_url (see docs/auth.md).`,
    );
  }
}

/** Builds the security of a process from its configuration (configuration errors are ConfigErrors). */
export function fabricSecurity(config: FabricConfig): FabricSecurity {
  const a = config.auth;
  let verifier: TokenVerifier | undefined;
  if (a.mode !== "disabled") {
    try {
      verifier = new TokenVerifier({
        keys: keySource(config),
        issuer: a.issuer,
        algorithms: a.algorithms,
        clockToleranceSeconds: a.clock_tolerance_s,
        typ: a.typ,
        cacheMaxAgeMs: a.jwks_cache_max_age_s * 1000,
        cooldownMs: a.jwks_cooldown_s * 1000,
      });
    } catch (err) {
      throw new ConfigError(`invalid configuration: ${(err as Error).message}`);
    }
  }

  let tokensFor: ((name: ServiceName) => ServiceTokens) | undefined;
  if (a.signing_key_file) {
    // One key file for every service of the process, read again when `fabric keys generate --rotate` replaces it.
    let keyFile: SigningKeyFile;
    try {
      keyFile = new SigningKeyFile(path.resolve(config.base_dir, a.signing_key_file));
    } catch (err) {
      throw new ConfigError(`invalid configuration: auth.signing_key_file: ${(err as Error).message}`);
    }
    tokensFor = (service) => new SignedServiceTokens({ keyFile, issuer: a.issuer!, service, ttlSeconds: a.token_ttl_s, typ: a.typ });
  } else if (a.token_url) {
    let secret = a.client_secret;
    if (a.client_secret_file) {
      try {
        secret = readFileSync(path.resolve(config.base_dir, a.client_secret_file), "utf8").trim();
      } catch (err) {
        throw new ConfigError(`invalid configuration: auth.client_secret_file: ${(err as Error).message}`);
      }
    }
    tokensFor = (service) =>
      new ClientCredentialsServiceTokens({
        tokenUrl: a.token_url!,
        clientId: a.client_id!,
        clientSecret: secret!,
        service,
        scope: a.token_scope,
        audienceParameter: a.audience_parameter,
      });
  }

  const perService = new Map<ServiceName, ServiceTokens | undefined>();
  let assignments: AssignmentTokens | undefined;
  return {
    forService(name) {
      if (a.mode !== "disabled" && !tokensFor && CALLERS.has(name)) {
        throw new ConfigError(
          `invalid configuration: with authentication ${a.mode}, the ${name} calls other services with tokens of its own: ` +
            `set auth.signing_key_file (tokens minted locally) or auth.token_url with auth.client_id (OAuth2 client credentials)`,
        );
      }
      if (!perService.has(name)) perService.set(name, tokensFor?.(name));
      let auth: InboundAuthOptions = { mode: "disabled" };
      if (verifier) {
        auth = { mode: a.mode, verifier };
        // An executor at a configured address knows it before it listens: tokens bound to it there are its own.
        const known = config.services[name]?.url !== undefined || servicePort(config, name) !== 0;
        if ((name === "atomic-executor" || name === "composite-executor") && known) auth.executorEndpoints = [serviceUrl(config, name)];
      }
      return { auth, tokens: perService.get(name) };
    },
    assignmentTokens() {
      if (!assignments) {
        const file = a.assignment_secret_file
          ? path.resolve(config.base_dir, a.assignment_secret_file)
          : path.join(path.resolve(config.base_dir, config.data_dir), "assignment-secret");
        assignments = new AssignmentTokens(loadOrCreateAssignmentSecret(file), a.assignment_ttl_s);
      }
      return assignments;
    },
  };
}
