/**
 * The `http` template: one endpoint of a configurable base URL, described as a one-operation OpenAPI document so the
 * template is exactly what `--from-openapi` makes for one operation.
 */
import type { OpenApiDocument } from "@nodefabric/importer-openapi";

/** `GET /items/{itemId}` of an example items API, answering one item as a JSON object. */
export const HTTP_TEMPLATE_DOCUMENT: OpenApiDocument = {
  openapi: "3.0.3",
  info: { title: "Items API", version: "1.0.0" },
  servers: [{ url: "https://api.example.com/v1" }],
  paths: {
    "/items/{itemId}": {
      get: {
        operationId: "getItem",
        summary: "One item, by id",
        parameters: [
          { name: "itemId", in: "path", required: true, description: "The item's id.", schema: { type: "string", example: "item-42" } },
          {
            name: "fields",
            in: "query",
            required: false,
            description: "Which fields to answer (all when absent).",
            schema: { type: "array", items: { type: "string", enum: ["name", "price", "updated_at"] } },
          },
        ],
        responses: {
          "200": {
            description: "The item.",
            content: {
              "application/json": {
                schema: {
                  type: "object",
                  required: ["id"],
                  properties: {
                    id: { type: "string", example: "item-42" },
                    name: { type: "string", example: "Blue mug" },
                    price: { type: "number", minimum: 0, example: 12.5 },
                    updated_at: { type: "string", format: "date-time" },
                  },
                },
              },
            },
          },
          "404": { description: "No item has this id." },
        },
      },
    },
  },
};
