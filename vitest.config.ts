import { configDefaults, defineConfig } from "vitest/config";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

/**
 * The suites (docs/testing.md says which to run when, and the per-file budgets):
 * - `unit` (`npm test`): every unit and integration test on loopback, with real servers, real SQLite and real
 *   PostgreSQL. Files share their worker's module cache (isolate: false), so core, fastify and ajv are loaded and a
 *   fabric's lazy parts compiled once per worker, not once per file.
 * - `unit-isolated` (`npm test` too): the files that change what the whole process shares (undici's global dispatcher,
 *   nock, OpenTelemetry's globals, process.env, the working folder, module mocks), each in a fresh module graph.
 * - `e2e` (`npm run test:e2e`): what installs from a registry, runs `npm install`, drives a browser, builds another
 *   checkout, or runs a third-party tool on a fetched Node (test/e2e/**), and what runs the built `fabric` command in
 *   child processes as a user does (test/cli/**, and the PostgreSQL plugin's CLI file): processes that start, get
 *   killed and restart take most of a loaded machine's minutes, so the loop before a commit leaves them to this suite.
 * - `runtime`: the files whose behaviour depends on the Node version (SQLite drivers, packaging, installs) and one
 *   end-to-end run of each service; .ci/run runs them on the second Node version (see .ci/run).
 */
const UNIT = [
  "test/**/*.test.ts",
  "sdk/test/**/*.test.ts",
  "core/test/**/*.test.ts",
  "handlers/*/test/**/*.test.ts",
  "plugins/*/test/**/*.test.ts",
  "templates/*/test/**/*.test.ts",
  "importers/*/test/**/*.test.ts",
];
const E2E = ["test/e2e/**/*.test.ts", "test/cli/**/*.test.ts", "plugins/postgres/test/cli.test.ts"];

/** Files that change process-wide state another file in the same worker would see. */
export const ISOLATED = [
  "core/test/http-operation.test.ts",
  "core/test/openapi-docs.test.ts",
  "core/test/sqlite-driver.test.ts",
  "core/test/testing-fabric-fixture.test.ts",
  "core/test/testing-run-handler.test.ts",
  "handlers/http/test/openapi-mode.test.ts",
  // They set FABRIC_MCP_SERVERS and start the operator's stdio servers, a pool the module keeps.
  "handlers/mcp/test/mcp-stdio.test.ts",
  "handlers/mcp/test/mcp-reference-servers.test.ts",
  "handlers/mcp/test/mcp-stdio-config.test.ts",
  // They set FABRIC_LLM_* for the fabric they start (llm.chat reads its endpoint from the environment).
  "handlers/llm/test/chat.test.ts",
  "handlers/llm/test/chat-stream.test.ts",
  "plugins/mcp/test/progress-llm-text.test.ts",
  "handlers/llm/test/planner.test.ts",
  "handlers/llm/test/planner-policy.test.ts",
  "handlers/llm/test/agent.test.ts",
  "handlers/llm/test/agent-policy.test.ts",
  "handlers/llm/test/agent-mcp.test.ts",
  "handlers/llm/test/scripted.test.ts",
  "handlers/llm/test/run-budgets.test.ts",
  "handlers/llm/test/agent-budgets.test.ts",
  "handlers/llm/test/a2a.test.ts",
  "plugins/telemetry/test/**/*.test.ts",
  "sdk/test/**/*.test.ts",
  "templates/*/test/**/*.test.ts",
];

/** Depends on the Node version: run on the second Node in CI too. */
export const RUNTIME = [
  "core/test/sqlite-driver.test.ts",
  "core/test/*-sqlite.test.ts",
  "core/test/store/**/*.test.ts",
  "core/test/handler-loading.test.ts",
  "core/test/handler-discovery.test.ts",
  "test/package-contents.test.ts",
  "sdk/test/light.test.ts",
  "test/e2e/sqlite-driver-choice.test.ts",
  "test/cli/fabric-split.test.ts",
  "test/cli/fabric-dev.test.ts",
];

export default defineConfig({
  resolve: {
    alias: [
      { find: /^@nodefabric\/schemas$/, replacement: here("./schemas/src/index.ts") },
      { find: /^@nodefabric\/sdk$/, replacement: here("./sdk/src/index.ts") },
      { find: /^@nodefabric\/sdk\/testing$/, replacement: here("./sdk/src/testing/index.ts") },
      { find: /^@nodefabric\/sdk\/runtime$/, replacement: here("./sdk/src/runtime/index.ts") },
      { find: /^@nodefabric\/sdk\/samples$/, replacement: here("./sdk/src/samples/index.ts") },
      { find: /^@nodefabric\/core\/sdk$/, replacement: here("./core/src/sdk/index.ts") },
      { find: /^@nodefabric\/core\/testing$/, replacement: here("./core/src/testing/index.ts") },
      { find: /^@nodefabric\/core$/, replacement: here("./core/src/index.ts") },
      { find: /^@nodefabric\/handler-mcp$/, replacement: here("./handlers/mcp/src/index.ts") },
      { find: /^@nodefabric\/importer-openapi$/, replacement: here("./importers/openapi/src/index.ts") },
      { find: /^@nodefabric\/importer-mcp$/, replacement: here("./importers/mcp/src/index.ts") },
    ],
  },
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    // Most files wait on sockets, timers and child processes more than they compute: one worker per core, and at
    // least three, keeps the cores busy (vitest's default, one less than the cores, runs a 2-core machine's files one
    // at a time). docs/testing.md has the measurements.
    maxWorkers: Math.max(3, availableParallelism()),
    setupFiles: [here("./test/support/setup-ledger.ts")],
    projects: [
      { extends: true, test: { name: "unit", include: UNIT, exclude: [...configDefaults.exclude, ...E2E, ...ISOLATED], isolate: false } },
      { extends: true, test: { name: "unit-isolated", include: ISOLATED, exclude: [...configDefaults.exclude, ...E2E] } },
      { extends: true, test: { name: "e2e", include: E2E, testTimeout: 120_000, hookTimeout: 300_000 } },
      { extends: true, test: { name: "runtime", include: RUNTIME } },
    ],
  },
});
