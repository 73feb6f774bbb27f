/**
 * `npm create fabric-handler -- --from-a2a <card URL>`: a package made from a real A2A agent (built with @a2a-js/sdk's
 * server, on loopback), whose own tests (replaying the recorded card and answers against a stand-in agent) pass as
 * generated, offline; and the command's flags.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCreateCommand } from "../src/create-command.js";
import { renderA2aPackage } from "../src/a2a-package.js";
import { parseCliArguments } from "../src/cli-arguments.js";
import { linkGeneratedPackage } from "./generated-package-runner.js";
import { startA2aAgent } from "../../../handlers/a2a/test/a2a-agent.mjs";

let agent: Awaited<ReturnType<typeof startA2aAgent>>;
const root = mkdtempSync(path.join(os.tmpdir(), "cfh-a2a-"));

beforeAll(async () => {
  agent = await startA2aAgent();
});
afterAll(async () => {
  await agent?.close();
  rmSync(root, { recursive: true, force: true });
});

describe("a package made from an A2A agent", () => {
  it("holds one node type per skill as data, and its own tests pass as generated", async () => {
    const made = await renderA2aPackage({ packageName: "test-agent-skills", source: agent.cardUrl, include: ["echo", "text-only", "slow"] });
    const paths = made.files.map((f) => f.path);
    expect(paths).toEqual(expect.arrayContaining(["package.json", "src/index.ts", "node-types/index.json", "node-types/echo.json", "test/exchanges.json", "test/handler.test.ts", "README.md", "tsconfig.json"]));
    expect(made.nodeTypeIds).toEqual(["test-agent-skills.echo", "test-agent-skills.slow", "test-agent-skills.text-only"]);
    const manifest = JSON.parse(made.files.find((f) => f.path === "package.json")!.content);
    expect(manifest.dependencies).toEqual({ "@nodefabric/handler-a2a": "^0.1.0" });
    expect(manifest.devDependencies).toMatchObject({ "@a2a-js/sdk": "^1.3.0", express: "^5.1.0" });
    const echo = JSON.parse(made.files.find((f) => f.path === "node-types/echo.json")!.content);
    expect(echo.extensions["nodefabric.a2a"]).toMatchObject({ card_url: agent.cardUrl, skill: "echo", skill_hash: expect.stringMatching(/^sha256:/) });
    expect(echo.extensions["nodefabric.implementation"]).toBeUndefined();
    expect(made.files.find((f) => f.path === "src/index.ts")!.content).toContain("a2aSkillHandler");

    const before = agent.state.messages.length;
    const pkg = linkGeneratedPackage(made.files);
    try {
      const tested = await pkg.test();
      expect(tested.code, tested.output).toBe(0);
      // One replay per skill, and the two checks of what the agent may do wrong (a changed skill, a failed task).
      expect(tested.output).toMatch(new RegExp(`Tests\\s+${made.nodeTypeIds.length + 2} passed`));
    } finally {
      pkg.remove();
    }
    // The real agent was only read (its card), never sent sample inputs.
    expect(agent.state.messages.length).toBe(before);
  }, 120_000);
});

describe("create-fabric-handler --from-a2a", () => {
  it("writes the package and says what to do next", async () => {
    const cwd = mkdtempSync(path.join(root, "cli-"));
    let stdout = "";
    let stderr = "";
    const code = await runCreateCommand(["agent-skills", "--from-a2a", agent.url, "--include", "echo", "--yes"], {
      cwd,
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: (t: string) => (stderr += t) },
      interactive: false,
    });
    expect(code, stderr).toBe(0);
    expect(stdout).toContain("Created agent-skills");
    expect(stdout).toContain("agent-skills.echo@1.0.0");
    expect(readdirSync(path.join(cwd, "agent-skills", "node-types")).sort()).toEqual(["echo.json", "index.json"]);
    expect(JSON.parse(readFileSync(path.join(cwd, "agent-skills", "package.json"), "utf8")).dependencies).toEqual({ "@nodefabric/handler-a2a": "^0.1.0" });
  }, 60_000);

  it("refuses --from-a2a with another source or a template", () => {
    expect(() => parseCliArguments(["x", "--from-a2a", agent.url, "--from-mcp", "http://127.0.0.1:1/mcp"])).toThrow(/give one of --from-openapi, --from-mcp and --from-a2a/);
    expect(() => parseCliArguments(["x", "--from-a2a", agent.url, "--template", "atomic"])).toThrow(/drop --template atomic/);
    expect(parseCliArguments(["x", "--from-a2a", agent.url, "--header", "X-Team: blue"])).toMatchObject({ fromA2a: agent.url, headers: ["X-Team: blue"] });
  });
});
