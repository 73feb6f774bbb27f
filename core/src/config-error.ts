/**
 * ConfigError: a configuration problem. A file of its own on the lowest floor of core, so every floor that finds one
 * (the loader, the settings' checks, the services' logger, the stores) can throw it without importing the loader
 * (docs/architecture.md, "Floors").
 */

/** A configuration problem; the CLI prints its message and exits 2. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}
