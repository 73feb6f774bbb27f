// Types of release-lib.mjs, for the tests that import it.

/** A workspace package as the release reads it. */
export interface WorkspacePackage {
  name: string;
  version: string;
  /** Relative to the repository root, with forward slashes. */
  dir: string;
  private: boolean;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  manifest: Record<string, any>;
}

export interface ReleaseOptions {
  publish: boolean;
  registry: string | undefined;
  tag: string;
  otp: string | undefined;
  skipBuild: boolean;
  skipTests: boolean;
  help: boolean;
}

export declare const DEPENDENCY_FIELDS: string[];
export declare const USAGE: string;
export declare function workspaceDirs(root: string, patterns: unknown): string[];
export declare function readWorkspacePackages(root: string): WorkspacePackage[];
export declare function publicPackages(packages: WorkspacePackage[]): WorkspacePackage[];
export declare function checkVersions(packages: WorkspacePackage[]): { version: string | undefined; problems: string[] };
export declare function internalDependencies(pkg: WorkspacePackage, names: Set<string>): string[];
export declare function publishOrder(packages: WorkspacePackage[]): WorkspacePackage[];
export declare function parseArgs(argv: string[]): ReleaseOptions;
export declare function publishArgs(dir: string, opts: Pick<ReleaseOptions, "publish" | "registry" | "tag" | "otp">): string[];
export declare function classifyView(
  result: { status: number | null; stdout?: string | null; stderr?: string | null },
  version: string,
): { state: "published" | "absent" | "unknown"; reason?: string };
