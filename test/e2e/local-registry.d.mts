export declare const repo: string;

export interface LocalRegistry {
  url: string;
  /**
   * The environment of a user whose npm knows only this registry: `npm_config_registry`, a user config holding the
   * token `npm login` would have written, and an npm cache of its own (so nothing installed by an earlier run is
   * reused). No audit, fund or update checks.
   */
  env: NodeJS.ProcessEnv;
  stop(): Promise<void>;
}

/** Starts Verdaccio in `dir` (its storage, config and user) and signs a user in, as `npm login` would. */
export declare function startLocalRegistry(dir: string): Promise<LocalRegistry>;
