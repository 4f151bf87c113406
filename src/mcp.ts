/**
 * holdfast/mcp — the tools of an MCP server as journaled holdfast tools: every `tools/call` an
 * intent before and an outcome after, with the server's name and version; annotations recorded and
 * shown, never trusted for replay; replay only through the safe list, pinned by server name +
 * version + tool name + input-schema digest. Needs `@modelcontextprotocol/sdk` (an optional peer
 * dependency).
 *
 * @example
 * import { Client } from "@modelcontextprotocol/sdk/client/index.js";
 * import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
 * import { defineAgent, openRuntime } from "holdfast";
 * import { mcpToolset } from "holdfast/mcp";
 *
 * const client = new Client({ name: "my-agent", version: "1.0.0" });
 * await client.connect(new StdioClientTransport({ command: "npx", args: ["@modelcontextprotocol/server-filesystem", "./notes"] }));
 * const files = await mcpToolset(client, { prefix: "files" });
 * const reader = defineAgent({
 *   name: "reader",
 *   version: "1",
 *   run: async (turn, input: { path: string }) => files.callTool(turn, "read_text_file", { path: input.path }),
 * });
 * const runtime = await openRuntime({ agents: [reader], tools: files.definitions });
 */
export {
  IDEMPOTENCY_META_KEY,
  type McpAnnotations,
  type McpArguments,
  McpCallInDoubt,
  type McpCallProbe,
  type McpDoubt,
  type McpListing,
  type McpServerInfo,
  type McpToolDef,
  type McpToolInfo,
  McpToolNotListed,
  type McpToolset,
  type McpToolsetOptions,
  mcpToolset,
} from "./adapters/integrations/mcp/index.js";
