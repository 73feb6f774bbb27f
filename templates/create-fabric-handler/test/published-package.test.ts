import { describe, it, expect } from "vitest";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

// What `npm create fabric-handler` installs is this package alone: it bundles the importers (@nodefabric/importer-openapi
// and @nodefabric/importer-mcp, with their types), so neither its code nor its published types may reach for @nodefabric/core, which would install the fabric.
const root = fileURLToPath(new URL("..", import.meta.url));
const dist = path.join(root, "dist");

describe("the published create-fabric-handler", () => {
  it("neither imports nor depends on @nodefabric/core, in its code or its types", () => {
    if (!existsSync(path.join(dist, "index.d.ts"))) throw new Error("create-fabric-handler is not built: run `npm run build -w create-fabric-handler` first");
    const files = readdirSync(dist).filter((f) => f.endsWith(".js") || f.endsWith(".d.ts"));
    expect(files).toContain("index.d.ts");
    // Real imports start a line; the generated packages' sources are template strings whose lines import @nodefabric/sdk.
    const importsOfCore = files.flatMap((f) =>
      [...readFileSync(path.join(dist, f), "utf8").matchAll(/^(?:import|export)\b[^;]*?from\s+["'](@nodefabric\/core[^"']*)["']/gm)].map((m) => `${f}: ${m[1]}`),
    );
    expect(importsOfCore).toEqual([]);
    expect(readFileSync(path.join(dist, "index.d.ts"), "utf8")).toMatch(/interface OpenApiMapping/);
    const manifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { dependencies: Record<string, string>; peerDependencies?: Record<string, string> };
    expect(Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies })).not.toContain("@nodefabric/core");
  });
});
