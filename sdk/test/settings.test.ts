/**
 * defineSettings: one table of settings gives the JSON Schema, the defaults, the reading of environment variables
 * (with a sentence naming a bad one), the rows of the reference page and the TypeScript type.
 */
import { describe, expect, it } from "vitest";
import { defineSettings, isSettingsTable, setting, SettingsError } from "../src/index.js";

const TABLE = defineSettings("@acme/fabric-weather", {
  units: setting.oneOf(["metric", "imperial"], { doc: "The units of answers.", env: "FABRIC_WEATHER_UNITS", default: "metric" }),
  retries: setting.integer({ doc: "Retries per call.", env: "FABRIC_WEATHER_RETRIES", default: 2, min: 0, max: 5 }),
  hosts: setting.list({ doc: "Hosts to ask.", env: "FABRIC_WEATHER_HOSTS", default: [] }),
  verbose: setting.boolean({ doc: "Log every call.", env: "FABRIC_WEATHER_VERBOSE", envAliases: ["WEATHER_VERBOSE"] }),
  cache: setting.group("The answer cache.", { ttl_ms: setting.number({ doc: "How long answers are kept.", env: "FABRIC_WEATHER_CACHE_TTL_MS", min: 1 }) }, { optional: true }),
  keys: setting.map("Keys by region.", setting.string({ doc: "The region's key." }), { envPrefix: "FABRIC_WEATHER_KEY_" }),
});

describe("defineSettings", () => {
  it("derives the JSON Schema: types, bounds, enums, no unknown option", () => {
    expect(TABLE.schema()).toEqual({
      type: "object",
      additionalProperties: false,
      properties: {
        units: { enum: ["metric", "imperial"] },
        retries: { type: "integer", minimum: 0, maximum: 5 },
        hosts: { type: "array", items: { type: "string", minLength: 1 } },
        verbose: { type: "boolean" },
        cache: { type: "object", additionalProperties: false, properties: { ttl_ms: { type: "number", minimum: 1 } } },
        keys: { type: "object", additionalProperties: { type: "string" } },
      },
    });
  });

  it("derives the defaults: defaulted fields and every section that is not optional", () => {
    expect(TABLE.defaults()).toEqual({ units: "metric", retries: 2, hosts: [], keys: {} });
    // A copy each time: changing one does not change the table's.
    TABLE.defaults().hosts.push("x");
    expect(TABLE.defaults().hosts).toEqual([]);
  });

  it("reads the environment: only what is set, nested, lists split, aliases, prefixed families", () => {
    expect(TABLE.fromEnv({})).toEqual({});
    expect(
      TABLE.fromEnv({ FABRIC_WEATHER_RETRIES: " 3 ", FABRIC_WEATHER_HOSTS: "a.example, b.example,", WEATHER_VERBOSE: "true", FABRIC_WEATHER_CACHE_TTL_MS: "1.5", FABRIC_WEATHER_KEY_EU: "k1", FABRIC_WEATHER_UNITS: "" }),
    ).toEqual({ retries: 3, hosts: ["a.example", "b.example"], verbose: true, cache: { ttl_ms: 1.5 }, keys: { EU: "k1" } });
    expect(TABLE.read({ FABRIC_WEATHER_UNITS: "imperial" })).toEqual({ units: "imperial", retries: 2, hosts: [], keys: {} });
  });

  it("names a bad variable in a sentence, or keeps its text for a schema to name", () => {
    expect(() => TABLE.fromEnv({ FABRIC_WEATHER_RETRIES: "9" })).toThrow(new SettingsError('FABRIC_WEATHER_RETRIES must be an integer from 0 to 5, not "9"'));
    expect(() => TABLE.fromEnv({ FABRIC_WEATHER_UNITS: "kelvin" })).toThrow('FABRIC_WEATHER_UNITS must be "metric" or "imperial", not "kelvin"');
    expect(() => TABLE.fromEnv({ FABRIC_WEATHER_VERBOSE: "yes" })).toThrow('FABRIC_WEATHER_VERBOSE must be true or false, not "yes"');
    expect(TABLE.fromEnv({ FABRIC_WEATHER_RETRIES: "x1", FABRIC_WEATHER_UNITS: "kelvin" }, { invalid: "keep" })).toEqual({ retries: "x1", units: "kelvin" });
  });

  it("gives the reference page's rows and the variables it reads", () => {
    const rows = TABLE.rows();
    expect(rows.find((r) => r.path === "retries")).toEqual({ path: "retries", env: "FABRIC_WEATHER_RETRIES", type: "integer", default: "2", doc: "Retries per call.", constraints: "≥ 0, ≤ 5" });
    expect(rows.find((r) => r.path === "keys.<NAME>")?.env).toBe("FABRIC_WEATHER_KEY_<NAME>");
    expect(TABLE.variables()).toEqual(["FABRIC_WEATHER_UNITS", "FABRIC_WEATHER_RETRIES", "FABRIC_WEATHER_HOSTS", "FABRIC_WEATHER_VERBOSE", "WEATHER_VERBOSE", "FABRIC_WEATHER_CACHE_TTL_MS", "FABRIC_WEATHER_KEY_"]);
    expect(isSettingsTable(TABLE)).toBe(true);
    expect(isSettingsTable({ fields: {} })).toBe(false);
  });
});
