/**
 * The package.json of a generated handler package.
 */

import { SDK_VERSION } from "@nodefabric/sdk";

/**
 * The @nodefabric/sdk range of the release this scaffolder ships with: its version is read from the SDK at build time
 * (the SDK is bundled in), so a release never scaffolds against an older SDK. On 0.x a minor is a breaking change for
 * executors, so the caret range is the compatible one.
 */
export const DEFAULT_SDK_SPEC = `^${SDK_VERSION}`;

/** The tool versions generated packages are built and tested with (all work on Node 20). */
export const TOOL_VERSIONS = {
  "@types/node": "^20.19.0",
  nock: "^14.0.0",
  tsup: "^8.5.0",
  typescript: "~5.9.3",
  vitest: "^4.0.0",
} as const;

/** What package.json is made from. */
export interface PackageManifestOptions {
  packageName: string;
  description: string;
  /** The spec of @nodefabric/sdk for devDependencies (a range, a tag, or `file:…` for a local build). */
  sdkSpec: string;
  /** When given, `overrides["@nodefabric/schemas"]`: how the SDK's own dependency is installed from a local build. */
  schemasSpec?: string;
  /** True for a package whose NodeTypes are JSON files under node-types/ (published beside dist/). */
  shipsNodeTypes?: boolean;
}

/**
 * The package.json object: discoverable by executors (`nodefabric.handlers`, the keyword), publishing only dist/,
 * with @nodefabric/sdk as a peer (the executor's copy serves the package) and as a dev dependency (to build and test).
 * Nothing in it builds native code: the SDK and its test harness are plain JavaScript.
 */
export function packageManifest(options: PackageManifestOptions): Record<string, unknown> {
  return {
    name: options.packageName,
    version: "0.1.0",
    description: options.description,
    type: "module",
    keywords: ["nodefabric-handler"],
    main: "./dist/index.js",
    types: "./dist/index.d.ts",
    exports: {
      ".": { types: "./dist/index.d.ts", import: "./dist/index.js" },
      "./package.json": "./package.json",
    },
    files: options.shipsNodeTypes ? ["dist", "node-types"] : ["dist"],
    nodefabric: { handlers: ["./dist/index.js"] },
    scripts: {
      build: "tsup",
      test: "vitest run",
      typecheck: "tsc --noEmit",
      prepublishOnly: "npm run build",
    },
    engines: { node: ">=20" },
    peerDependencies: { "@nodefabric/sdk": peerSpecOf(options.sdkSpec) },
    devDependencies: sortedKeys({ "@nodefabric/sdk": options.sdkSpec, ...TOOL_VERSIONS }),
    ...(options.schemasSpec === undefined ? {} : { overrides: { "@nodefabric/schemas": options.schemasSpec } }),
    // The one install script of the tree npm may ask to approve: esbuild (of tsup) checks its binary.
    allowScripts: { esbuild: true },
  };
}

/**
 * The peer range: the SDK spec itself when it is a registry range or tag, else (a `file:`, git or URL spec, used to
 * test local builds) the default range, since a published package must not ask its users for a path on this machine.
 */
export function peerSpecOf(sdkSpec: string): string {
  return /^[\w.^~<>=*| -]+$/.test(sdkSpec) && !/^\./.test(sdkSpec) ? sdkSpec : DEFAULT_SDK_SPEC;
}

function sortedKeys(record: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));
}
