/**
 * The telemetry plugin's settings (docs/telemetry.md). Traces follow the standard `OTEL_*` variables, which are the
 * OpenTelemetry SDK's own; these are the fabric's.
 */
import { defineSettings, setting } from "@nodefabric/core";

/** A port number, 0 to 65535; the message names the variable and its text. */
function port(text: string, variable: string): number {
  const raw = text.trim();
  if (!/^\d+$/.test(raw) || Number(raw) > 65535) throw new Error(`${variable}=${JSON.stringify(raw)} is not a port number (0 to 65535)`);
  return Number(raw);
}

export const TELEMETRY_SETTINGS = defineSettings(
  "@nodefabric/plugin-telemetry",
  {
    metricsPort: setting.integer({ doc: "Serves every service's metrics on a port of their own, without authentication (none by default).", env: "FABRIC_METRICS_PORT", min: 0, max: 65535, parse: port }),
    metricsHost: setting.string({ doc: "The address that metrics port listens on.", env: "FABRIC_METRICS_HOST", default: "127.0.0.1", parse: (text) => text.trim() || undefined }),
  },
  { intro: "Traces and metrics ([telemetry.md](telemetry.md)); traces are exported as the standard `OTEL_*` variables say." },
);
