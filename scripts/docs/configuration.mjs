/**
 * docs/configuration.md: every setting of the fabric and of each package that has its own, from their settings
 * tables (core's FABRIC_SETTINGS and ENVIRONMENT_SETTINGS; a plugin's or handler package's table lives in its
 * src/settings.ts and is exported from its entry). Run through scripts/generate-docs.mjs.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));
const BRAND = Symbol.for("nodefabric.settings");
const isTable = (v) => typeof v === "object" && v !== null && v[BRAND] === true;

/** The packages under plugins/ and handlers/ with a settings table (src/settings.ts), by name. */
function packagesWithSettings() {
  return ["plugins", "handlers"].flatMap((dir) =>
    readdirSync(path.join(root, dir))
      .filter((name) => existsSync(path.join(root, dir, name, "src", "settings.ts")))
      .map((name) => JSON.parse(readFileSync(path.join(root, dir, name, "package.json"), "utf8")).name)
      .sort(),
  );
}

const cell = (text) => String(text).replace(/\|/g, "\\|").replace(/\n/g, " ");
const code = (text) => (text === undefined || text === "" ? "" : `\`${text.replace(/`/g, "'")}\``);
const anchor = (title) => title.toLowerCase().replace(/[^a-z0-9_ -]/g, "").replace(/ /g, "-");

/** One table's section. */
function section(table) {
  const lines = [`## ${table.title}`, ""];
  if (table.intro) lines.push(table.intro, "");
  lines.push("| Setting | Environment | Type | Default | Meaning |", "|---|---|---|---|---|");
  for (const row of table.rows()) {
    const env = row.env ? row.env.split(", ").map(code).join(", ") : "";
    const meaning = row.constraints ? `${row.doc} (${row.constraints})` : row.doc;
    lines.push(`| ${code(row.path)} | ${env} | ${cell(row.type)} | ${row.default === undefined ? "" : code(row.default)} | ${cell(meaning)} |`);
  }
  return lines.join("\n");
}

export default async function configurationPage() {
  const core = await import("@nodefabric/core");
  const tables = [core.FABRIC_SETTINGS, core.ENVIRONMENT_SETTINGS];
  for (const name of packagesWithSettings()) {
    const mod = await import(name);
    tables.push(...Object.values(mod).filter(isTable));
  }
  return [
    "# Configuration reference",
    "",
    "Every setting of the fabric and of each package that has its own, generated from their settings tables. Where",
    "settings come from (defaults, then `fabric.config.json`, then these environment variables, then flags) and which",
    "to reach for first: [Configure a fabric](configure.md). A dotted setting is a key of `fabric.config.json`",
    "(`executor.egress.allow_cidrs` is `{ \"executor\": { \"egress\": { \"allow_cidrs\": […] } } }`); a list is",
    "comma-separated in the environment; `<NAME>` is a name you choose.",
    "",
    ...tables.map((t) => `- [${t.title}](#${anchor(t.title)})`),
    "",
    tables.map(section).join("\n\n"),
    "",
  ].join("\n");
}
