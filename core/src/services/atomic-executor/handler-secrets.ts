/**
 * Where a running executor's handlers get `ctx.secrets` from, and which hosts each secret may go to: the SDK
 * runtime's, re-exported for the configuration and the executor.
 */
export {
  checkSecretHost,
  SECRET_ENV_PREFIX,
  SECRET_HOSTS_ENV_PREFIX,
  SecretBindings,
  secretBindingHint,
  secretHostsFromEnv,
  secretsFromEnv,
  type SecretRefusal,
} from "@nodefabric/sdk/runtime";
