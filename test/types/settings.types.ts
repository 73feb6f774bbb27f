/**
 * Compile-time checks of the settings tables (docs/configuration.md): the TypeScript types are inferred from the
 * tables, so an option's type, its presence and its enum come from one place. `tsc -p tsconfig.check.json` checks
 * this file: each line under `@ts-expect-error` must fail to compile, or the directive itself is an error.
 */
import { defineSettings, setting, type SettingsValues } from "@nodefabric/sdk";
import type { AuthConfig, FabricConfig, LogLevel, StoreConfig } from "../../core/src/config.js";
import type { McpSettings } from "../../plugins/mcp/src/settings.js";

const TABLE = defineSettings("types", {
  units: setting.oneOf(["metric", "imperial"], { doc: "d", env: "FABRIC_T_UNITS", default: "metric" }),
  retries: setting.integer({ doc: "d", default: 2 }),
  verbose: setting.boolean({ doc: "d" }),
  cache: setting.group("d", { ttl_ms: setting.number({ doc: "d" }) }, { optional: true }),
  limits: setting.group("d", { max: setting.integer({ doc: "d", default: 1 }) }),
  keys: setting.map("d", setting.list({ doc: "d" })),
});
type Values = SettingsValues<(typeof TABLE)["fields"]>;

export function inferred(v: Values, c: FabricConfig, auth: AuthConfig, store: StoreConfig, mcp: McpSettings): unknown[] {
  const units: "metric" | "imperial" = v.units;
  const retries: number = v.retries;
  const max: number = v.limits.max;
  const ttl: number | undefined = v.cache?.ttl_ms;
  const keys: Record<string, string[]> = v.keys;
  // @ts-expect-error verbose has no default: it may be undefined
  const verbose: boolean = v.verbose;
  // @ts-expect-error cache is optional
  const cacheTtl = v.cache.ttl_ms;
  // @ts-expect-error an enum's type is its values
  const bad: Values["units"] = "kelvin";

  // Core's configuration: what every service reads is always there; what is optional may be absent.
  const level: LogLevel = c.log_level;
  const port: number = c.port_base;
  const concurrency: number = c.executor.concurrency;
  const allowPrivate: boolean = c.executor.egress.allow_private;
  const mode: "required" | "optional" | "disabled" = auth.mode;
  const url: string = store.url;
  const oidcClient: string | undefined = c.auth.oidc?.client_id;
  const registryUrl: string | undefined = c.services["node-registry"]?.url;
  const profileModel: string | undefined = c.llm?.profiles?.fast?.model;
  // @ts-expect-error the store is optional
  const storeUrl: string = c.store.url;
  // @ts-expect-error no option of that name
  const colour = c.colour;
  // @ts-expect-error run_lease_ms has no default in the table: the coordinator applies its own
  const lease: number = c.coordinator!.run_lease_ms;

  // A plugin's settings, from its table.
  const mcpMode: "tools" | "search" = mcp.mode;
  const pageSize: number = mcp.pageSize;
  return [units, retries, max, ttl, keys, verbose, cacheTtl, bad, level, port, concurrency, allowPrivate, mode, url, oidcClient, registryUrl, profileModel, storeUrl, colour, lease, mcpMode, pageSize];
}
