/**
 * The samples the scaffolder writes are ones the runtime accepts, on every document of test/fixtures/openapi: for
 * every operation, the sample inputs of its generated test (the scaffolder's generator and seed) validate against the
 * node type's input_schema and `buildOperationRequest` builds a request from them. A failure names the document, the
 * operation and the parameter. (test/openapi-samples-property.test.ts checks a representative part in `npm test`.)
 */
import { afterAll, describe, expect, it } from "vitest";
import { checkDocument, corpus, UNSATISFIABLE } from "../openapi-samples-property.js";

let checked = 0;

afterAll(() => {
  // The closing figure: how many operations the property held for.
  console.log(`openapi samples property: ${checked} operations of ${corpus.length} documents checked`);
});

describe("sample inputs of generated tests, on the whole corpus", () => {
  for (const entry of corpus) {
    it(`${entry.file}: every operation's samples validate against its input_schema and pass buildOperationRequest`, { timeout: 120_000 }, async () => {
      const check = await checkDocument(entry);
      checked += check.checked;
      expect(check.checked).toBeGreaterThan(0);
      expect(check.failures).toEqual([]);
      // An operation with no sample at all is one whose schema no value satisfies, and only the known ones.
      expect(check.unsampled).toEqual(Object.fromEntries(Object.keys(UNSATISFIABLE[entry.file] ?? {}).map((id) => [id, expect.any(String)])));
    });
  }
});
