// Every valid vector must pass its schema and every invalid one must fail: the vectors
// are the conformance corpus that peers and our services are checked against.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it, expect } from "vitest";
import { schemas, validatorFor, type SchemaName } from "../../schemas/src/index.js";

const vectorsDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../schemas/vectors");
const names = Object.keys(schemas).sort() as SchemaName[];

function vectorFiles(kind: "valid" | "invalid", name: string): string[] {
  const dir = path.join(vectorsDir, kind, name);
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort();
}

const readVector = (kind: string, name: string, file: string): unknown =>
  JSON.parse(fs.readFileSync(path.join(vectorsDir, kind, name, file), "utf8"));

const isEnumSchema = (name: SchemaName) => "enum" in schemas[name];

describe("vector coverage", () => {
  it("every schema has at least one valid and one invalid vector", () => {
    const uncovered = names.filter((n) => vectorFiles("valid", n).length === 0 || vectorFiles("invalid", n).length === 0);
    expect(uncovered).toEqual([]);
  });

  it("every object and array schema has a minimal and a full valid vector", () => {
    const lacking = names
      .filter((n) => !isEnumSchema(n))
      .filter((n) => !vectorFiles("valid", n).includes("minimal.json") || !vectorFiles("valid", n).includes("full.json"));
    expect(lacking).toEqual([]);
  });

  it("every enum schema has a valid vector for each of its values", () => {
    for (const n of names.filter(isEnumSchema)) {
      const values = (schemas[n] as { enum: readonly string[] }).enum;
      expect(vectorFiles("valid", n), n).toEqual([...values].map((v) => `${v}.json`).sort());
    }
  });

  it("every vector folder belongs to a schema", () => {
    for (const kind of ["valid", "invalid"]) {
      const orphans = fs.readdirSync(path.join(vectorsDir, kind)).filter((d) => !names.includes(d as SchemaName));
      expect(orphans, kind).toEqual([]);
    }
  });
});

for (const name of names) {
  describe(name, () => {
    const validate = validatorFor(name);

    for (const file of vectorFiles("valid", name)) {
      it(`accepts valid/${name}/${file}`, () => {
        const ok = validate(readVector("valid", name, file));
        expect(ok ? [] : validate.errors).toEqual([]);
        expect(ok).toBe(true);
      });
    }

    for (const file of vectorFiles("invalid", name)) {
      it(`rejects invalid/${name}/${file}`, () => {
        expect(validate(readVector("invalid", name, file))).toBe(false);
        expect(validate.errors?.length).toBeGreaterThan(0);
      });
    }
  });
}
