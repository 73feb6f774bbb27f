#!/usr/bin/env node
// The `fabric` command. A committed shim, so npm links it at install time, before the first build.
import("../dist/cli/main.js").catch((err) => {
  if (err && err.code === "ERR_MODULE_NOT_FOUND" && String(err.message).includes("dist/cli/main.js")) {
    process.stderr.write("fabric: @nodefabric/core is not built yet; run `npm run build` first\n");
    process.exit(1);
  }
  throw err;
});
