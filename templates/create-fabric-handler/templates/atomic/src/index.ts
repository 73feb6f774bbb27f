/**
 * {{packageName}}: the NodeFabric node type `{{nodeTypePrefix}}.current-weather`, which reads the current temperature
 * of a city from a weather-style JSON API (`GET <base URL>/current?city=<city>`).
 */
import { currentWeather } from "./current-weather.js";

export { BASE_URL_SETTING, currentWeather, DEFAULT_BASE_URL, type CurrentWeatherInputs, type CurrentWeatherOutputs } from "./current-weather.js";

// The executor loads every definition this module exports.
export default [currentWeather];
