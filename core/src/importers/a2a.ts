/**
 * The A2A importer as `fabric node-types import --from-a2a` uses it: @nodefabric/importer-a2a, loaded when asked for.
 * It brings the A2A client SDK with it; core depends on neither.
 */
import type { NodeType } from "@nodefabric/schemas";
import { loadImporter, type ImporterPackage } from "./load-importer.js";

/** The package that holds the A2A importer. */
export const A2A_IMPORTER: ImporterPackage = { name: "@nodefabric/importer-a2a", imports: "an A2A agent", runBy: "a2a.send of @nodefabric/handler-a2a" };

/** What `importA2aAgent` gives (A2aImport of @nodefabric/importer-a2a), as far as the command reads it. */
export interface A2aImportResult {
  agent: { name: string; version: string; card_url: string; protocol_version?: string; streaming: boolean };
  nodeTypes: NodeType[];
  leftOut: Array<{ skill: string; reason: string }>;
  notes: string[];
  card: Record<string, unknown>;
  secrets: string[];
}

/** The importer's functions this fabric uses. */
export interface A2aImporter {
  parseCardUrl(text: string): string;
  parseHeader(text: string): { name: string; value?: string; secret?: string; prefix?: string };
  importA2aAgent(cardUrl: string, options: Record<string, unknown>): Promise<A2aImportResult>;
  A2aImportError: new (message: string) => Error;
}

/** Loads the A2A importer (see loadImporter). */
export function loadA2aImporter(cwd?: string): Promise<A2aImporter> {
  return loadImporter<A2aImporter>(A2A_IMPORTER, cwd);
}
