/** Types of errors.mjs (docs/errors.md, generated from the failure-code blocks). */
export interface FailureCodeSpec {
  meaning: string;
  retryable: boolean | "depends";
  raisedBy: string;
  reserved?: string;
}
export interface LoadedCatalogues {
  blocks: Array<{ package: string; file: string; name: string; codes: Record<string, FailureCodeSpec> }>;
  retired: Record<string, { now: string; wasRaisedBy: string }>;
  requestStatus: Record<string, number>;
  requestMeanings: Record<string, string>;
}
export const PAGE: string;
export function catalogueFiles(root?: string): Array<{ dir: string; file: string; package: string }>;
export function loadCatalogues(root?: string): Promise<LoadedCatalogues>;
export function errorsPage(root?: string): Promise<string>;
export default errorsPage;
