import { defineConfig } from "tsup";

// tsup cleans dist/ first; the page is built after it, into dist/public (see package.json "build").
export default defineConfig({
  entry: { index: "src/index.ts" },
  format: ["esm"],
  target: "node20",
  platform: "node",
  dts: true,
  sourcemap: true,
  clean: true,
});
