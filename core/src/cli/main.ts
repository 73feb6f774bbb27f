#!/usr/bin/env node
/**
 * The `fabric` command: loads the plugins whose commands this invocation may run, then runs the program (program.ts).
 */
import { ConfigError } from "../config.js";
import { PluginLoadError } from "../plugin-loader.js";
import { buildProgram, pluginsForCommand } from "./program.js";

async function main(): Promise<void> {
  try {
    const { plugins, argv } = await pluginsForCommand(process.argv);
    await buildProgram(plugins).parseAsync(argv);
  } catch (err) {
    if (err instanceof ConfigError || err instanceof PluginLoadError) {
      process.stderr.write(`fabric: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`fabric: ${(err as Error).message}\n`);
    process.exit(1);
  }
}

void main();
