/**
 * Settings tables: one table per package of the fields it can be configured with (name, type, default, environment
 * variable, one line of doc, constraints). The JSON Schema, the defaults, the reading of environment variables, the
 * TypeScript type and the reference page docs/configuration.md are all derived from it, so they cannot drift apart.
 * No dependencies: handler packages use it as core does.
 *
 * ```ts
 * export const WEATHER_SETTINGS = defineSettings("@acme/fabric-weather", {
 *   units: setting.oneOf(["metric", "imperial"], { default: "metric", env: "FABRIC_WEATHER_UNITS", doc: "The units of answers." }),
 * });
 * const { units } = WEATHER_SETTINGS.fromEnv(process.env); // throws a sentence naming the variable when it is bad
 * ```
 */

/** The brand on a table, so docs and tests find tables among a package's exports (and across SDK copies). */
export const SETTINGS_BRAND: unique symbol = Symbol.for("nodefabric.settings");

type Kind = "string" | "integer" | "number" | "boolean" | "list" | "enum";

interface FieldOptions<T> {
  /** One line: what the setting does. */
  doc: string;
  /** The environment variable that sets it. */
  env?: string;
  /** Older names of the variable, read when `env` is unset. */
  envAliases?: readonly string[];
  default?: T;
  /** Required in its section (schema and type); an unset field is an error. */
  required?: boolean;
  /** Always present in the resulting type although the schema does not require it (a later check does). */
  present?: boolean;
  /** Reads the variable's text instead of the type's own reading (undefined: as if unset); throws a sentence when the text is bad. */
  parse?: (text: string, variable: string) => T | undefined;
  /** Shown in the docs' default column when the default is computed or not a plain value. */
  defaultText?: string;
}

interface NumberOptions<T> extends FieldOptions<T> {
  min?: number;
  max?: number;
}

interface StringOptions<T> extends FieldOptions<T> {
  minLength?: number;
  pattern?: string;
}

interface ListOptions<T> extends FieldOptions<T> {
  minItems?: number;
  uniqueItems?: boolean;
  /** The JSON Schema of each item (default: a non-empty string). */
  items?: Record<string, unknown>;
}

/** One setting. `P` is whether the resulting type always holds it. */
export interface SettingField<T = unknown, P extends boolean = boolean> extends NumberOptions<T>, StringOptions<T>, ListOptions<T> {
  readonly kind: Kind;
  readonly values?: readonly string[];
  readonly __type: T;
  readonly __present: P;
}

/** A section of settings (an object in the configuration file). */
export interface SettingGroup<F extends SettingFields = SettingFields, P extends boolean = boolean> {
  readonly kind: "group";
  readonly doc: string;
  readonly fields: F;
  /** Whether the section may be absent (no defaults of its own). */
  readonly optional: boolean;
  readonly __present: P;
}

/** A map from names the operator chooses to values of one shape, such as secrets to the hosts they may go to. */
export interface SettingMap<V extends SettingField | SettingGroup = SettingField | SettingGroup, P extends boolean = boolean> {
  readonly kind: "map";
  readonly doc: string;
  readonly value: V;
  /** `PREFIX<NAME>` variables set the entry NAME. */
  readonly envPrefix?: string;
  /** Present as `{}` by default. */
  readonly optional: boolean;
  readonly __present: P;
}

export type SettingSpec = SettingField | SettingGroup | SettingMap;
export type SettingFields = { readonly [name: string]: SettingSpec };

type Present<S> = S extends { __present: infer P } ? ([P] extends [true] ? true : false) : false;
type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** The value a spec describes. */
export type SettingValue<S> =
  S extends SettingField<infer T, boolean> ? T
  : S extends SettingGroup<infer F, boolean> ? SettingsValues<F>
  : S extends SettingMap<infer V, boolean> ? Record<string, SettingValue<V>>
  : never;

/** The values of a table's fields: fields with a default (or required) always there, the others optional. */
export type SettingsValues<F extends SettingFields> = Simplify<
  { -readonly [K in keyof F as Present<F[K]> extends true ? K : never]: SettingValue<F[K]> } & {
    -readonly [K in keyof F as Present<F[K]> extends true ? never : K]?: SettingValue<F[K]>;
  }
>;

/** What the environment sets: any part of the values. */
export type SettingsPart<T> = T extends readonly unknown[] ? T : T extends object ? { [K in keyof T]?: SettingsPart<T[K]> } : T;

type Has<O, D> = O extends { default: unknown } | { required: true } | { present: true } ? true : D;

function field<T, P extends boolean>(kind: Kind, options: object, values?: readonly string[]): SettingField<T, P> {
  return { ...options, kind, ...(values ? { values } : {}) } as SettingField<T, P>;
}

/** The kinds of settings. */
export const setting = {
  string: <const O extends StringOptions<string>>(o: O) => field<string, Has<O, false>>("string", o),
  integer: <const O extends NumberOptions<number>>(o: O) => field<number, Has<O, false>>("integer", o),
  number: <const O extends NumberOptions<number>>(o: O) => field<number, Has<O, false>>("number", o),
  boolean: <const O extends FieldOptions<boolean>>(o: O) => field<boolean, Has<O, false>>("boolean", o),
  /** Comma-separated in the environment. */
  list: <const O extends ListOptions<string[]>>(o: O) => field<string[], Has<O, false>>("list", o),
  oneOf: <const V extends readonly string[], const O extends FieldOptions<V[number]>>(values: V, o: O) => field<V[number], Has<O, false>>("enum", o, values),
  /** A value read by `parse` (environment) and checked by `schema` (file), of type T. */
  custom: <T>() => <const O extends FieldOptions<T> & { schema: Record<string, unknown> }>(o: O) => field<T, Has<O, false>>("string", { ...o, custom: true }),
  group: <const F extends SettingFields, const O extends { optional?: boolean }>(doc: string, fields: F, o?: O): SettingGroup<F, O extends { optional: true } ? false : true> =>
    ({ kind: "group", doc, fields, optional: o?.optional === true }) as never,
  map: <const V extends SettingField | SettingGroup, const O extends { optional?: boolean; envPrefix?: string }>(doc: string, value: V, o?: O): SettingMap<V, O extends { optional: true } ? false : true> =>
    ({ kind: "map", doc, value, optional: o?.optional === true, ...(o?.envPrefix ? { envPrefix: o.envPrefix } : {}) }) as never,
};

/** A problem with a variable's value. */
export class SettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SettingsError";
  }
}

/** How `fromEnv` treats a value it cannot read: throw a SettingsError (default), or keep the text for a schema to name. */
export interface FromEnvOptions {
  invalid?: "throw" | "keep";
}

/** One row of the reference page. */
export interface SettingRow {
  /** Dotted path in the configuration (`executor.egress.allow_cidrs`). */
  path: string;
  env?: string;
  type: string;
  default?: string;
  doc: string;
  /** min, max, pattern, … in words. */
  constraints?: string;
}

/** A package's settings table. */
export interface SettingsTable<F extends SettingFields = SettingFields> {
  readonly [SETTINGS_BRAND]: true;
  /** The package (or part) whose settings these are, as the reference page names it. */
  readonly title: string;
  /** A sentence the reference page shows under the title (Markdown; links relative to docs/). */
  readonly intro?: string;
  readonly fields: F;
  /** The JSON Schema of an object of these settings. */
  schema(): Record<string, unknown> & { properties: Record<string, unknown> };
  /** The defaults (every section that is not optional, with its defaulted fields). */
  defaults(): SettingsValues<F>;
  /** The settings the environment sets (only those), nested as in the file. */
  fromEnv(env?: Record<string, string | undefined>, options?: FromEnvOptions): SettingsPart<SettingsValues<F>>;
  /** The defaults under what the environment sets: a package's settings with nothing else to merge. */
  read(env?: Record<string, string | undefined>): SettingsValues<F>;
  /** One row per field (a map's entry as `<NAME>`), for the reference page. */
  rows(): SettingRow[];
  /** Every variable the table reads: names, and prefixes ending in `_` for maps. */
  variables(): string[];
}

/** Defines a settings table. */
export function defineSettings<const F extends SettingFields>(title: string, fields: F, options: { intro?: string } = {}): SettingsTable<F> {
  return {
    [SETTINGS_BRAND]: true,
    title,
    ...(options.intro ? { intro: options.intro } : {}),
    fields,
    schema: () => groupSchema(fields) as never,
    defaults: () => groupDefaults(fields) as never,
    fromEnv: (env = process.env, o = {}) => (groupFromEnv(fields, env, o.invalid ?? "throw") ?? {}) as never,
    read: (env = process.env) => merge(groupDefaults(fields), groupFromEnv(fields, env, "throw") ?? {}) as never,
    rows: () => rowsOf(fields, ""),
    variables: () => rowsOf(fields, "").flatMap((r) => (r.env ? r.env.split(", ").map((v) => v.replace(/<NAME>$/, "")) : [])),
  };
}

/** Whether `value` is a settings table (of any copy of the SDK). */
export function isSettingsTable(value: unknown): value is SettingsTable {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[SETTINGS_BRAND] === true;
}

// ------------------------------------------------------------------ schema

function specSchema(s: SettingSpec): Record<string, unknown> {
  if (s.kind === "group") return groupSchema(s.fields);
  if (s.kind === "map") return { type: "object", additionalProperties: specSchema(s.value) };
  const f = s as SettingField & { schema?: Record<string, unknown> };
  if (f.schema) return f.schema;
  switch (f.kind) {
    case "string":
      return { type: "string", ...(f.minLength !== undefined ? { minLength: f.minLength } : {}), ...(f.pattern !== undefined ? { pattern: f.pattern } : {}) };
    case "integer":
    case "number":
      return { type: f.kind, ...(f.min !== undefined ? { minimum: f.min } : {}), ...(f.max !== undefined ? { maximum: f.max } : {}) };
    case "boolean":
      return { type: "boolean" };
    case "enum":
      return { enum: [...f.values!] };
    case "list":
      return {
        type: "array",
        ...(f.minItems !== undefined ? { minItems: f.minItems } : {}),
        ...(f.uniqueItems ? { uniqueItems: true } : {}),
        items: f.items ?? { type: "string", minLength: 1 },
      };
  }
}

function groupSchema(fields: SettingFields): Record<string, unknown> {
  const required = Object.entries(fields).filter(([, s]) => s.kind !== "group" && s.kind !== "map" && (s as SettingField).required).map(([k]) => k);
  return {
    type: "object",
    additionalProperties: false,
    ...(required.length > 0 ? { required } : {}),
    properties: Object.fromEntries(Object.entries(fields).map(([k, s]) => [k, specSchema(s)])),
  };
}

// ------------------------------------------------------------------ defaults

const clone = <T>(v: T): T => (Array.isArray(v) ? ([...v] as T) : v !== null && typeof v === "object" ? (JSON.parse(JSON.stringify(v)) as T) : v);

function groupDefaults(fields: SettingFields): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, s] of Object.entries(fields)) {
    if (s.kind === "group") {
      if (!s.optional) out[k] = groupDefaults(s.fields);
    } else if (s.kind === "map") {
      if (!s.optional) out[k] = {};
    } else if (s.default !== undefined) out[k] = clone(s.default);
  }
  return out;
}

function merge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    out[k] = v && typeof v === "object" && !Array.isArray(v) && b && typeof b === "object" && !Array.isArray(b) ? merge(b as Record<string, unknown>, v as Record<string, unknown>) : v;
  }
  return out;
}

// ------------------------------------------------------------------ environment

const quoteAll = (values: readonly string[]) => {
  const q = values.map((v) => JSON.stringify(v));
  return q.length <= 1 ? q.join("") : `${q.slice(0, -1).join(", ")} or ${q[q.length - 1]}`;
};

/** Reads one variable's text as the field's type; undefined for an empty value. */
function readText(f: SettingField, text: string, variable: string, invalid: "throw" | "keep"): unknown {
  // Empty is unset; so is blank, except where a schema judges the text (keep) and for strings.
  if (text === "" || (invalid === "throw" && f.kind !== "string" && text.trim() === "")) return undefined;
  if (f.parse) return f.parse(text, variable);
  const bad = (what: string): unknown => {
    if (invalid === "keep") return text; // kept as it is, so the schema names the option
    throw new SettingsError(`${variable} must be ${what}, not ${JSON.stringify(text)}`);
  };
  switch (f.kind) {
    case "string":
      return text;
    case "integer":
    case "number": {
      const t = invalid === "throw" ? text.trim() : text;
      const ok = f.kind === "integer" ? /^-?\d+$/.test(t) : t !== "" && Number.isFinite(Number(t));
      const range = f.min !== undefined && f.max !== undefined ? ` from ${f.min} to ${f.max}` : f.min !== undefined ? ` of at least ${f.min}` : f.max !== undefined ? ` of at most ${f.max}` : "";
      const what = `${f.kind === "integer" ? "an integer" : "a number"}${range}`;
      if (!ok) return bad(what);
      const n = Number(t);
      if (invalid === "throw" && ((f.min !== undefined && n < f.min) || (f.max !== undefined && n > f.max))) return bad(what);
      return n;
    }
    case "boolean":
      return text === "true" ? true : text === "false" ? false : bad(`true or false`);
    case "enum":
      return f.values!.includes(text) || invalid === "keep" ? text : bad(quoteAll(f.values!));
    case "list": {
      const list = text.split(",").map((s) => s.trim()).filter(Boolean);
      return list.length > 0 ? list : undefined;
    }
  }
}

function groupFromEnv(fields: SettingFields, env: Record<string, string | undefined>, invalid: "throw" | "keep"): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  for (const [k, s] of Object.entries(fields)) {
    let v: unknown;
    if (s.kind === "group") v = groupFromEnv(s.fields, env, invalid);
    else if (s.kind === "map") {
      if (!s.envPrefix || s.value.kind === "group") continue;
      const entries: Record<string, unknown> = {};
      for (const [name, text] of Object.entries(env)) {
        if (!name.startsWith(s.envPrefix) || name.length === s.envPrefix.length || text === undefined) continue;
        // An entry set to nothing is an entry of nothing (a secret bound to no host), not an unset one.
        const value = readText(s.value, text, name, invalid) ?? (s.value.kind === "list" ? [] : undefined);
        if (value !== undefined) entries[name.slice(s.envPrefix.length)] = value;
      }
      v = Object.keys(entries).length > 0 ? entries : undefined;
    } else {
      const names = [s.env, ...(s.envAliases ?? [])].filter((n): n is string => n !== undefined);
      const name = names.find((n) => env[n] !== undefined && env[n] !== "");
      if (name !== undefined) v = readText(s, env[name]!, name, invalid);
    }
    if (v !== undefined) out[k] = v;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

// ------------------------------------------------------------------ docs

function typeText(s: SettingSpec): string {
  if (s.kind === "group") return "object";
  if (s.kind === "map") return `map of ${typeText(s.value)}`;
  if (s.kind === "enum") return s.values!.map((v) => JSON.stringify(v)).join(" | ");
  if (s.kind === "list") {
    const items = s.items as { enum?: unknown[] } | undefined;
    return items?.enum ? `list of ${items.enum.map((v) => JSON.stringify(v)).join(" | ")}` : "list of strings";
  }
  const schema = (s as { schema?: { type?: string } }).schema;
  if (schema) return schema.type === "array" ? "list of strings" : schema.type === "object" ? "map of strings" : String(schema.type ?? "JSON");
  return s.kind;
}

function constraintsOf(s: SettingField): string | undefined {
  const parts: string[] = [];
  if (s.required) parts.push("required");
  if (s.min !== undefined) parts.push(`≥ ${s.min}`);
  if (s.max !== undefined) parts.push(`≤ ${s.max}`);
  if (s.minLength !== undefined && s.minLength > 1) parts.push(`at least ${s.minLength} characters`);
  if (s.pattern !== undefined) parts.push(`matches \`${s.pattern}\``);
  if (s.minItems !== undefined) parts.push(`at least ${s.minItems} item${s.minItems === 1 ? "" : "s"}`);
  if (s.uniqueItems) parts.push("no repeats");
  return parts.length > 0 ? parts.join(", ") : undefined;
}

function rowsOf(fields: SettingFields, prefix: string): SettingRow[] {
  return Object.entries(fields).flatMap(([k, s]): SettingRow[] => {
    const path = `${prefix}${k}`;
    if (s.kind === "group") return [{ path, type: s.optional ? "object (optional)" : "object", doc: s.doc }, ...rowsOf(s.fields, `${path}.`)];
    if (s.kind === "map") {
      const entry = `${path}.<NAME>`;
      const value: SettingRow[] =
        s.value.kind === "group"
          ? rowsOf(s.value.fields, `${entry}.`)
          : [{ path: entry, type: typeText(s.value), doc: s.value.doc, ...(s.envPrefix ? { env: `${s.envPrefix}<NAME>` } : {}), ...(constraintsOf(s.value) ? { constraints: constraintsOf(s.value) } : {}) }];
      return [{ path, type: "map", doc: s.doc }, ...value];
    }
    const env = [s.env, ...(s.envAliases ?? [])].filter(Boolean).join(", ");
    const shown = s.defaultText ?? (s.default === undefined ? undefined : JSON.stringify(s.default));
    return [{ path, type: typeText(s), doc: s.doc, ...(env ? { env } : {}), ...(shown !== undefined ? { default: shown } : {}), ...(constraintsOf(s) ? { constraints: constraintsOf(s) } : {}) }];
  });
}
