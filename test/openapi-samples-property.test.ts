/**
 * The samples the scaffolder writes are ones the runtime accepts, on a representative part of the corpus (every AWS
 * description, header-heavy and cookie-parameter APIs, Swagger 2.0 and OpenAPI 3.1, small documents of each kind):
 * for every operation, the generated test's sample inputs validate against the node type's input_schema and
 * `buildOperationRequest` builds a request from them. test/e2e/openapi-samples-property.test.ts checks every document.
 */
import { describe, expect, it } from "vitest";
import { mapOpenApi, type OpenApiDocument } from "@nodefabric/importer-openapi";
import { checkDocument, checkMapping, corpus, UNSATISFIABLE } from "./openapi-samples-property.js";

const REPRESENTATIVE = [
  "petstore-v3.yaml",
  "petstore-v2.json",
  "hcp-packer.json",
  "scalar-galaxy.yaml",
  "open-payments-resource-server.yaml",
  "open-payments-auth-server.yaml",
  "uspto.json",
  "intellifi-brain.json",
  "mineskin.json",
  "swiss-nextgen-banking.json",
  "google-cloudscheduler.json",
  "aws-autoscaling-plans.json",
  "aws-sqs.json",
  "aws-entityresolution.json",
  "aws-networkmanager.json",
  "aws-ebs.json",
];

describe("the property check", () => {
  // The bug it was written for: an AWS path parameter whose schema allows "" (minLength 0, a pattern with `*`).
  const document = {
    openapi: "3.0.0",
    info: { title: "Workflows", version: "1" },
    servers: [{ url: "https://workflows.example.com" }],
    paths: {
      "/matchingworkflows/{workflowName}": {
        get: {
          operationId: "GetMatchingWorkflow",
          parameters: [
            { name: "workflowName", in: "path", required: true, schema: { $ref: "#/components/schemas/EntityName" } },
            { name: "X-Trace", in: "header", schema: { type: "string" } },
          ],
          responses: { "200": { description: "ok" } },
        },
      },
    },
    components: { schemas: { EntityName: { type: "string", pattern: "^[a-zA-Z_0-9-]*$", minLength: 0, maxLength: 255 } } },
  } as unknown as OpenApiDocument;

  it("passes the operation as mapped", async () => {
    const check = await checkMapping("workflows.json", mapOpenApi(document, { prefix: "wf", settingsPrefix: "WF" }));
    expect(check).toEqual({ file: "workflows.json", checked: 1, failures: [], unsampled: {} });
  });

  it("names the document, the operation and the parameter when the schema lacks what the runtime checks", async () => {
    const mapping = mapOpenApi(document, { prefix: "wf", settingsPrefix: "WF" });
    const properties = (mapping.operations[0]!.nodeType.input_schema as { properties: Record<string, Record<string, unknown>> }).properties;
    // As the mapper wrote it before the runtime's rules were in the schema.
    properties.workflowName = { $ref: "#/$defs/EntityName" };
    const check = await checkMapping("workflows.json", mapping);
    expect(check.failures).toEqual([
      'workflows.json GET /matchingworkflows/{workflowName} (GetMatchingWorkflow, wf.GetMatchingWorkflow): the path parameter workflowName has the sample "", and the runtime refuses the request: the path parameter workflowName of GetMatchingWorkflow cannot be empty',
    ]);
  });
});

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
