import pkg from "../package.json" with { type: "json" };

/** The version of @nodefabric/sdk (the same as every NodeFabric package's). */
export const PACKAGE_VERSION: string = pkg.version;
