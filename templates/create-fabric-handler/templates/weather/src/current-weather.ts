/**
 * The atomic node type `{{nodeTypePrefix}}.current-weather`, which reads the current temperature of a city from a
 * weather-style JSON API (`GET <base URL>/current?city=<city>`).
 */
import { defineAtomic, HandlerError } from "@nodefabric/sdk";

/** Where the upstream API lives unless the executor is configured otherwise. */
export const DEFAULT_BASE_URL = "https://weather.example.com/v1";

/**
 * The setting that overrides DEFAULT_BASE_URL: the executor secret of that name (set `FABRIC_SECRET_{{baseUrlSetting}}`
 * where the executor runs), else the environment variable of that name.
 */
export const BASE_URL_SETTING = "{{baseUrlSetting}}";

/** What `{{nodeTypePrefix}}.current-weather` takes. */
export interface CurrentWeatherInputs {
  city: string;
}

/** What `{{nodeTypePrefix}}.current-weather` answers. */
export interface CurrentWeatherOutputs {
  city: string;
  temperature_c: number;
  observed_at: string;
}

/** The part of the upstream's answer this handler reads. */
interface UpstreamReading {
  temp_c?: unknown;
  observed_at?: unknown;
}

/** `{{nodeTypePrefix}}.current-weather`: the current temperature of a city, in degrees Celsius. */
export const currentWeather = defineAtomic<CurrentWeatherInputs, CurrentWeatherOutputs>({
  nodeType: {
    node_type_id: "{{nodeTypePrefix}}.current-weather",
    version: "1.0.0",
    description: "Current weather: the temperature of a city now, in degrees Celsius, from the weather API.",
    input_schema: {
      type: "object",
      properties: { city: { type: "string", minLength: 1, maxLength: 100 } },
      required: ["city"],
      additionalProperties: false,
    },
    output_schema: {
      type: "object",
      properties: {
        city: { type: "string" },
        temperature_c: { type: "number" },
        observed_at: { type: "string", format: "date-time" },
      },
      required: ["city", "temperature_c", "observed_at"],
      additionalProperties: false,
    },
    // Reading the weather changes nothing, so policies may let any run use it.
    constraints: { gates: { side_effect_class: "read" } },
  },
  async handler(inputs, ctx) {
    const base = ctx.secrets.get(BASE_URL_SETTING) ?? process.env[BASE_URL_SETTING] ?? DEFAULT_BASE_URL;
    const url = `${base.replace(/\/+$/, "")}/current?city=${encodeURIComponent(inputs.city)}`;
    // ctx.fetch is aborted when the run is canceled or times out; nock intercepts it in tests.
    const res = await ctx.fetch(url, { headers: { accept: "application/json" } });
    if (!res.ok) {
      throw new HandlerError("upstream_error", `weather API answered ${res.status}`, {
        // A server error or a rate limit may pass on a later attempt; any other refusal will not.
        retryable: res.status >= 500 || res.status === 429,
        details: { status: res.status },
      });
    }
    let reading: UpstreamReading;
    try {
      reading = (await res.json()) as UpstreamReading;
    } catch (err) {
      throw new HandlerError("upstream_error", "weather API answered with a body that is not JSON", { retryable: false, cause: err });
    }
    if (typeof reading.temp_c !== "number" || typeof reading.observed_at !== "string") {
      throw new HandlerError("upstream_error", "weather API answered without temp_c and observed_at", { retryable: false });
    }
    return { city: inputs.city, temperature_c: reading.temp_c, observed_at: reading.observed_at };
  },
});

