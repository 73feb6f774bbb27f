/**
 * The FABRIC_* environment variables of the fabric's options, read as its settings table says (fabric-settings.ts).
 * A value that is not of its option's type is kept as it is, so validation names the option with the rest.
 */
import { FABRIC_SETTINGS, type PartialConfig } from "./fabric-settings.js";

/** Reads FABRIC_* variables into a partial configuration. */
export function configFromEnv(env: NodeJS.ProcessEnv = process.env): PartialConfig {
  return FABRIC_SETTINGS.fromEnv(env, { invalid: "keep" }) as PartialConfig;
}
