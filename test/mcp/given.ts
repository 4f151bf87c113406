import { join } from "node:path";
import { afterEach } from "vitest";
import {
  type McpToolset,
  type McpToolsetOptions,
  mcpToolset,
} from "../../src/adapters/integrations/mcp/index.js";
import type { AnyEvent, EventOf } from "../../src/events/index.js";
import { defineAgent, openRuntime, type Runtime, type Turn } from "../../src/index.js";
import { connect, type ServerCommand } from "../support/mcp.js";

type Connection = Awaited<ReturnType<typeof connect>>;

/** Real servers started by a test, closed after it (a server killed by the test is closed already). */
export const useServers = () => {
  const open: Connection[] = [];
  const runtimes: Runtime[] = [];
  afterEach(async () => {
    for (const runtime of runtimes.splice(0)) await runtime.close();
    for (const { client } of open.splice(0)) await client.close().catch(() => undefined);
  });
  return {
    /** Given a real server over stdio and a toolset on it. */
    toolset: async (server: ServerCommand, options: McpToolsetOptions = {}) => {
      const connection = await connect(server);
      open.push(connection);
      return { ...connection, toolset: await mcpToolset(connection.client, options) };
    },
    /** Given a runtime whose agent `agent` runs `run`, with the toolset registered. */
    runtime: async (
      dir: string,
      toolset: McpToolset,
      run: (turn: Turn, input: unknown) => Promise<unknown>,
      allowlist: Readonly<Record<string, string>> = {},
    ) => {
      const runtime = await openRuntime({
        store: join(dir, "journal.db"),
        agents: [defineAgent({ name: "agent", version: "1", run })],
        tools: toolset.definitions,
        allowlist,
        recovery: { onOpen: false },
      });
      runtimes.push(runtime);
      return runtime;
    },
  };
};

let submitted = 0;

/** When the agent runs once, in a chat of its own: its result and the run's events. */
export const runOnce = async (runtime: Runtime, content: unknown = null) => {
  submitted += 1;
  const handle = await runtime.submit({
    chatId: `chat-${submitted}`,
    inputId: "m",
    agent: "agent",
    content,
  });
  const result = await handle.result;
  const events = (await runtime.events(handle.runId)).map((e) => e.event);
  return { runId: handle.runId, result, events };
};

export const intentsOf = (events: ReadonlyArray<AnyEvent>): EventOf<"call.intended">[] =>
  events.filter((e): e is EventOf<"call.intended"> => e.type === "call.intended");

export const outcomeOf = (events: ReadonlyArray<AnyEvent>, callId: string): AnyEvent | undefined =>
  events.find(
    (e) => (e.type === "call.completed" || e.type === "call.failed") && "callId" in e && e.callId === callId,
  );
