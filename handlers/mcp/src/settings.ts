/**
 * The variables `mcp.call` reads from the executor's environment (docs/mcp-import.md); docs/configuration.md is
 * generated from this table.
 */
import { defineSettings, setting } from "@nodefabric/sdk";

/** The variable naming the operator's stdio servers, as messages spell it. */
export const STDIO_SERVERS_ENV = "FABRIC_MCP_SERVERS";

export const MCP_CALL_SETTINGS = defineSettings(
  "@nodefabric/handler-mcp",
  {
    servers: setting.string({
      doc: 'A JSON file naming the stdio MCP servers this executor may start: `{ "servers": { "<name>": { "command": … } } }`.',
      env: STDIO_SERVERS_ENV,
    }),
  },
  { intro: "`mcp.call`, which runs the tools of MCP servers as node types ([mcp-import.md](mcp-import.md))." },
);
