import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { USAGE } from "../src/cli-arguments.js";
import { runCreateCommand } from "../src/create-command.js";
import type { Prompter } from "../src/prompts.js";
import type { TemplateName } from "../src/scaffold.js";

const packageRoot = fileURLToPath(new URL("../", import.meta.url));
const fixture = path.join(packageRoot, "test", "fixtures", "petstore.yaml");
const root = mkdtempSync(path.join(os.tmpdir(), "cfh-cli-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let cwd: string;
let counter = 0;
beforeEach(() => {
  cwd = path.join(root, `case-${++counter}`);
  mkdirSync(cwd);
});

/** A prompter that fails the test if it is used. */
const noQuestions: Prompter = {
  start: () => undefined,
  packageName: () => Promise.reject(new Error("asked for a name")),
  template: () => Promise.reject(new Error("asked for a template")),
  finish: () => undefined,
};

async function create(argv: string[], options: { interactive?: boolean; prompter?: Prompter } = {}) {
  let stdout = "";
  let stderr = "";
  const code = await runCreateCommand(argv, {
    cwd,
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    interactive: options.interactive ?? false,
    prompter: options.prompter ?? noQuestions,
  });
  return { code, stdout, stderr };
}

function manifestIn(dir: string): Record<string, any> {
  return JSON.parse(readFileSync(path.join(cwd, dir, "package.json"), "utf8"));
}

describe("usage errors (exit code 2)", () => {
  it("prints the help with --help", async () => {
    const { code, stdout } = await create(["--help"]);
    expect(code).toBe(0);
    expect(stdout).toBe(USAGE);
  });

  it("refuse what the command line cannot mean, and create nothing", async () => {
    const cases: Array<[string[], RegExp]> = [
      [["weather", "--frobnicate"], /Unknown option '--frobnicate'/],
      [["weather", "--template", "lambda"], /unknown template "lambda": choose atomic, composite, http/],
      [["Weather"], /invalid package name "Weather": name can no longer contain capital letters/],
      [["weather", "--from-openapi", fixture, "--template", "composite"], /--from-openapi makes an http package; drop --template composite/],
      [["one", "two"], /expected at most one package name/],
      [["weather", "--sdk", ""], /--sdk needs a value/],
      [["weather", "--core", "^0.1.0"], /--core is gone: generated packages depend on @nodefabric\/sdk, not @nodefabric\/core; give its spec with --sdk <spec>/],
      [["weather", "--dir"], /argument missing|--dir/],
    ];
    for (const [argv, message] of cases) {
      const { code, stderr } = await create(argv);
      expect(code, argv.join(" ")).toBe(2);
      expect(stderr).toMatch(message);
      expect(stderr).toContain("--help");
    }
    expect(readdirSync(cwd)).toEqual([]);
  });
});

describe("failures (exit code 1)", () => {
  it("refuses a directory that exists and is not empty, and leaves it as it was", async () => {
    mkdirSync(path.join(cwd, "weather"));
    writeFileSync(path.join(cwd, "weather", "keep.txt"), "mine");
    const { code, stderr } = await create(["weather"]);
    expect(code).toBe(1);
    expect(stderr).toBe(`create-fabric-handler: ${path.join(cwd, "weather")} exists and is not empty; choose another name or --dir\n`);
    expect(readdirSync(path.join(cwd, "weather"))).toEqual(["keep.txt"]);
  });

  it("says why an OpenAPI document cannot be used", async () => {
    const missing = await create(["api", "--from-openapi", "nope.yaml"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/cannot read the OpenAPI document nope\.yaml/);

    writeFileSync(path.join(cwd, "empty.json"), JSON.stringify({ openapi: "3.0.3", info: { title: "Empty", version: "1" }, paths: {} }));
    const empty = await create(["api", "--from-openapi", "empty.json"]);
    expect(empty.code).toBe(1);
    expect(empty.stderr).toMatch(/no operation a node type can be made from/);
    expect(existsSync(path.join(cwd, "api"))).toBe(false);
  });
});

describe("without a terminal (or with --yes)", () => {
  it("asks nothing and uses the defaults: my-fabric-handler, template atomic", async () => {
    const { code, stdout } = await create([]);
    expect(code).toBe(0);
    expect(manifestIn("my-fabric-handler").name).toBe("my-fabric-handler");
    expect(existsSync(path.join(cwd, "my-fabric-handler", "src", "index.ts"))).toBe(true);
    expect(stdout).toContain("my-fabric.current-weather@1.0.0");
  });

  it("asks nothing with --yes even in a terminal", async () => {
    const { code } = await create(["--yes", "--template", "composite"], { interactive: true });
    expect(code).toBe(0);
    expect(existsSync(path.join(cwd, "my-fabric-handler", "src", "warmest-city.ts"))).toBe(true);
  });

  it("puts a scoped package in a folder without its scope, or in --dir", async () => {
    expect((await create(["@acme/fabric-weather"])).code).toBe(0);
    expect(manifestIn("fabric-weather").name).toBe("@acme/fabric-weather");
    expect((await create(["@acme/fabric-tides", "--dir", "packages/tides"])).code).toBe(0);
    expect(manifestIn("packages/tides").name).toBe("@acme/fabric-tides");
  });

  it("writes --sdk and --schemas into package.json", async () => {
    const sdk = "file:/tmp/packs/nodefabric-sdk-0.1.0.tgz";
    const schemas = "file:/tmp/packs/nodefabric-schemas-0.1.0.tgz";
    expect((await create(["weather", "--template", "http", "--sdk", sdk, "--schemas", schemas])).code).toBe(0);
    const manifest = manifestIn("weather");
    expect(manifest.devDependencies["@nodefabric/sdk"]).toBe(sdk);
    expect(manifest.overrides).toEqual({ "@nodefabric/schemas": schemas });
  });

  it("names a package made --from-openapi after the API's title", async () => {
    const { code, stdout } = await create(["--from-openapi", fixture]);
    expect(code).toBe(0);
    expect(manifestIn("petstore").name).toBe("petstore");
    expect(stdout).toContain("petstore.listPets@1.0.0");
    expect(stdout).toContain(`npx fabric run petstore.listPets --input '{"limit":20,"species":"dog"}'`);
  });

  it("prints the next steps: install, test, build, publish, and run in a fabric", async () => {
    const { stdout } = await create(["@acme/fabric-weather"]);
    const steps = stdout.split("\n").map((line) => line.trim().replace(/\s+#.*$/, ""));
    expect(steps).toEqual(
      expect.arrayContaining([
        "cd fabric-weather",
        "npm install",
        "npm test",
        "npm run build",
        "npm publish",
        "npx fabric dev --discover .",
        `npx fabric run weather.current-weather --input '{"city":"Oslo"}'`,
      ]),
    );
    expect(stdout).toContain("WEATHER_BASE_URL");
  });
});

describe("in a terminal", () => {
  function answering(name: string, template: TemplateName) {
    const asked: string[] = [];
    let validate: ((name: string) => string | undefined) | undefined;
    const prompter: Prompter = {
      start: () => asked.push("start"),
      packageName: async (options) => {
        asked.push(`name (default ${options.defaultName})`);
        validate = options.validate;
        return name;
      },
      template: async () => {
        asked.push("template");
        return template;
      },
      finish: () => asked.push("finish"),
    };
    return { prompter, asked, validate: (n: string) => validate!(n) };
  }

  it("asks for the name and the template when they are missing", async () => {
    const answers = answering("tides", "composite");
    const { code } = await create([], { interactive: true, prompter: answers.prompter });
    expect(code).toBe(0);
    expect(answers.asked).toEqual(["start", "name (default my-fabric-handler)", "template", "finish"]);
    expect(existsSync(path.join(cwd, "tides", "src", "warmest-city.ts"))).toBe(true);
  });

  it("checks the name as it is typed: npm's rules, and a folder that is free", async () => {
    const answers = answering("tides", "atomic");
    await create([], { interactive: true, prompter: answers.prompter });
    expect(answers.validate("Tides")).toMatch(/capital letters/);
    expect(answers.validate("tides")).toMatch(/exists and is not empty/);
    expect(answers.validate("currents")).toBeUndefined();
  });

  it("asks only for what the flags left out", async () => {
    const answers = answering("unused", "atomic");
    expect((await create(["tides", "--template", "http"], { interactive: true, prompter: answers.prompter })).code).toBe(0);
    expect(answers.asked).toEqual(["start", "finish"]);
  });
});

describe("the executable", () => {
  const bin = path.join(packageRoot, "bin", "create-fabric-handler.js");

  function runBin(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      // stdin stays an open pipe that never sends anything: a prompt would wait forever.
      const child = spawn(process.execPath, [bin, ...args], { cwd, stdio: ["pipe", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      const timer = setTimeout(() => {
        child.kill();
        reject(new Error(`create-fabric-handler ${args.join(" ")} did not finish: it waits for input it cannot get`));
      }, 20_000);
      child.on("error", reject);
      child.on("close", (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
  }

  it("creates a package without a terminal, asking nothing, and exits 0", { timeout: 30_000 }, async () => {
    expect(existsSync(path.join(packageRoot, "dist", "cli.js")), "build the package first (npm run build)").toBe(true);
    const { code, stdout } = await runBin([]);
    expect(code).toBe(0);
    expect(stdout).toContain("Created my-fabric-handler");
    expect(manifestIn("my-fabric-handler").nodefabric).toEqual({ handlers: ["./dist/index.js"] });
  });

  it("exits 2 on a usage error and 1 on a failure", { timeout: 30_000 }, async () => {
    expect((await runBin(["--template", "lambda"])).code).toBe(2);
    mkdirSync(path.join(cwd, "busy"));
    writeFileSync(path.join(cwd, "busy", "x"), "");
    expect((await runBin(["busy"])).code).toBe(1);
  });
});
