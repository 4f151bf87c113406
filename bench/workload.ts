import { Schema } from "effect";
import { defineAgent, defineTool } from "../src/index.js";

/**
 * Where the agent reports each call's latency. A module-level hook keeps the agent deterministic
 * (the journal never sees it) while letting a section time calls from inside the run.
 */
let callSink: ((micros: number) => void) | null = null;

export const setCallSink = (sink: ((micros: number) => void) | null): void => {
  callSink = sink;
};

/** The no-op tool: the effect is free, so what is measured is the journal's cost alone. */
export const noopTool = defineTool({
  name: "bench.noop",
  description: "does nothing; the benchmark measures the journaling around it",
  args: Schema.Struct({ i: Schema.Number }),
  // `hold` keeps recovery's classification independent of any replay allowlist.
  disposition: "hold",
  run: async () => null,
});

export interface BenchInput {
  readonly calls: number;
}

/** An agent making `calls` sequential no-op tool calls; recovery fixtures are shaped after it. */
export const benchAgent = defineAgent({
  name: "bench.agent",
  version: "1",
  run: async (turn, input: BenchInput) => {
    for (let i = 0; i < input.calls; i++) {
      const started = process.hrtime.bigint();
      await turn.tool(noopTool, { i });
      callSink?.(Number(process.hrtime.bigint() - started) / 1000);
    }
    return input.calls;
  },
});
