// For the replay test of a run waiting for a scheduled retry: a tool that always fails, retried by
// its policy after 90 s. `retry-record.ts` records such a run in a child process and exits.
import { Schema } from "effect";
import { DefiniteFailure, defineAgent, defineTool } from "../../src/index.js";

export const tool = defineTool({
  name: "busy",
  args: Schema.Struct({ x: Schema.Number }),
  retry: { attempts: 3, backoff: { initialMs: 90_000, maxMs: 90_000, jitter: 0 } },
  run: async () => {
    (globalThis as { tries?: number }).tries = ((globalThis as { tries?: number }).tries ?? 0) + 1;
    throw new DefiniteFailure("busy");
  },
});
export const agents = [
  defineAgent({ name: "retrier", version: "1", run: async (turn) => turn.tool(tool, { x: 1 }) }),
];
export const tools = [tool];
