/**
 * `fabric postgres migrate`, as an operator runs it: the built `fabric` CLI in this repository, which discovers the
 * plugin in node_modules, against the real PostgreSQL server. Needs `npm run build` (as `npm test` does).
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { MIGRATIONS } from "../src/migrations.js";
import { migrate } from "../src/pg-migrate.js";
import { EARLIER_MIGRATIONS, earlierAnnounce } from "./support/earlier-release.js";

const PG_URL = process.env.FABRIC_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const VERSIONS = MIGRATIONS.map((m) => m.version);
const LAST = VERSIONS.at(-1)!;
const repo = fileURLToPath(new URL("../../..", import.meta.url));
const cli = fileURLToPath(new URL("../../../core/dist/cli/main.js", import.meta.url));
const schema = `nf_cli_${randomBytes(6).toString("hex")}`;
const admin = new pg.Pool({ connectionString: PG_URL, max: 1 });

afterAll(async () => {
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await admin.end();
});

function fabric(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cli, ...args], { cwd: repo, env: { ...process.env, FABRIC_STORE_URL: "", ...env } }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe("fabric postgres migrate", () => {
  it("is a fabric command once the plugin is installed, and loads without a warning", async () => {
    const help = await fabric(["--help"]);
    expect(help.stdout).toMatch(/^\s+postgres\b/m);
    expect(help.stderr).not.toMatch(/plugin-postgres/);
  });

  it("applies the migrations once, then has nothing to apply", async () => {
    const first = await fabric(["postgres", "migrate", "--store", PG_URL, "--schema", schema]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(new RegExp(`\\(schema ${schema}\\): applied ${VERSIONS.join(", ")}; now at version ${LAST}`));
    const { rows } = await admin.query(`SELECT version FROM ${schema}.nodefabric_migrations ORDER BY version`);
    expect(rows.map((r) => r.version)).toEqual(VERSIONS);

    const again = await fabric(["postgres", "migrate", "--schema", schema], { FABRIC_STORE_URL: PG_URL });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(new RegExp(`is at version ${LAST}: nothing to apply`));
  });

  it("takes the schema from the store URL's ?schema=, as the stores do", async () => {
    const other = `${schema}_url`;
    try {
      const url = `${PG_URL}${PG_URL.includes("?") ? "&" : "?"}schema=${other}`;
      const res = await fabric(["postgres", "migrate", "--store", url]);
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).toMatch(new RegExp(`\\(schema ${other}\\): applied ${VERSIONS.join(", ")}; now at version ${LAST}`));
      const { rows } = await admin.query(`SELECT version FROM ${other}.nodefabric_migrations ORDER BY version`);
      expect(rows.map((r) => r.version)).toEqual(VERSIONS);
      const bad = await fabric(["postgres", "migrate", "--store", `${PG_URL}?schema=no-such;thing`]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/not a plain identifier/);
    } finally {
      await admin.query(`DROP SCHEMA IF EXISTS ${other} CASCADE`);
    }
  });

  it("refuses a missing or foreign URL (exit 2), and names an unreachable server with its password hidden (exit 1)", async () => {
    const none = await fabric(["postgres", "migrate"]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/give the database with --store postgres:\/\/… or FABRIC_STORE_URL/);

    const foreign = await fabric(["postgres", "migrate", "--store", "mysql://db.example/x"]);
    expect(foreign.code).toBe(2);
    expect(foreign.stderr).toMatch(/is not a postgres:\/\/ or postgresql:\/\/ URL/);

    const down = await fabric(["postgres", "migrate", "--store", "postgres://postgres:s3cret@127.0.0.1:1/test"]);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/test: connect ECONNREFUSED/);
    expect(down.stderr).not.toContain("s3cret");
  });

  it("leaves grouped event rows to --enable on a database in use, refusing while a coordinator of the earlier release is live (exit 2)", async () => {
    const used = `${schema}_used`;
    const pool = new pg.Pool({ connectionString: PG_URL, max: 1, options: `-c search_path=${used}` });
    try {
      await migrate(pool, { schema: used, migrations: EARLIER_MIGRATIONS });
      const waits = await fabric(["postgres", "migrate", "--store", PG_URL, "--schema", used]);
      expect(waits.code, waits.stderr).toBe(0);
      expect(waits.stdout).toContain(`is at version 3: nothing to apply\n`);
      expect(waits.stdout).toContain(
        "migration 4 (the events of a transaction in one row) waits to be enabled: once every coordinator on this database runs this release, " +
          "run fabric postgres migrate --enable grouped-events\n",
      );

      const unknown = await fabric(["postgres", "migrate", "--store", PG_URL, "--schema", used, "--enable", "grouped-event"]);
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toContain('no migration of this release is enabled as "grouped-event" (it knows grouped-events)');

      await earlierAnnounce(pool, "coordinator-earlier", 60_000);
      const refused = await fabric(["postgres", "migrate", "--store", PG_URL, "--schema", used, "--enable", "grouped-events"]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain("these live coordinators run an earlier release: coordinator-earlier");

      await pool.query(`UPDATE coordinators SET expires_at = now() - interval '1 second'`);
      const enabled = await fabric(["postgres", "migrate", "--store", PG_URL, "--schema", used, "--enable", "grouped-events"]);
      expect(enabled.code, enabled.stderr).toBe(0);
      expect(enabled.stdout).toMatch(new RegExp(`\\(schema ${used}\\): applied 4; now at version 4\n$`));
    } finally {
      await pool.end();
      await admin.query(`DROP SCHEMA IF EXISTS ${used} CASCADE`);
    }
  });
});
