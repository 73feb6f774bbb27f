/**
 * The command line of create-fabric-handler: its flags, its help text, and parsing (which never prompts).
 */
import { parseArgs } from "node:util";
import { UsageError } from "./errors.js";
import { DEFAULT_SDK_SPEC } from "./package-manifest.js";
import { isTemplateName, TEMPLATE_NAMES, type TemplateName } from "./scaffold.js";

/** The name used when none is given and nothing can be asked (without --from-openapi). */
export const DEFAULT_PACKAGE_NAME = "my-fabric-handler";

/** What `create-fabric-handler --help` prints. */
export const USAGE = `Usage: npm create fabric-handler [name] -- [options]
       create-fabric-handler [name] [options]

Scaffolds a NodeFabric handler package that builds and passes its tests as generated.

Options:
  -t, --template <name>        atomic (default), composite or http
      --from-openapi <file|url>
                               one atomic node type per operation of an OpenAPI 3.0/3.1 or
                               Swagger 2.0 document (JSON or YAML); implies --template http
      --from-mcp <url|command> one atomic node type per tool of an MCP server: a Streamable HTTP
                               URL, or a command that starts a stdio server (the package starts it)
      --from-a2a <card url>    one atomic node type per skill of a remote A2A agent: the URL of
                               its Agent Card (or of the agent, for its well-known card)
      --header <header>        with --from-mcp URL or --from-a2a: "Name: value", or
                               "Authorization: Bearer {secret:NAME}" for an executor secret
                               (repeatable)
      --include <tags|ids>     with --from-openapi: only operations with one of these tags or
                               operationIds; with --from-mcp: only these tools; with --from-a2a:
                               only these skills (comma-separated, repeatable)
      --exclude <tags|ids>     with --from-openapi: leave out operations with one of these tags
                               or operationIds; with --from-mcp: these tools; with --from-a2a:
                               these skills (comma-separated, repeatable)
      --dir <path>             where to create the package (default: ./<name without its scope>);
                               it must not exist or be empty
      --sdk <spec>             the @nodefabric/sdk version spec written to package.json
                               (default: ${DEFAULT_SDK_SPEC}; a file: spec tests a local build)
      --schemas <spec>         adds "overrides": { "@nodefabric/schemas": <spec> } to package.json,
                               for installing a local build of @nodefabric/sdk (with --sdk file:…)
  -y, --yes                    ask nothing: use the flags, and defaults for the rest
  -h, --help                   print this help

In a terminal it asks for the name and template when they are not given (unless --yes). Otherwise
it asks nothing: the name defaults to ${DEFAULT_PACKAGE_NAME} (with --from-openapi, to the API's title)
and the template to atomic.

Exit codes: 0 created, 1 failed (e.g. the directory is not empty), 2 usage error.
`;

/** The command line, parsed and checked (the name is validated later, once it is known). */
export interface CliArguments {
  name?: string;
  template?: TemplateName;
  fromOpenApi?: string;
  /** `--from-mcp`: an MCP server's URL or command. */
  fromMcp?: string;
  /** `--from-a2a`: the URL of an A2A agent's card. */
  fromA2a?: string;
  /** `--header` values for --from-mcp or --from-a2a. */
  headers?: string[];
  include?: string[];
  exclude?: string[];
  dir?: string;
  sdk?: string;
  schemas?: string;
  yes: boolean;
  help: boolean;
}

/** Parses `argv` (without node and the script); throws a UsageError for anything it cannot take. */
export function parseCliArguments(argv: string[]): CliArguments {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        template: { type: "string", short: "t" },
        "from-openapi": { type: "string" },
        "from-mcp": { type: "string" },
        "from-a2a": { type: "string" },
        header: { type: "string", multiple: true },
        include: { type: "string", multiple: true },
        exclude: { type: "string", multiple: true },
        dir: { type: "string" },
        sdk: { type: "string" },
        // Known only to say what replaced it.
        core: { type: "string" },
        schemas: { type: "string" },
        yes: { type: "boolean", short: "y" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  if (positionals.length > 1) throw new UsageError(`expected at most one package name, got ${positionals.map((p) => JSON.stringify(p)).join(", ")}`);
  if (values.core !== undefined) {
    throw new UsageError("--core is gone: generated packages depend on @nodefabric/sdk, not @nodefabric/core; give its spec with --sdk <spec>");
  }
  for (const flag of ["template", "from-openapi", "from-mcp", "from-a2a", "dir", "sdk", "schemas"] as const) {
    if (values[flag] !== undefined && values[flag].trim() === "") throw new UsageError(`--${flag} needs a value`);
  }
  const template = values.template;
  if (template !== undefined && !isTemplateName(template)) {
    throw new UsageError(`unknown template ${JSON.stringify(template)}: choose ${TEMPLATE_NAMES.join(", ")}`);
  }
  const include = selectors(values.include, "include");
  const exclude = selectors(values.exclude, "exclude");
  const sources = (["from-openapi", "from-mcp", "from-a2a"] as const).filter((f) => values[f] !== undefined);
  if (sources.length > 1) throw new UsageError("give one of --from-openapi, --from-mcp and --from-a2a");
  if ((include || exclude) && sources.length === 0) {
    throw new UsageError(`--${include ? "include" : "exclude"} selects operations of --from-openapi, tools of --from-mcp or skills of --from-a2a; give the document, server or agent too`);
  }
  if (values.header !== undefined && values["from-mcp"] === undefined && values["from-a2a"] === undefined) throw new UsageError("--header is sent to the server of --from-mcp or the agent of --from-a2a; give it too");
  if (values["from-mcp"] !== undefined && template !== undefined) throw new UsageError(`--from-mcp makes a package of the server's tools; drop --template ${template}`);
  if (values["from-a2a"] !== undefined && template !== undefined) throw new UsageError(`--from-a2a makes a package of the agent's skills; drop --template ${template}`);
  if (values["from-openapi"] !== undefined && template !== undefined && template !== "http") {
    throw new UsageError(`--from-openapi makes an http package; drop --template ${template}`);
  }
  return {
    name: positionals[0],
    template,
    fromOpenApi: values["from-openapi"],
    fromMcp: values["from-mcp"],
    fromA2a: values["from-a2a"],
    ...(values.header ? { headers: values.header } : {}),
    ...(include ? { include } : {}),
    ...(exclude ? { exclude } : {}),
    dir: values.dir,
    sdk: values.sdk,
    schemas: values.schemas,
    yes: values.yes ?? false,
    help: values.help ?? false,
  };
}

/** The tags or operationIds of repeated, comma-separated `--include`/`--exclude` values; undefined when not given. */
function selectors(values: string[] | undefined, flag: string): string[] | undefined {
  if (values === undefined) return undefined;
  const list = values.flatMap((v) => v.split(",")).map((v) => v.trim()).filter((v) => v !== "");
  if (list.length === 0) throw new UsageError(`--${flag} needs one or more tags or operationIds`);
  return list;
}
