/**
 * Where the built page is: dist/public beside this module once built (dist/index.js), or the package's dist/public
 * when this module runs from source (tests).
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

/** The folder holding index.html and assets/, or undefined when the page has not been built. */
export function findPublicDir(): string | undefined {
  for (const dir of [path.join(here, "public"), path.join(here, "..", "dist", "public")]) {
    if (existsSync(path.join(dir, "index.html"))) return dir;
  }
  return undefined;
}
