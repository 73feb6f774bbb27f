import { defineConfig } from "vitest/config";
import { fileURLToPath } from "node:url";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  resolve: {
    alias: [
      { find: /^@nodefabric\/schemas$/, replacement: here("./schemas/src/index.ts") },
      { find: /^@nodefabric\/sdk$/, replacement: here("./sdk/src/index.ts") },
      { find: /^@nodefabric\/sdk\/testing$/, replacement: here("./sdk/src/testing/index.ts") },
      { find: /^@nodefabric\/sdk\/runtime$/, replacement: here("./sdk/src/runtime/index.ts") },
      { find: /^@nodefabric\/core\/sdk$/, replacement: here("./core/src/sdk/index.ts") },
      { find: /^@nodefabric\/core\/testing$/, replacement: here("./core/src/testing/index.ts") },
      { find: /^@nodefabric\/core\/openapi$/, replacement: here("./core/src/openapi/index.ts") },
      { find: /^@nodefabric\/core$/, replacement: here("./core/src/index.ts") },
    ],
  },
  test: {
    include: ["test/**/*.test.ts", "sdk/test/**/*.test.ts", "core/test/**/*.test.ts", "handlers/*/test/**/*.test.ts", "plugins/*/test/**/*.test.ts", "templates/*/test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
  },
});
