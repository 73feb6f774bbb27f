/**
 * Where operations are sent: each operation's server (its own, its path's, or the document's) as an absolute URL
 * template, the settings of server variables, and the default base URL.
 */
import type { OperationServer } from "@nodefabric/sdk";
import { isRecord, oneLine } from "./json-values.js";
import { resolveServerUrl } from "./load.js";
import type { MapContext } from "./map-context.js";
import { HTTP_METHODS, type OperationSite } from "./operations.js";
import type { RefFollower } from "./refs.js";
import { upperSnakeWords } from "./security.js";
import type { OpenApiDocument } from "./types.js";

/** Setting names of every server variable the document declares (document, path and operation servers). */
export function variableSettingNames(document: OpenApiDocument, follow: RefFollower, prefix: string): Map<string, string> {
  const names = new Map<string, string>();
  const add = (servers: unknown) => {
    if (!Array.isArray(servers)) return;
    for (const server of servers) {
      if (!isRecord(server) || typeof server.url !== "string") continue;
      const declared = isRecord(server.variables) ? Object.keys(server.variables) : [];
      const used = [...server.url.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      for (const variable of [...declared, ...used]) {
        if (!names.has(variable)) names.set(variable, `${prefix}_SERVER_${upperSnakeWords(variable).join("_") || "VARIABLE"}`);
      }
    }
  };
  add(document.servers);
  for (const raw of Object.values(document.paths ?? {})) {
    const item = follow(raw);
    if (!("value" in item) || !isRecord(item.value)) continue;
    add(item.value.servers);
    for (const [key, operation] of Object.entries(item.value)) if (HTTP_METHODS.has(key.toLowerCase()) && isRecord(operation)) add(operation.servers);
  }
  // Two variables whose names differ only in case or punctuation would share a setting; later ones are numbered.
  const seen = new Map<string, number>();
  for (const [variable, setting] of names) {
    const count = (seen.get(setting) ?? 0) + 1;
    seen.set(setting, count);
    if (count > 1) names.set(variable, `${setting}_${count}`);
  }
  return names;
}

/** The operation's server (its own, else its path's, else the document's first) as the descriptor holds it. */
export function serverOf(site: OperationSite, ctx: MapContext, notes: string[]): { server: OperationServer; variableSettings?: Record<string, string> } {
  const pick = (servers: unknown) => (Array.isArray(servers) ? servers.find((s) => isRecord(s) && typeof s.url === "string") : undefined) as Record<string, unknown> | undefined;
  const server = pick(site.operation.servers) ?? pick(site.pathItem.servers) ?? pick(ctx.document.servers);
  if (!server) return { server: { url: "" } };
  const url = absoluteServerUrl(server.url as string, ctx.location, notes);
  if (url === "") return { server: { url: "" } };
  const variables: NonNullable<OperationServer["variables"]> = {};
  const variableSettings: Record<string, string> = {};
  const declared = isRecord(server.variables) ? server.variables : {};
  for (const match of url.matchAll(/\{([^}]+)\}/g)) {
    const name = match[1];
    const setting = ctx.variableSettings.get(name);
    if (setting) variableSettings[name] = setting;
    const spec = declared[name];
    if (!isRecord(spec)) {
      notes.push(`the server variable {${name}} is not declared; it must be set with ${setting}`);
      continue;
    }
    const enumValues = Array.isArray(spec.enum) ? spec.enum.filter((v) => v !== null && v !== undefined).map(String) : undefined;
    const fallback = spec.default !== undefined && spec.default !== null ? String(spec.default) : enumValues?.[0];
    if (fallback === undefined) {
      notes.push(`the server variable {${name}} has no default; it must be set with ${setting}`);
      continue;
    }
    variables[name] = {
      default: fallback,
      ...(enumValues && enumValues.length > 0 ? { enum: enumValues } : {}),
      ...(typeof spec.description === "string" ? { description: oneLine(spec.description) } : {}),
    };
  }
  return {
    server: { url, ...(Object.keys(variables).length > 0 ? { variables } : {}) },
    ...(Object.keys(variableSettings).length > 0 ? { variableSettings } : {}),
  };
}

/** A server URL as the descriptor holds it: absolute http(s) (or a template), no trailing slash; "" when unusable. */
function absoluteServerUrl(url: string, location: string | undefined, notes: string[]): string {
  let text = url.trim();
  if (!/^[a-z][a-z0-9+.-]*:/i.test(text) && !text.startsWith("{")) {
    if (location === undefined) {
      notes.push(`the server URL ${JSON.stringify(url)} is relative and the document was not read from a URL; the base URL must be set`);
      return "";
    }
    text = resolveServerUrl(text, location);
  } else if (!/^https?:\/\//i.test(text) && !text.startsWith("{")) {
    notes.push(`the server URL ${url} is not http(s); the base URL must be set`);
    return "";
  }
  return text.replace(/\/+$/, "");
}

/** The absolute base URL of `servers[0]`, its variables at their defaults; "" when there is none. */
export function defaultBaseUrlOf(document: OpenApiDocument, location: string | undefined): string {
  const server = Array.isArray(document.servers) ? document.servers[0] : undefined;
  if (!isRecord(server) || typeof server.url !== "string") return "";
  const variables = isRecord(server.variables) ? server.variables : {};
  let url = server.url.trim().replace(/\{([^}]+)\}/g, (whole, name: string) => {
    const spec = variables[name];
    if (!isRecord(spec)) return whole;
    if (spec.default !== undefined && spec.default !== null) return String(spec.default);
    return Array.isArray(spec.enum) && spec.enum.length > 0 ? String(spec.enum[0]) : whole;
  });
  if (url.includes("{")) return "";
  if (!/^[a-z][a-z0-9+.-]*:/i.test(url)) {
    if (location === undefined) return "";
    url = resolveServerUrl(url, location);
  }
  return /^https?:\/\/[^/]+/i.test(url) ? url.replace(/\/+$/, "") : "";
}

export function absoluteUrlAgainst(url: string, base: string | undefined): string | undefined {
  if (/^https?:\/\//i.test(url)) return url;
  if (base === undefined || base === "") return undefined;
  try {
    return new URL(url, base.endsWith("/") ? base : `${base}/`).href;
  } catch {
    return undefined;
  }
}
