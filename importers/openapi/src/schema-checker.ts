/** Whether converted schemas compile with the executor's validator, at a cost that does not grow with sharing. */
import { compileHandlerSchema, createHandlerAjv } from "@nodefabric/sdk/runtime";
import { isRecord } from "./json-values.js";
import type { SchemaObject } from "./types.js";

/** Parts of schemas up to this long (serialised) are remembered by their text when checked. */
const SMALL_PART_CHARS = 4096;

/**
 * Tells whether schemas compile with the executor's validator (`compileHandlerSchema(createHandlerAjv(), schema)`),
 * at a cost that does not grow with how often a definition is shared: converted schemas share their `$defs` entries
 * (the same objects) across operations, so each entry is compiled once, on its own, with the names beside it standing
 * in as `true`; then each schema's own top is compiled the same way. A compile error belongs to one schema object, so
 * a schema whose parts all compile compiles. Any failure is confirmed by compiling the whole schema, whose error is
 * the one reported.
 */
export class SchemaChecker {
  /** One Ajv for the whole mapping; it forgets each schema once compiled. */
  private readonly ajv = createHandlerAjv();
  /** Per definition object: the compile error, or null when it compiles. */
  private readonly definitions = new WeakMap<object, string | null>();
  /** Small parts whose `$ref`s resolve, by their text: the compile error, or null. */
  private readonly smallParts = new Map<string, string | null>();

  /** Why `schema` does not compile, or undefined when it does. */
  problemOf(schema: SchemaObject): string | undefined {
    const defs = isRecord(schema.$defs) ? schema.$defs : {};
    const standIns = Object.fromEntries(Object.keys(defs).map((name) => [name, true]));
    for (const def of Object.values(defs)) {
      if (!isRecord(def)) continue;
      let problem = this.definitions.get(def);
      if (problem === undefined) {
        problem = this.partProblem(def, standIns);
        this.definitions.set(def, problem);
      }
      if (problem !== null) return this.compileError(schema);
    }
    const { $defs: _defs, ...top } = schema;
    return this.partProblem(top, standIns) === null ? undefined : this.compileError(schema);
  }

  /**
   * The compile error of one part (a definition or a top), with the definition names standing in as `true`; null
   * when it compiles. Parts repeat as new objects (the same parameters on many paths, the converter's placeholders
   * for trimmed definitions): the same text whose `$ref`s all resolve compiles the same way, so small parts are
   * remembered by their text.
   */
  private partProblem(part: SchemaObject, standIns: Record<string, boolean>): string | null {
    const text = JSON.stringify(part);
    const small = text.length <= SMALL_PART_CHARS && [...text.matchAll(/"\$ref":"#\/\$defs\/([^"]*)"/g)].every((m) => m[1] in standIns);
    const remembered = small ? this.smallParts.get(text) : undefined;
    if (remembered !== undefined) return remembered;
    const problem = this.compileError(Object.keys(standIns).length > 0 ? { ...part, $defs: standIns } : part) ?? null;
    if (small) this.smallParts.set(text, problem);
    return problem;
  }

  private compileError(schema: SchemaObject): string | undefined {
    try {
      compileHandlerSchema(this.ajv, schema);
      return undefined;
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    } finally {
      this.ajv.removeSchema(schema);
    }
  }
}
