import pkg from "../package.json" with { type: "json" };

/** The version of @nodefabric/core, answered by every service's GET /v1/version. */
export const SERVICE_VERSION: string = pkg.version;
