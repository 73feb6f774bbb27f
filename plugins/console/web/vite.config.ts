import { defineConfig } from "vite";
import { fileURLToPath } from "node:url";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

/**
 * The console page. It is served by the Run Gateway under /console/ with a strict Content-Security-Policy, so the
 * build emits no inline script or style: every script and stylesheet is a file under /console/assets/ (hashed, cached
 * for good), and the module preload polyfill (an inline helper in some browsers' eyes) is left out.
 */
export default defineConfig({
  root: here("."),
  base: "/console/",
  // Preact through Vite's own JSX transform (automatic runtime): no Babel, no framework plugin needed to build.
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: here("../dist/public"),
    emptyOutDir: true,
    assetsDir: "assets",
    // Nothing is turned into a data: URL except small images (img-src allows data:); fonts stay files.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: "es2022",
  },
  server: {
    // `npm run dev:web -w @nodefabric/plugin-console` next to `fabric dev`: the page's API calls go to the gateway.
    proxy: { "/v1": "http://127.0.0.1:8080", "/console/config.json": "http://127.0.0.1:8080" },
  },
});
