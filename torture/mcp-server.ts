/**
 * The MCP variant's server (`npm run torture -- --agent mcp`): a real MCP server over stdio with two
 * tools, each an effect the outside witness counts by the attempt's idempotency key (which holdfast
 * sends in the request's `_meta`):
 *   - `read`: no effect outside (the agent names it in `replay` and the safe list pins it);
 *   - `send`: an effect; held when in doubt.
 * A request waits a little before it answers, so random kills also land between the effect and its
 * outcome. TORTURE_MCP_WITNESS is the witness file.
 */
import { appendFileSync } from "node:fs";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";

const witness = process.env.TORTURE_MCP_WITNESS ?? "";
const labelled = { type: "object", properties: { label: { type: "string" } }, required: ["label"] } as const;

const server = new Server({ name: "torture-mcp", version: "1.0.0" }, { capabilities: { tools: {} } });

server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    {
      name: "read",
      description: "Read something",
      inputSchema: labelled,
      annotations: { readOnlyHint: true },
    },
    { name: "send", description: "Send a message", inputSchema: labelled },
  ],
}));

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const { name, arguments: args = {}, _meta } = request.params;
  if (name !== "read" && name !== "send")
    throw new McpError(ErrorCode.MethodNotFound, `Unknown tool: ${name}`);
  if (typeof args.label !== "string") throw new McpError(ErrorCode.InvalidParams, "label must be a string");
  const key = String(
    (_meta as Record<string, unknown> | undefined)?.["holdfast/idempotency-key"] ?? "no-key",
  );
  appendFileSync(witness, `${name} ${args.label} ${key}\n`);
  await new Promise((resolve) => setTimeout(resolve, 20));
  return { content: [{ type: "text", text: `${name === "read" ? "read" : "sent"} ${args.label}` }] };
});

await server.connect(new StdioServerTransport());
