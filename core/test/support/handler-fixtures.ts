/**
 * What the handler-loading tests share: the fixture packages, a logger that keeps warnings, and project folders whose
 * node_modules link chosen fixture packages the way npm links workspaces.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { LoadedHandlers } from "../../src/services/atomic-executor/handler-loader.js";

/** The folder holding the fixture packages. */
export const fixtures = fileURLToPath(new URL("../fixtures/handler-packages/", import.meta.url));

/** The folder of one fixture package. */
export const fixture = (name: string) => path.join(fixtures, name);

/** A loader logger that keeps the warnings it is given. */
export function quietLogger() {
  const warnings: string[] = [];
  return { warnings, logger: { info: () => undefined, warn: (_obj: object, msg?: string) => void warnings.push(msg ?? "") } };
}

/** The loaded node types as `id@version`, sorted. */
export function ids(h: LoadedHandlers): string[] {
  return h.definitions.map((d) => `${d.definition.nodeType.node_type_id}@${d.definition.nodeType.version}`).sort();
}

/** A project folder whose node_modules links the named fixture packages (name in node_modules → fixture folder). */
export function projectWith(packages: Record<string, string>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "nf-project-"));
  for (const [name, fixtureName] of Object.entries(packages)) {
    const dest = path.join(root, "node_modules", name);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.symlinkSync(fixture(fixtureName), dest, "dir");
  }
  fs.mkdirSync(path.join(root, "node_modules", ".bin"), { recursive: true });
  return root;
}
