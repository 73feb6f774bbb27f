export declare const repo: string;
export declare const TCK_COMMIT: string;
export declare const TCK_ARCHIVE: string;
export declare const PYTHON: string;
export declare const DEBIAN_PACKAGES: string[];

export type TckCategory = "mandatory" | "capabilities" | "transport-equivalence" | "quality" | "features";
export declare const CATEGORIES: Record<TckCategory, { path: string; markers?: string }>;

export interface Exec {
  code: number | null;
  stdout: string;
  stderr: string;
}
export declare function exec(cmd: string, args: string[], options?: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<Exec>;

/** Why the TCK cannot run here, with the apt command that fixes it, or undefined. */
export declare function pythonProblem(): Promise<string | undefined>;
export declare function unpackTck(): Promise<{ root: string; remove(): void }>;

export type TckOutcome = "passed" | "failed" | "error" | "skipped" | "xfailed";
export interface TckResult {
  /** pytest's node id, e.g. tests/mandatory/protocol/test_tasks_get_method.py::test_tasks_get_valid. */
  id: string;
  outcome: TckOutcome;
  message: string;
  time: number;
}
export declare function nodeId(classname: string, name: string): string;
export declare function parseJUnit(xml: string): Map<string, TckResult>;
export declare function summaryCounts(stdout: string): Partial<Record<"passed" | "failed" | "skipped" | "error" | "xfailed" | "xpassed" | "deselected", number>>;

export interface TckRun extends Exec {
  category: TckCategory;
  command: string;
  results: Map<string, TckResult>;
  counts: ReturnType<typeof summaryCounts>;
}
export declare function runTck(
  tck: string,
  url: string,
  category: TckCategory,
  options?: { env?: NodeJS.ProcessEnv; timeoutMs?: number; pytestArgs?: string[] },
): Promise<TckRun>;
