/**
 * The A2A importer against a real agent built with @a2a-js/sdk's server on loopback: one node type per skill, pinned
 * to the skill's hash, with the schemas a card without any gives; what it leaves out and why; and the node types run
 * through a fabric by a2a.send, failing with skill_definition_changed once the agent changes the skill.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { skillDefinitionHash, DEFAULT_DATA_INPUT_SCHEMA, DEFAULT_OUTPUT_SCHEMA, TEXT_INPUT_SCHEMA } from "@nodefabric/handler-a2a";
import { A2aImportError, importA2aAgent, parseCardUrl, parseHeader } from "../src/index.js";
import { nodeTypesImportA2a } from "../../../core/src/cli/node-types-import-a2a.js";
import { DEFAULT_SKILLS, startA2aAgent } from "../../../handlers/a2a/test/a2a-agent.mjs";
import { errorOf, openFabric, outputsOf, type TestFabric } from "../../../handlers/a2a/test/a2a-fixtures.js";

const EXTRA_SKILLS = [
  { id: "picture", name: "Picture", description: "Looks at a picture", tags: [], examples: [], inputModes: ["image/png"], outputModes: ["text/plain"], securityRequirements: [] },
  { id: "has space", name: "Bad id", description: "An id no node type can have", tags: [], examples: [], inputModes: [], outputModes: [], securityRequirements: [] },
  {
    id: "typed",
    name: "Typed",
    description: "Gives its schemas",
    tags: [],
    examples: [],
    inputModes: ["application/json"],
    outputModes: ["application/json"],
    securityRequirements: [],
    inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    outputSchema: { type: "object", properties: { forecast: { type: "string" } } },
  },
];

let agent: Awaited<ReturnType<typeof startA2aAgent>>;

beforeAll(async () => {
  agent = await startA2aAgent({ skills: [...DEFAULT_SKILLS, ...EXTRA_SKILLS] });
});
afterAll(async () => {
  await agent?.close();
});

describe("importA2aAgent", () => {
  it("makes one node type per skill, run by a2a.send and pinned to the skill's hash", async () => {
    const result = await importA2aAgent(agent.url, { prefix: "test" });
    expect(result.agent).toMatchObject({ name: "Test Agent", version: "1.0.0", card_url: agent.cardUrl, protocol_version: "1.0", streaming: true });
    const ids = result.nodeTypes.map((t) => t.node_type_id);
    expect(ids).toEqual([...DEFAULT_SKILLS.map((s) => `test.${s.id}`), "test.typed"]);
    const echo = result.nodeTypes.find((t) => t.node_type_id === "test.echo")! as any;
    expect(echo).toMatchObject({
      version: "1.0.0",
      kind: "atomic",
      description: "Answers with what it was sent",
      input_schema: DEFAULT_DATA_INPUT_SCHEMA,
      output_schema: DEFAULT_OUTPUT_SCHEMA,
      constraints: { gates: { side_effect_class: "irreversible" } },
    });
    expect(echo.extensions["nodefabric.implementation"]).toEqual({ node_type_id: "a2a.send", version: "1.0.0" });
    expect(echo.extensions["nodefabric.a2a"]).toEqual({ card_url: agent.cardUrl, skill: "echo", skill_hash: skillDefinitionHash(DEFAULT_SKILLS[0]!) });
    expect(echo.extensions["nodefabric.a2a_skill"]).toMatchObject({ id: "echo", name: "Echo", tags: ["test"], examples: ['{"word":"hi"}'] });
  });

  it("sends a text-only skill a text part, and takes the schemas a skill gives", async () => {
    const result = await importA2aAgent(agent.cardUrl, { prefix: "test", include: ["text-only", "typed"] });
    const [text, typed] = result.nodeTypes as any[];
    expect(text.input_schema).toEqual(TEXT_INPUT_SCHEMA);
    expect(text.extensions["nodefabric.a2a"].input).toBe("text");
    expect(typed.input_schema).toEqual(EXTRA_SKILLS[2]!.inputSchema);
    expect(typed.output_schema).toEqual(EXTRA_SKILLS[2]!.outputSchema);
  });

  it("leaves out what cannot be a node type, saying why, and honours --include and --exclude", async () => {
    const result = await importA2aAgent(agent.cardUrl, { prefix: "test", exclude: ["echo", "fail"], include: [...DEFAULT_SKILLS.map((s) => s.id), "picture", "has space", "nothing"] });
    expect(result.nodeTypes.map((t) => t.node_type_id)).not.toContain("test.echo");
    expect(result.nodeTypes.map((t) => t.node_type_id)).not.toContain("test.fail");
    expect(result.leftOut).toEqual([
      { skill: "picture", reason: "it takes only image/png, which a node type's JSON input cannot carry" },
      { skill: "has space", reason: '"test.has space" is not a valid node_type_id (letters, digits, and . _ : - only, at most 128)' },
    ]);
    expect(result.notes).toContain("--include nothing: the card has no such skill");
  });

  it("takes its prefix from the agent's name, and sends and names secrets without publishing them", async () => {
    const result = await importA2aAgent(agent.cardUrl, { include: ["echo"], headers: [parseHeader("Authorization: Bearer {secret:AGENT_TOKEN_{tenant}}"), parseHeader("X-Team: blue")] });
    const echo = result.nodeTypes[0] as any;
    expect(echo.node_type_id).toBe("test-agent.echo");
    expect(echo.extensions["nodefabric.a2a"]).toMatchObject({ headers: { "x-team": "blue" }, secret_headers: { authorization: { secret: "AGENT_TOKEN_{tenant}", prefix: "Bearer " } } });
    expect(result.secrets).toEqual(["AGENT_TOKEN_{tenant}"]);
    expect(JSON.stringify(result.nodeTypes)).not.toMatch(/Bearer [a-z]/);
  });

  it("refuses a bad source or header with an A2aImportError, and names an unreachable card", async () => {
    expect(() => parseCardUrl("ftp://x")).toThrow(A2aImportError);
    expect(() => parseCardUrl("not a url")).toThrow(A2aImportError);
    expect(parseCardUrl("https://agent.example.com")).toBe("https://agent.example.com/.well-known/agent-card.json");
    expect(() => parseHeader("Authorization: Bearer abc")).toThrow(/would publish a credential/);
    await expect(importA2aAgent(`${agent.url}/nothing-here.json`)).rejects.toThrow(/could not read the Agent Card at .*HTTP 404/);
  });
});

describe("imported node types, run by a2a.send", () => {
  let f: TestFabric;
  beforeAll(async () => {
    f = await openFabric();
  }, 60_000);
  afterAll(async () => {
    await f?.close();
  });

  it("are published by `fabric node-types import --from-a2a`, with what was left out and a run to try", async () => {
    let stdout = "";
    let stderr = "";
    const out = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) } };
    const code = await nodeTypesImportA2a(f.registry, { fromA2a: agent.url, prefix: "cli", exclude: ["typed"] }, out);
    expect(code, stderr).toBe(0);
    expect(stdout).toContain("published 9 node types of the A2A agent Test Agent 1.0.0 (A2A 1.0, streaming), run by a2a.send@1.0.0:");
    expect(stdout).toContain("  cli.echo@1.0.0");
    expect(stdout).toContain("left out (2):\n  picture: it takes only image/png");
    expect(stdout).toMatch(/Try it:\n  npx fabric run cli\.echo@1\.0\.0 --input '\{.*\}'/);
    for (const skill of DEFAULT_SKILLS) {
      const res = await fetch(`${f.registry}/v1/node-types/cli.${skill.id}?version=1.0.0`);
      expect(res.status, skill.id).toBe(200);
      expect(((await res.json()) as any).extensions["nodefabric.a2a"].skill_hash).toBe(skillDefinitionHash(skill));
    }
    const bad = await nodeTypesImportA2a(f.registry, { fromA2a: "ftp://nowhere" }, out);
    expect(bad).toBe(2);
    expect(stderr).toContain("--from-a2a must be an http(s) URL");
  });

  it("run through the fabric, and fail with skill_definition_changed, calling nothing, once the skill changed", async () => {
    const { nodeTypes } = await importA2aAgent(agent.cardUrl, { prefix: "imported", include: ["echo", "text-only"] });
    for (const t of nodeTypes) await f.publish(t);
    const run = await f.run("imported.echo", { word: "hi" });
    expect(run.state, JSON.stringify(errorOf(run))).toBe("completed");
    expect(outputsOf(run)).toMatchObject({ echo: { word: "hi" }, text: "echoed" });
    const shout = await f.run("imported.text-only", { text: "hey" });
    expect(outputsOf(shout)).toEqual({ text: "HEY" });

    agent.setSkills([...DEFAULT_SKILLS.map((s) => (s.id === "echo" ? { ...s, outputModes: ["text/plain"] } : s)), ...EXTRA_SKILLS]);
    const before = agent.state.messages.length;
    const changed = await f.run("imported.echo", { word: "hi" });
    expect(changed.state).toBe("failed");
    expect(errorOf(changed).code).toBe("skill_definition_changed");
    expect(agent.state.messages.length).toBe(before);
  }, 30_000);
});
