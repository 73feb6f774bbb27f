/**
 * Loads an importer package when a command asks for it. Core depends on none of them: a fabric that imports nothing
 * installs none of their weight (an OpenAPI parser, the MCP client). Each importer is tried where this fabric is
 * installed, then in `cwd`'s node_modules (a project that installed it beside `npx fabric`).
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

/** The importer a command needs is not installed where it runs. */
export class ImporterMissingError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ImporterMissingError";
  }
}

/** What `loadImporter` needs to know of one importer package. */
export interface ImporterPackage {
  /** The npm package, such as `@nodefabric/importer-openapi`. */
  name: string;
  /** What it imports, for the message when it is missing (`an OpenAPI document`). */
  imports: string;
  /** The handler package that runs what it makes, for the same message. */
  runBy: string;
}

/** Loads the importer package's main entry: from where this fabric is installed, else from `cwd`'s node_modules. */
export async function loadImporter<T>(importer: ImporterPackage, cwd: string = process.cwd()): Promise<T> {
  try {
    // A specifier held in a variable: the bundler leaves it to Node, so core's build never takes the importer in.
    const specifier = importer.name;
    return (await import(specifier)) as T;
  } catch (first) {
    const dir = path.join(cwd, "node_modules", ...importer.name.split("/"));
    const manifest = path.join(dir, "package.json");
    if (existsSync(manifest)) {
      const pkg = JSON.parse(readFileSync(manifest, "utf8")) as { exports?: Record<string, { import?: string } | string> };
      const entry = pkg.exports?.["."];
      const file = typeof entry === "string" ? entry : entry?.import;
      if (file) return (await import(pathToFileURL(path.join(dir, file)).href)) as T;
    }
    throw new ImporterMissingError(
      `importing ${importer.imports} needs ${importer.name} (the importer; ${importer.runBy} runs the node types it makes): npm install ${importer.name}`,
      { cause: first },
    );
  }
}
