/**
 * ConfigError: a configuration problem. A file of its own at the bottom, so every floor that finds one (the loader,
 * the services' logger, the stores) can throw it without importing the loader.
 */

/** A configuration problem; the CLI prints its message and exits 2. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}
