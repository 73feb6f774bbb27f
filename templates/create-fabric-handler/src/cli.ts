/**
 * The `create-fabric-handler` executable (what `npm create fabric-handler` runs).
 */
import { runCreateCommand } from "./create-command.js";

process.exitCode = await runCreateCommand(process.argv.slice(2), {
  cwd: process.cwd(),
  stdout: process.stdout,
  stderr: process.stderr,
  // Questions need a person at a terminal on both ends; piped or in CI, the flags and defaults decide.
  interactive: Boolean(process.stdin.isTTY && process.stdout.isTTY),
});
