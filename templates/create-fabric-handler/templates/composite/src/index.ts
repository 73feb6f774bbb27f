/**
 * {{packageName}}: the NodeFabric node types `{{nodeTypePrefix}}.warmest-city` (a composite) and
 * `{{nodeTypePrefix}}.current-weather` (the atomic node type it calls once per city).
 */
import { currentWeather } from "./current-weather.js";
import { warmestCity } from "./warmest-city.js";

export { BASE_URL_SETTING, currentWeather, DEFAULT_BASE_URL, type CurrentWeatherInputs, type CurrentWeatherOutputs } from "./current-weather.js";
export { warmestCity, type WarmestCityInputs, type WarmestCityOutputs } from "./warmest-city.js";

// The executor loads every definition this module exports: the composite and the atomic node type it calls.
export default [warmestCity, currentWeather];
