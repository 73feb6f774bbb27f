/**
 * The samples the scaffolder writes are ones the runtime accepts, on a representative part of the corpus (every AWS
 * description, header-heavy and cookie-parameter APIs, Swagger 2.0 and OpenAPI 3.1, small documents of each kind):
 * for every operation, the generated test's sample inputs validate against the node type's input_schema and
 * `buildOperationRequest` builds a request from them. test/e2e/openapi-samples-property.test.ts checks every document.
 */
import { describe, expect, it } from "vitest";
import { checkDocument, corpus, UNSATISFIABLE } from "./openapi-samples-property.js";

const REPRESENTATIVE = [
  "petstore-v3.yaml",
  "petstore-v2.json",
  "hcp-packer.json",
  "scalar-galaxy.yaml",
  "open-payments-resource-server.yaml",
  "open-payments-auth-server.yaml",
  "decentraland-catalyst.yaml",
  "uspto.json",
  "intellifi-brain.json",
  "apideck-vault.json",
  "microcks.json",
  "mineskin.json",
  "swiss-nextgen-banking.json",
  "traccar.json",
  "google-cloudscheduler.json",
  "aws-autoscaling-plans.json",
  "aws-sqs.json",
  "aws-entityresolution.json",
  "aws-networkmanager.json",
  "aws-ebs.json",
];

describe("sample inputs of generated tests, on a representative part of the corpus", () => {
  it("names only documents of the corpus", () => {
    const files = new Set(corpus.map((e) => e.file));
    expect(REPRESENTATIVE.filter((f) => !files.has(f))).toEqual([]);
  });

  for (const file of REPRESENTATIVE) {
    it(`${file}: every operation's samples validate against its input_schema and pass buildOperationRequest`, async () => {
      const entry = corpus.find((e) => e.file === file);
      if (!entry) return;
      const check = await checkDocument(entry);
      expect(check.checked).toBeGreaterThan(0);
      expect(check.failures).toEqual([]);
      expect(Object.keys(check.unsampled).sort()).toEqual(Object.keys(UNSATISFIABLE[file] ?? {}).sort());
    });
  }
});
