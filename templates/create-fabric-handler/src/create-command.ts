/**
 * The create-fabric-handler command: from the command line (and, in a terminal, answers to what it left out) to a
 * package on disk and the next steps; failures become a message and an exit code.
 */
import path from "node:path";
import { DEFAULT_PACKAGE_NAME, parseCliArguments, USAGE, type CliArguments } from "./cli-arguments.js";
import { ScaffoldError, UsageError } from "./errors.js";
import { loadOpenApi, OpenApiImportError, type LoadedOpenApi } from "@nodefabric/importer-openapi";
import { assertValidPackageName, folderNameOf, packageNameFromTitle, packageNameProblems } from "./package-name.js";
import { clackPrompter, type Prompter } from "./prompts.js";
import { renderMcpPackage } from "./mcp-package.js";
import { renderA2aPackage } from "./a2a-package.js";
import { assertUsableTargetDirectory, renderPackage, writePackage, type RenderedPackage, type TemplateName } from "./scaffold.js";

/** Where the command runs: its directory, its output streams, and whether it may ask questions. */
export interface CommandEnvironment {
  cwd: string;
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  /** True when stdin and stdout are terminals; questions are asked only then (and never with --yes). */
  interactive: boolean;
  /** The questions (default: @clack/prompts); tests pass their own. */
  prompter?: Prompter;
}

/** Runs the command and answers its exit code: 0 created, 1 failed, 2 usage error. */
export async function runCreateCommand(argv: string[], env: CommandEnvironment): Promise<number> {
  try {
    const args = parseCliArguments(argv);
    if (args.help) {
      env.stdout.write(USAGE);
      return 0;
    }
    await create(args, env);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      env.stderr.write(`create-fabric-handler: ${err.message}\nRun create-fabric-handler --help for the options.\n`);
      return err.exitCode;
    }
    if (err instanceof ScaffoldError) {
      env.stderr.write(`create-fabric-handler: ${err.message}\n`);
      return err.exitCode;
    }
    env.stderr.write(`create-fabric-handler: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return 1;
  }
}

async function create(args: CliArguments, env: CommandEnvironment): Promise<void> {
  const prompter = env.interactive && !args.yes ? (env.prompter ?? clackPrompter()) : undefined;
  if (args.name !== undefined) assertValidPackageName(args.name);
  const progress = (message: string) => env.stderr.write(`create-fabric-handler: ${message}\n`);
  const openApi: LoadedOpenApi | undefined = args.fromOpenApi ? await readOpenApi(args.fromOpenApi, env.cwd, progress) : undefined;
  prompter?.start();

  const targetOf = (name: string) => path.resolve(env.cwd, args.dir ?? folderNameOf(name));
  let packageName = args.name;
  if (packageName === undefined) {
    const defaultName = (openApi && packageNameFromTitle(openApi.document.info.title)) ?? DEFAULT_PACKAGE_NAME;
    packageName = prompter
      ? await prompter.packageName({
          defaultName,
          validate: (name) => {
            const problems = packageNameProblems(name);
            if (problems.length > 0) return problems.join("; ");
            try {
              assertUsableTargetDirectory(targetOf(name));
            } catch (err) {
              return (err as Error).message;
            }
            return undefined;
          },
        })
      : defaultName;
    // The prompt turns an empty answer into the default.
    if (packageName === "") packageName = defaultName;
    assertValidPackageName(packageName);
  }
  const dir = targetOf(packageName);
  assertUsableTargetDirectory(dir);
  if (args.fromMcp !== undefined) {
    const made = await renderMcpPackage({ packageName, source: args.fromMcp, headers: args.headers, include: args.include, exclude: args.exclude, sdkSpec: args.sdk, schemasSpec: args.schemas, onProgress: progress });
    writePackage(dir, made.files);
    const summary = nextSteps(packageName, "http", dir, env.cwd, made, args.fromMcp, made.secrets);
    if (prompter) prompter.finish(`Created ${packageName}`);
    env.stdout.write(summary);
    return;
  }

  if (args.fromA2a !== undefined) {
    const made = await renderA2aPackage({ packageName, source: args.fromA2a, headers: args.headers, include: args.include, exclude: args.exclude, sdkSpec: args.sdk, schemasSpec: args.schemas, onProgress: progress });
    writePackage(dir, made.files);
    const summary = nextSteps(packageName, "http", dir, env.cwd, made, args.fromA2a, made.secrets);
    if (prompter) prompter.finish(`Created ${packageName}`);
    env.stdout.write(summary);
    return;
  }

  const template: TemplateName = openApi ? "http" : (args.template ?? (prompter ? await prompter.template() : "atomic"));
  const started = Date.now();
  const rendered = renderPackage({
    packageName,
    template,
    sdkSpec: args.sdk,
    schemasSpec: args.schemas,
    openApi,
    include: args.include,
    exclude: args.exclude,
    onProgress: progress,
  });
  if (openApi && rendered.nodeTypeIds.length >= 100) progress(`made ${rendered.nodeTypeIds.length} node types in ${((Date.now() - started) / 1000).toFixed(1)} s; writing them`);
  writePackage(dir, rendered.files);

  const summary = nextSteps(packageName, template, dir, env.cwd, rendered, args.fromOpenApi);
  if (prompter) prompter.finish(`Created ${packageName}`);
  env.stdout.write(summary);
}

/** Reads the OpenAPI document at `source`; a document that cannot be used is a ScaffoldError with the reason. */
async function readOpenApi(source: string, cwd: string, onProgress: (message: string) => void): Promise<LoadedOpenApi> {
  try {
    return await loadOpenApi(source, { cwd, onProgress });
  } catch (err) {
    if (err instanceof OpenApiImportError) throw new ScaffoldError(err.message, { cause: err });
    throw err;
  }
}

/** What was made and what to do next: install, test, build, publish, and run it in a fabric. */
export function nextSteps(packageName: string, template: TemplateName, dir: string, cwd: string, rendered: RenderedPackage, fromOpenApi?: string, mcpSecrets?: string[]): string {
  const relative = path.relative(cwd, dir) || ".";
  const shown = relative === "." || relative.startsWith("..") || path.isAbsolute(relative) ? relative : `./${relative}`;
  const cdTarget = /^[\w./@-]+$/.test(relative) ? relative : `'${relative.replace(/'/g, "'\\''")}'`;
  const made = fromOpenApi ? `from ${fromOpenApi}` : `from the ${template} template`;
  const lines = [
    `Created ${packageName} in ${shown} (${made}), with the node type${rendered.nodeTypeIds.length === 1 ? "" : "s"}:`,
    ...rendered.nodeTypeIds.map((id) => `  ${id}@1.0.0`),
  ];
  if (rendered.nodeTypeIds.length > 20) lines.splice(1 + 10, rendered.nodeTypeIds.length - 10, `  … and ${rendered.nodeTypeIds.length - 10} more (the README lists them all)`);
  if (rendered.skipped.length > 0) {
    const shown = rendered.skipped.slice(0, 20).map((s) => `  ${s}`);
    if (rendered.skipped.length > 20) shown.push(`  … and ${rendered.skipped.length - 20} more (the README lists them all)`);
    lines.push(`Left out (${rendered.skipped.length}):`, ...shown);
  }
  const input = JSON.stringify(rendered.tryIt.inputs).replace(/'/g, "'\\''");
  lines.push(
    "",
    "Next steps:",
    ...(relative === "." ? [] : [`  cd ${cdTarget}`]),
    "  npm install",
    "  npm test",
    "  npm run build",
    "  npm publish                  # when you are ready to share it (it builds first)",
    "",
    "Run it in a fabric (after the build):",
    "  npx fabric dev --discover .  # from the package folder; or --discover <dir> where it is installed",
    `  npx fabric run ${rendered.tryIt.nodeTypeId} --input '${input}'`,
    ...(mcpSecrets === undefined
      ? [`The upstream's base URL is set with ${rendered.baseUrlSetting} (an environment variable, or the secret FABRIC_SECRET_${rendered.baseUrlSetting}).`]
      : mcpSecrets.map((s) => `Where the executor runs, set FABRIC_SECRET_${s}=… and bind it to the server's host: FABRIC_EXECUTOR_SECRET_HOSTS_${s}=<host>.`)),
    "",
  );
  return lines.join("\n");
}
