import { defineConfig } from "tsup";

const entry = {
  index: "src/index.ts",
  "testing/index": "src/testing/index.ts",
  "runtime/index": "src/runtime/index.ts",
  "samples/index": "src/samples/index.ts",
};

export default defineConfig({
  entry,
  format: ["esm"],
  target: "node20",
  platform: "node",
  dts: { entry },
  sourcemap: true,
  clean: true,
  // Shared chunks: the entry points hold one copy of each module (one HandlerError class, one global-dispatcher state).
  splitting: true,
  shims: false,
});
