/**
 * The torture's MCP agent (`npm run torture -- --agent mcp`): the tools of a real MCP server
 * (torture/mcp-server.ts, over stdio) through `holdfast/mcp`. The agent lists the tools, reads, then
 * sends twice. `read` and the listing are named in `replay` and pinned on the safe list; `send` is
 * held when in doubt. The server is a child of the agent's process: a SIGKILL of the process closes
 * its stdin and it exits.
 */
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { mcpToolset } from "../src/adapters/integrations/mcp/index.js";
import { defineAgent } from "../src/index.js";

/** The MCP tools' holdfast names (the toolset's prefix is `mcp`). */
export const MCP_NAMES = { listing: "mcp.list_tools", read: "mcp__read", send: "mcp__send" } as const;

export const makeMcpTortureDefinitions = async ({ dir }: { readonly dir: string }) => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--import", "tsx", join(import.meta.dirname, "mcp-server.ts")],
    env: { ...getDefaultEnvironment(), TORTURE_MCP_WITNESS: join(dir, "witness", "mcp.txt") },
    cwd: join(import.meta.dirname, ".."),
    stderr: "ignore",
  });
  const client = new Client({ name: "holdfast-torture", version: "1.0.0" });
  await client.connect(transport);
  const toolset = await mcpToolset(client, { prefix: "mcp", replay: ["tools/list", "read"] });
  const agent = defineAgent({
    name: "torture",
    version: "1",
    run: async (turn, input: { label: string }) => {
      await toolset.listTools(turn);
      const read = await toolset.callTool(turn, "read", { label: `${input.label}-read` });
      const first = await toolset.callTool(turn, "send", { label: `${input.label}-send-1` });
      const second = await toolset.callTool(turn, "send", { label: `${input.label}-send-2` });
      return { results: [read, first, second].map((r) => r.content) };
    },
  });
  const pinOf = (name: string) => {
    const tool = toolset.definitions.find((t) => t.name === name);
    if (!tool) throw new Error(`the MCP toolset has no tool ${name}`);
    return tool.pin;
  };
  return {
    agents: [agent],
    tools: toolset.definitions,
    allowlist: { [MCP_NAMES.listing]: pinOf(MCP_NAMES.listing), [MCP_NAMES.read]: pinOf(MCP_NAMES.read) },
    close: () => client.close(),
  };
};
