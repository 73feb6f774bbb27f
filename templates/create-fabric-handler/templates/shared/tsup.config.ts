import { defineConfig } from "tsup";

// One ESM bundle and its types; @nodefabric/sdk stays external (it is a peer dependency).
export default defineConfig({
  entry: { index: "src/index.ts" },
  format: ["esm"],
  target: "node20",
  platform: "node",
  dts: true,
  sourcemap: true,
  clean: true,
});
