/**
 * Page tokens of GET /v1/node-types: opaque to clients, base64url of the last key of the page, so the
 * next page starts strictly after it however many versions were published in between.
 */
import type { NodeTypeKey } from "../../store/node-type-store.js";
import { versionProblem } from "../../store/node-type-version-order.js";
import { FabricError } from "../../http/errors.js";

/** Encodes the last key of a page. */
export function encodePageToken(key: NodeTypeKey): string {
  return Buffer.from(JSON.stringify([key.node_type_id, key.version]), "utf8").toString("base64url");
}

/** Decodes a page token, or throws 400 invalid_request for anything this service did not issue. */
export function decodePageToken(token: string): NodeTypeKey {
  const bad = () =>
    new FabricError("invalid_request", "page_token is not a token this service issued", {
      details: { errors: [{ path: "/page_token", message: "is not a valid page token" }] },
    });
  if (!/^[A-Za-z0-9_-]+$/.test(token)) throw bad();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
  } catch {
    throw bad();
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 2 ||
    typeof parsed[0] !== "string" ||
    parsed[0] === "" ||
    typeof parsed[1] !== "string" ||
    versionProblem(parsed[1]) !== undefined
  ) {
    throw bad();
  }
  return { node_type_id: parsed[0], version: parsed[1] };
}
