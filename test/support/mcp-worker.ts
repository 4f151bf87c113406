/**
 * A real holdfast process whose agent calls a real MCP server over stdio, for the MCP crash tests.
 * Configured by environment:
 *   HF_DB                 the journal file
 *   HF_SERVER             "filesystem" (server-filesystem in HF_ROOT) or "test" (mcp-test-server.ts;
 *                         HF_MCP_VERSION, HF_MCP_SCHEMA and HF_MCP_WITNESS are passed on to it)
 *   HF_ACTION             "submit" (open, submit one input, wait) or "recover" (open, recover, wait)
 *   HF_TOOL, HF_ARGS      the MCP tool the agent calls after listing the tools, and its arguments (JSON)
 *   HF_REPLAY             the MCP tools that ask for replay, comma-separated
 *   HF_SAFE               the safe list as JSON, holdfast tool name → pin
 *   HF_RECONCILE          "put": the test server's `put` gets a reconciler that reads `get` (HF_MCP_STORE is passed on)
 *   HOLDFAST_CRASH_AT / HOLDFAST_CRASH_CALL   crash points (SIGKILL)
 * Prints one JSON object per line: the pins the server's tools have now, the preflight findings,
 * then what happened.
 */
import { type McpReconciler, mcpToolset } from "../../src/adapters/integrations/mcp/index.js";
import { defineAgent, openRuntime } from "../../src/index.js";
import { connect, filesystemServer, testServer } from "./mcp.js";

const env = process.env;

/**
 * The test server keeps, with each stored value, the idempotency key of the request that stored
 * it: `get` proves whether this attempt's `put` ran. Absent is proof it did not, here: the server
 * that received the request was a child of the killed process and died with it.
 */
const putReconciler: McpReconciler = {
  probe: (args) => ({ key: args.key }),
  check: async ({ args, read, idempotencyKey }) => {
    const answer = await read("get", { key: String(args.key) });
    const first = answer.content[0];
    const stored = JSON.parse(first?.type === "text" ? first.text : "{}") as { found: boolean; by?: string };
    if (!stored.found) return { outcome: "not-completed", evidence: { key: args.key, stored: false } };
    if (stored.by === idempotencyKey)
      return {
        outcome: "completed",
        result: { content: [{ type: "text", text: `stored ${String(args.key)}` }] },
        evidence: { key: args.key, storedBy: stored.by },
      };
    return { outcome: "unknown", evidence: { key: args.key, storedBy: stored.by ?? null } };
  },
};
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

const main = async () => {
  const server =
    env.HF_SERVER === "test"
      ? testServer(
          Object.fromEntries(
            ["HF_MCP_VERSION", "HF_MCP_SCHEMA", "HF_MCP_WITNESS", "HF_MCP_STORE"].flatMap((k) =>
              env[k] ? [[k, env[k] as string]] : [],
            ),
          ),
        )
      : filesystemServer(env.HF_ROOT!);
  const { client } = await connect(server);
  const replay = (env.HF_REPLAY ?? "").split(",").filter(Boolean);
  const toolset = await mcpToolset(client, {
    prefix: "mcp",
    replay,
    ...(env.HF_RECONCILE === "put" ? { reconcilers: { put: putReconciler } } : {}),
  });
  out({ kind: "pins", pins: Object.fromEntries(toolset.tools.map((t) => [t.name, t.pin])) });

  const agent = defineAgent({
    name: "mcp-caller",
    version: "1",
    run: async (turn, input: { tool: string; args: Record<string, unknown> }) => {
      await toolset.listTools(turn);
      return toolset.callTool(turn, input.tool, input.args);
    },
  });
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [agent],
    tools: toolset.definitions,
    allowlist: JSON.parse(env.HF_SAFE ?? "{}") as Record<string, string>,
    recovery: { onOpen: false },
  });
  out({ kind: "preflight", findings: runtime.preflight });
  if (env.HF_ACTION === "submit") {
    const handle = await runtime.submit({
      chatId: "chat",
      inputId: "m1",
      agent: "mcp-caller",
      content: { tool: env.HF_TOOL!, args: JSON.parse(env.HF_ARGS ?? "{}") },
    });
    out({ kind: "submitted", runId: handle.runId });
    out({ kind: "result", result: await handle.result });
  } else {
    const report = await runtime.recover();
    const { done, ...rest } = report;
    out({ kind: "recovery", report: rest });
    out({ kind: "recovered", results: await done });
  }
  await runtime.close();
  await client.close();
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
