/**
 * SQLite for the fabric a release test installs. Node 22.13 and later have `node:sqlite`, which the embedded store
 * uses. Older Node needs better-sqlite3, a native module: offered here as a local prebuild of this repository's own
 * copy, so each install in a test does not compile it again (about 2 min).
 */
import { execFile } from "node:child_process";
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { promisify } from "node:util";
import { repo } from "./local-registry.mjs";
import { nodeHasSqlite } from "../../core/src/store/sqlite-driver.js";

const run = promisify(execFile);

/**
 * Packs this repository's better-sqlite3 build as the prebuild its installer looks for first
 * (`<name>-v<version>-node-v<abi>-<platform>-<arch>.tar.gz` in `npm_config_better_sqlite3_local_prebuilds`), and
 * returns the environment that points at it. Nothing when this Node has node:sqlite or the module is not built.
 */
export async function localBetterSqlitePrebuild(dir: string): Promise<NodeJS.ProcessEnv> {
  if (nodeHasSqlite()) return {};
  const require = createRequire(path.join(repo, "package.json"));
  let sqliteDir: string;
  try {
    sqliteDir = path.dirname(require.resolve("better-sqlite3/package.json"));
  } catch {
    return {};
  }
  mkdirSync(dir, { recursive: true });
  const version = (require("better-sqlite3/package.json") as { version: string }).version;
  const tarball = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  await run("tar", ["czf", path.join(dir, tarball), "-C", sqliteDir, "build/Release/better_sqlite3.node"]);
  return { npm_config_better_sqlite3_local_prebuilds: dir };
}
