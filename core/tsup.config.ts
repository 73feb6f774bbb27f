import { copyFileSync } from "node:fs";
import { defineConfig } from "tsup";

export default defineConfig({
  entry: {
    index: "src/index.ts",
    "sdk/index": "src/sdk/index.ts",
    "testing/index": "src/testing/index.ts",
    "cli/main": "src/cli/main.ts",
    // The program without running it: scripts/docs/cli.mjs builds docs/cli.md from it.
    "cli/program": "src/cli/program.ts",
  },
  format: ["esm"],
  target: "node20",
  platform: "node",
  dts: { entry: { index: "src/index.ts", "sdk/index": "src/sdk/index.ts", "testing/index": "src/testing/index.ts" } },
  sourcemap: true,
  clean: true,
  splitting: true,
  shims: false,
  // The SQLite writer thread's script is loaded from disk by path (new URL("./sqlite-writer.mjs", import.meta.url) in
  // the chunk that starts it), so it ships as it is, beside the chunks.
  onSuccess: async () => copyFileSync("src/store/sqlite-writer.mjs", "dist/sqlite-writer.mjs"),
});
