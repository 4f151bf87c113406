/**
 * A real MCP server over stdio, on the SDK's low-level `Server` (the shape of many servers in the
 * field), for what the reference servers cannot show:
 *   - refusals as JSON-RPC errors: an unknown tool is MethodNotFound, bad arguments InvalidParams
 *     (the SDK's `McpServer` answers both with `isError` results instead);
 *   - a server that changes between two starts: HF_MCP_VERSION (default 1.0.0) is its version,
 *     HF_MCP_SCHEMA=v2 gives `lookup` a second argument;
 *   - an outside witness: every `lookup` that runs appends a line to HF_MCP_WITNESS.
 * `retire` removes a tool from the server, as a server that drops a tool between listing and call.
 * With HF_MCP_STORE (a JSON file, kept across server processes): `put` stores a value under a key
 * with the request's holdfast idempotency key (and appends `put <key>` to HF_MCP_WITNESS), `get`
 * answers what is stored — a write and the read that can prove it, for reconcilers.
 */
import { appendFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";

const env = process.env;
const v2 = env.HF_MCP_SCHEMA === "v2";

const lookup: Tool = {
  name: "lookup",
  title: "Look up a key",
  description: "The value stored under a key",
  inputSchema: {
    type: "object",
    properties: {
      key: { type: "string" },
      ...(v2 ? { region: { type: "string", description: "where to look" } } : {}),
    },
    required: ["key"],
  },
  annotations: { readOnlyHint: true, idempotentHint: true, destructiveHint: false, openWorldHint: false },
};

const retire: Tool = {
  name: "retire",
  description: "Remove a tool from this server",
  inputSchema: { type: "object", properties: { tool: { type: "string" } }, required: ["tool"] },
  annotations: { readOnlyHint: false, destructiveHint: true },
};

const put: Tool = {
  name: "put",
  description: "Store a value under a key",
  inputSchema: {
    type: "object",
    properties: { key: { type: "string" }, value: { type: "string" } },
    required: ["key", "value"],
  },
  annotations: { readOnlyHint: false, idempotentHint: false },
};

const get: Tool = {
  name: "get",
  description: "What is stored under a key, and by which request",
  inputSchema: { type: "object", properties: { key: { type: "string" } }, required: ["key"] },
  annotations: { readOnlyHint: true },
};

const store = env.HF_MCP_STORE;
type Stored = Record<string, { value: string; by: string | null }>;
const readStore = (): Stored => (store && existsSync(store) ? JSON.parse(readFileSync(store, "utf8")) : {});

const tools = new Map<string, Tool>([
  [lookup.name, lookup],
  [retire.name, retire],
  ...(store
    ? ([
        [put.name, put],
        [get.name, get],
      ] as const)
    : []),
]);

const server = new Server(
  { name: "holdfast-test-server", version: env.HF_MCP_VERSION ?? "1.0.0" },
  { capabilities: { tools: { listChanged: true } } },
);

server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [...tools.values()] }));

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const { name, arguments: args = {} } = request.params;
  if (!tools.has(name)) throw new McpError(ErrorCode.MethodNotFound, `Unknown tool: ${name}`);
  if (name === "retire") {
    if (typeof args.tool !== "string") throw new McpError(ErrorCode.InvalidParams, "tool must be a string");
    tools.delete(args.tool);
    await server.sendToolListChanged();
    return { content: [{ type: "text", text: `retired ${args.tool}` }] };
  }
  if (typeof args.key !== "string") throw new McpError(ErrorCode.InvalidParams, "key must be a string");
  if (name === "put" && store) {
    if (typeof args.value !== "string") throw new McpError(ErrorCode.InvalidParams, "value must be a string");
    const by = request.params._meta?.["holdfast/idempotency-key"];
    writeFileSync(
      store,
      JSON.stringify({ ...readStore(), [args.key]: { value: args.value, by: by ?? null } }),
    );
    if (env.HF_MCP_WITNESS) appendFileSync(env.HF_MCP_WITNESS, `put ${args.key}\n`);
    return { content: [{ type: "text", text: `stored ${args.key}` }] };
  }
  if (name === "get" && store) {
    const found = readStore()[args.key];
    return {
      content: [{ type: "text", text: JSON.stringify(found ? { found: true, ...found } : { found: false }) }],
    };
  }
  if (env.HF_MCP_WITNESS) appendFileSync(env.HF_MCP_WITNESS, `lookup ${args.key}\n`);
  return { content: [{ type: "text", text: `value of ${args.key}` }] };
});

await server.connect(new StdioServerTransport());
