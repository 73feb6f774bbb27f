/** The console's configuration (from /console/config.json), handed to every page. */
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { ConsoleConfig } from "./api";

export const ConfigContext = createContext<ConsoleConfig>({ registry_url: "", auth: { required: false, oidc: null }, trace_url: null });

/** The configuration the page was loaded with. */
export function useConfig(): ConsoleConfig {
  return useContext(ConfigContext);
}
