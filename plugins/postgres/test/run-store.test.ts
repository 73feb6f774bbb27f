/**
 * The RunStore contract (core's suite) against the real PostgreSQL server, each test in a fresh schema.
 */
import { runStoreContract } from "../../../core/test/store/run-store-contract.js";
import { openPgRunStore } from "../src/index.js";
import { dropSchema, newSchema, OPEN_OPTIONS, storeUrl } from "./support/pg.js";

runStoreContract("PostgreSQL", async () => {
  const schema = newSchema();
  return {
    store: await openPgRunStore(storeUrl(schema), OPEN_OPTIONS),
    reopen: () => openPgRunStore(storeUrl(schema), OPEN_OPTIONS),
    cleanup: () => dropSchema(schema),
  };
});
