import { defineConfig } from "tsup";

// The importers (@nodefabric/importer-openapi, @nodefabric/importer-mcp, @nodefabric/importer-a2a) and the SDK are bundled in, so `npm create
// fabric-handler` installs no fabric (no SQLite build): only the importers' own dependencies, listed in package.json.
export default defineConfig({
  entry: { index: "src/index.ts", cli: "src/cli.ts" },
  format: ["esm"],
  target: "node20",
  platform: "node",
  noExternal: [/^@nodefabric\//],
  dts: { entry: { index: "src/index.ts" }, resolve: [/^@nodefabric\//] },
  sourcemap: true,
  clean: true,
});
