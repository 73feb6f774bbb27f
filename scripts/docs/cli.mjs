/**
 * docs/cli.md, generated from the code: every command of the `fabric` program (core/src/cli/program.ts) and of the
 * first-party plugins that add commands, with its arguments and options, their descriptions, choices and defaults.
 *
 * The program is built from the sources, not from dist/: esbuild bundles core's CLI and the plugins' entries (their
 * npm dependencies stay outside the bundle) into a file beside core/ that is imported and removed, so the page can
 * be written again as soon as a description changes. Nothing is started: building the program only declares it.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** The page this script writes, relative to the repository. */
export const PAGE = "docs/cli.md";

/** The first-party plugins whose commands the page lists (a plugin adds commands with its definition's `commands`). */
export const PLUGINS_WITH_COMMANDS = ["plugins/postgres"];

/** The `fabric` program and the plugins' definitions, built from the sources. */
export async function loadProgram(root = ROOT) {
  const plugins = PLUGINS_WITH_COMMANDS.map((dir) => {
    const pkg = JSON.parse(readFileSync(path.join(root, dir, "package.json"), "utf8"));
    return { dir, name: pkg.name, entry: path.join(root, dir, "src/index.ts") };
  });
  const entry = [
    `export { buildProgram } from ${JSON.stringify(path.join(root, "core/src/cli/program.ts"))};`,
    ...plugins.map((p, i) => `export { default as plugin${i} } from ${JSON.stringify(p.entry)};`),
  ].join("\n");
  const coreIndex = path.join(root, "core/src/index.ts");
  const bundled = await build({
    stdin: { contents: entry, resolveDir: root, loader: "ts", sourcefile: "cli-program.ts" },
    bundle: true,
    write: false,
    format: "esm",
    platform: "node",
    target: "node20",
    logLevel: "silent",
    plugins: [
      {
        name: "packages-outside",
        setup(b) {
          // A plugin's `@nodefabric/core` is this core's sources, so its commands are made with the same commander.
          b.onResolve({ filter: /^@nodefabric\/core$/ }, () => ({ path: coreIndex }));
          // Every other package is imported from node_modules when the bundle runs.
          b.onResolve({ filter: /^[^./]/ }, (args) => (path.isAbsolute(args.path) ? undefined : { path: args.path, external: true }));
        },
      },
    ],
  });
  // Beside core/, so that the packages it imports resolve as core's own do.
  const file = path.join(root, "core", `.cli-page-${process.pid}-${Date.now()}.mjs`);
  writeFileSync(file, bundled.outputFiles[0].text);
  let mod;
  try {
    mod = await import(pathToFileURL(file).href);
  } finally {
    rmSync(file, { force: true });
  }
  const loaded = plugins.map((p, i) => ({ ...p, definition: mod[`plugin${i}`] }));
  const program = mod.buildProgram(loaded.map((p) => ({ definition: p.definition })));
  // Which plugin added a command: the names a program with that plugin alone has beyond core's own.
  const own = new Set(mod.buildProgram([]).commands.map((c) => c.name()));
  const byName = new Map();
  for (const p of loaded) {
    for (const c of mod.buildProgram([{ definition: p.definition }]).commands) if (!own.has(c.name())) byName.set(c.name(), p.name);
  }
  return { program, pluginOf: (name) => byName.get(name) };
}

/** A table cell: one line, pipes and angle brackets escaped (`<q>` is a placeholder, not HTML). */
function cell(text) {
  return String(text ?? "").replace(/\s*\n\s*/g, " ").replace(/\|/g, "\\|").replace(/</g, "&lt;").replace(/>/g, "&gt;").trim();
}

/** A description as a sentence: a capital first letter and a full stop. */
function sentence(text) {
  const t = String(text ?? "").trim();
  if (!t) return "";
  return `${t[0].toUpperCase()}${t.slice(1)}${/[.!?]$/.test(t) ? "" : "."}`;
}

/**
 * An option's description and its default: commander's declared default, else the trailing "(default: …)" or
 * "(default …)" the description gives in words (the defaults that come from the configuration or the environment).
 */
function describeOption(option) {
  const declared = defaultOf(option);
  const m = /\s*\(default:? ((?:[^()]|\([^()]*\))*)\)$/.exec(option.description ?? "");
  if (declared || !m) return { description: option.description ?? "", default: declared };
  return { description: option.description.slice(0, m.index), default: cell(m[1]) };
}

/** The default of an option, as the page shows it (commander's declared default; descriptions name the others). */
function defaultOf(option) {
  if (option.defaultValue === undefined) return "";
  if (option.defaultValueDescription) return `\`${option.defaultValueDescription}\``;
  if (Array.isArray(option.defaultValue) && option.defaultValue.length === 0) return "";
  return `\`${typeof option.defaultValue === "string" ? option.defaultValue : JSON.stringify(option.defaultValue)}\``;
}

/** The commands under `cmd` that the page lists, depth first, with the words that reach them. */
function walk(cmd, words = []) {
  const out = [];
  for (const sub of cmd.commands) {
    if (sub._hidden || sub.name() === "help") continue;
    const path = [...words, sub.name()];
    out.push({ cmd: sub, path });
    out.push(...walk(sub, path));
  }
  return out;
}

/** GitHub's anchor for a heading made of one code span, as docs/README.md's links need it. */
function anchor(words) {
  return ["fabric", ...words].join("-").toLowerCase().replace(/[^a-z0-9_ -]/g, "");
}

/** The usage line of a command: `fabric <words> <arguments> [options]` (and `<command>` when it has subcommands). */
function usage(cmd, words) {
  const args = cmd.registeredArguments.map((a) => {
    const name = a.name() + (a.variadic ? "..." : "");
    return a.required ? `<${name}>` : `[${name}]`;
  });
  const hasOptions = cmd.options.some((o) => !o.hidden);
  const tail = cmd.commands.length > 0 ? ["<command>"] : [...args, ...(hasOptions ? ["[options]"] : [])];
  return ["fabric", ...words, ...tail].join(" ");
}

const INTRO = `<!-- Generated by scripts/docs/cli.mjs from the \`fabric\` program (core/src/cli/program.ts) and the first-party plugins' commands: edit those, then run \`npm run docs\`. -->

# The \`fabric\` command

Reference: every command of \`fabric\`, with its arguments and its options, their choices and their defaults, as
\`fabric <command> --help\` prints them. [Getting started](getting-started.md#the-fabric-command) shows the commands in
use, and [Configure a fabric](configure.md) the settings that options override.

- **Exit codes.** \`0\`: done (for \`fabric run\`, the run completed). \`1\`: a run that failed or was canceled, or a
  service that refused or could not be reached (\`fabric: <code>: <message>\` on stderr). \`2\`: the configuration,
  or the command line of a client command (\`run\`, \`runs\`, \`keys\`, \`token\`), is wrong.
- **Where the services are.** Client commands (\`run\`, \`runs\`, \`node-types\`) reach the gateway and the registry at
  \`--gateway\` and \`--registry\`, else where the configuration puts them (\`./fabric.config.json\`, \`FABRIC_*\`
  variables), else on 127.0.0.1 at ports 8080 and 8084. \`fabric run --gateway <url>\` alone is enough: without a
  version it asks the registry that the gateway names in its \`GET /v1/health\` (\`extensions["nodefabric.registry_url"]\`,
  the registry's address as the gateway's own configuration has it), and \`--registry\` overrides that.
- **Tokens.** Client commands send \`--token <jwt>\`, else \`$FABRIC_TOKEN\`, as a bearer token.
- **Output for people and for programs.** On a terminal, \`fabric run\` draws the run's NodeRuns as a live tree, with a
  line for each retry, progress message, approval and failure above it, then the outputs; piped, or with \`--json\`,
  it prints NDJSON: each event, then \`{"run": …}\`. \`fabric dev\` and \`fabric start\` log readable lines on a
  terminal and one JSON object per line otherwise; \`--log-format\` (or \`FABRIC_LOG_FORMAT\`) chooses.
`;

/** The markdown of docs/cli.md. */
export async function cliPage(root = ROOT) {
  const { program, pluginOf } = await loadProgram(root);
  const commands = walk(program);
  const out = [INTRO, "## Commands", "", "| Command | What it does |", "|---|---|"];
  for (const { cmd, path: words } of commands) {
    const plugin = pluginOf(words[0]);
    out.push(`| [\`fabric ${words.join(" ")}\`](#${anchor(words)}) | ${cell(cmd.description())}${plugin ? ` (from \`${plugin}\`)` : ""} |`);
  }
  out.push("");
  const globals = program.options.filter((o) => !o.hidden);
  out.push("Before any command: " + globals.map((o) => `\`${o.flags}\` (${cell(o.description)})`).join(", ") + ", and `-h, --help` after any command.", "");
  for (const { cmd, path: words } of commands) {
    out.push(`## \`fabric ${words.join(" ")}\``, "");
    const plugin = pluginOf(words[0]);
    out.push(`${cell(sentence(cmd.description()))}${plugin ? ` Added by the plugin \`${plugin}\` when it is installed (see [plugins](plugins.md)).` : ""}`, "");
    out.push("```", usage(cmd, words), "```", "");
    if (cmd.commands.length > 0) {
      out.push("Commands: " + cmd.commands.filter((c) => c.name() !== "help").map((c) => `[\`${c.name()}\`](#${anchor([...words, c.name()])})`).join(", ") + ".", "");
    }
    const args = cmd.registeredArguments;
    if (args.length > 0) {
      out.push("| Argument | Description |", "|---|---|");
      for (const a of args) out.push(`| \`${a.required ? `<${a.name()}>` : `[${a.name()}]`}\` | ${cell(sentence(a.description))}${a.argChoices ? ` One of: ${a.argChoices.map((c) => `\`${c}\``).join(", ")}.` : ""} |`);
      out.push("");
    }
    const options = cmd.options.filter((o) => !o.hidden);
    if (options.length > 0) {
      out.push("| Option | Description | Default |", "|---|---|---|");
      for (const o of options) {
        const d = describeOption(o);
        const choices = o.argChoices ? ` One of: ${o.argChoices.map((c) => `\`${c}\``).join(", ")}.` : "";
        const preset = o.presetArg !== undefined ? ` Given alone: \`${o.presetArg}\`.` : "";
        out.push(`| \`${o.flags.replace(/\|/g, "\\|")}\` | ${cell(sentence(d.description))}${choices}${preset} | ${d.default} |`);
      }
      out.push("");
    }
  }
  return `${out.join("\n").trimEnd()}\n`;
}

export default cliPage;

if (process.argv[1] && pathToFileURL(process.argv[1]).href === import.meta.url) {
  writeFileSync(path.join(ROOT, PAGE), await cliPage());
  console.log(`wrote ${PAGE}`);
}
