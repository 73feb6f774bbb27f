/**
 * The composite node type `{{nodeTypePrefix}}.warmest-city`: reads the weather of several cities, one child NodeRun of
 * `{{nodeTypePrefix}}.current-weather` each, in parallel, and answers the warmest.
 */
import { ChildFailedError, defineComposite, type JsonObject } from "@nodefabric/sdk";
import { currentWeather, type CurrentWeatherOutputs } from "./current-weather.js";

/** What `{{nodeTypePrefix}}.warmest-city` takes. */
export interface WarmestCityInputs {
  cities: string[];
}

/** What `{{nodeTypePrefix}}.warmest-city` answers. */
export interface WarmestCityOutputs {
  city: string;
  temperature_c: number;
  readings: Array<{ city: string; temperature_c: number }>;
  /** Cities whose reading failed; the answer is made from the others. */
  unavailable: string[];
}

// Calls name the exact id and version, so the coordinator runs the child this package was written against.
const CURRENT_WEATHER = { node_type_id: currentWeather.nodeType.node_type_id, version: currentWeather.nodeType.version };

/** `{{nodeTypePrefix}}.warmest-city`: the warmest of the given cities right now. */
export const warmestCity = defineComposite<WarmestCityInputs, WarmestCityOutputs>({
  nodeType: {
    node_type_id: "{{nodeTypePrefix}}.warmest-city",
    version: "1.0.0",
    description: "Warmest city: reads the current weather of each city in parallel and answers the warmest.",
    input_schema: {
      type: "object",
      properties: {
        cities: { type: "array", items: { type: "string", minLength: 1, maxLength: 100 }, minItems: 1, maxItems: 10 },
      },
      required: ["cities"],
      additionalProperties: false,
    },
    output_schema: {
      type: "object",
      properties: {
        city: { type: "string" },
        temperature_c: { type: "number" },
        readings: {
          type: "array",
          items: {
            type: "object",
            properties: { city: { type: "string" }, temperature_c: { type: "number" } },
            required: ["city", "temperature_c"],
          },
        },
        unavailable: { type: "array", items: { type: "string" } },
      },
      required: ["city", "temperature_c", "readings", "unavailable"],
      additionalProperties: false,
    },
    constraints: { gates: { side_effect_class: "read" } },
  },
  async run(inputs, ctx) {
    const settled = await Promise.allSettled(inputs.cities.map((city) => ctx.call(CURRENT_WEATHER, { city })));
    const readings: WarmestCityOutputs["readings"] = [];
    const unavailable: string[] = [];
    settled.forEach((outcome, i) => {
      if (outcome.status === "fulfilled") {
        const reading = outcome.value as JsonObject & CurrentWeatherOutputs;
        readings.push({ city: reading.city, temperature_c: reading.temperature_c });
      } else if (ChildFailedError.is(outcome.reason)) {
        // One city failing should not hide the others; the caller sees which ones are missing.
        ctx.log.warn({ city: inputs.cities[i], error: outcome.reason.error }, "no reading for this city");
        unavailable.push(inputs.cities[i]);
      } else {
        throw outcome.reason;
      }
    });
    if (readings.length === 0) {
      // Nothing to compare: fail with the first child's error, as an uncaught ctx.call would.
      throw (settled[0] as PromiseRejectedResult).reason;
    }
    const warmest = readings.reduce((best, r) => (r.temperature_c > best.temperature_c ? r : best));
    return { city: warmest.city, temperature_c: warmest.temperature_c, readings, unavailable };
  },
});
