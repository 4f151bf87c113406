import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const ROOT = join(import.meta.dirname, "..", "..");
const require = createRequire(import.meta.url);

/** The entry point of an installed MCP server package: its `bin`, run with this Node. */
const entryOf = (pkg: string): string => {
  const manifest = require.resolve(`${pkg}/package.json`);
  const { bin } = JSON.parse(readFileSync(manifest, "utf8")) as { bin: string | Record<string, string> };
  const path = typeof bin === "string" ? bin : Object.values(bin)[0];
  if (!path) throw new Error(`${pkg} has no bin`);
  return join(dirname(manifest), path);
};

/** How to start one of the servers the tests talk to, over stdio. */
export interface ServerCommand {
  readonly command: string;
  readonly args: ReadonlyArray<string>;
  readonly env?: Readonly<Record<string, string>>;
}

/** `@modelcontextprotocol/server-filesystem`, allowed to work in `root`. */
export const filesystemServer = (root: string): ServerCommand => ({
  command: process.execPath,
  args: [entryOf("@modelcontextprotocol/server-filesystem"), root],
});

/** `@modelcontextprotocol/server-everything` over stdio. */
export const everythingServer = (): ServerCommand => ({
  command: process.execPath,
  args: [entryOf("@modelcontextprotocol/server-everything"), "stdio"],
});

/** test/support/mcp-test-server.ts: JSON-RPC refusals, a version and schema set by its environment, a witness. */
export const testServer = (env: Readonly<Record<string, string>> = {}): ServerCommand => ({
  command: process.execPath,
  args: ["--import", "tsx", join(ROOT, "test", "support", "mcp-test-server.ts")],
  env,
});

/** Start the server as a child process and connect a real SDK client to it. */
export const connect = async (
  server: ServerCommand,
): Promise<{ readonly client: Client; readonly transport: StdioClientTransport }> => {
  const transport = new StdioClientTransport({
    command: server.command,
    args: [...server.args],
    env: { ...getDefaultEnvironment(), ...server.env },
    cwd: ROOT,
    stderr: "ignore",
  });
  const client = new Client({ name: "holdfast-tests", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
};
