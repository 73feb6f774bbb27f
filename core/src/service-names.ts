/**
 * The names of the seven services of the v1 contract. A file of its own on the lowest floor of core, so that
 * everything that names a service (the service factory, the scope table, the auth hook, the clients, the settings,
 * the diagnostics channels) can import it without importing each other (docs/architecture.md, "Floors").
 */

/** The seven services of the v1 contract, in port order. */
export const SERVICE_NAMES = [
  "run-gateway",
  "run-coordinator",
  "atomic-executor",
  "composite-executor",
  "node-registry",
  "selection",
  "pdp",
] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];
