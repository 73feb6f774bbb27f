/**
 * The two ways the scaffolder fails, each with its exit code: the command line is wrong (2), or the command line is
 * fine but the work cannot be done (1): a directory in the way, an unreadable or unusable OpenAPI document.
 */

/** The command line is wrong: an unknown flag, a bad value, an invalid package name. Exit code 2. */
export class UsageError extends Error {
  readonly exitCode = 2;

  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** The command line is fine but scaffolding cannot go ahead. Exit code 1. */
export class ScaffoldError extends Error {
  readonly exitCode = 1;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ScaffoldError";
  }
}
