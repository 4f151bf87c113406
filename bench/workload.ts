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

/**
 * The no-op tool with a retry policy and a timeout declared (DESIGN §13) that never come into
 * play: the call succeeds at once, so what it adds is the declaration's own cost (the policy
 * recorded in each intent, the timer armed and cleared around the effect).
 */
export const declaredNoopTool = defineTool({
  name: "bench.noop-declared",
  description: "does nothing, with a retry policy and a timeout that never come into play",
  args: Schema.Struct({ i: Schema.Number }),
  disposition: "hold",
  retry: { attempts: 3, backoff: { initialMs: 100, maxMs: 1_000, factor: 2, jitter: 0.2 } },
  timeoutMs: 30_000,
  run: async () => null,
});

/** Where {@link featuresAgent} reports each call: its latency and CPU time in µs, and which tool it used. */
let featureSink: ((micros: number, cpuMicros: number, declared: boolean) => void) | null = null;

export const setFeatureSink = (
  sink: ((micros: number, cpuMicros: number, declared: boolean) => void) | null,
): void => {
  featureSink = sink;
};

export interface FeaturesInput {
  readonly calls: number;
  /** Whether the first call uses {@link declaredNoopTool}; the calls then alternate. */
  readonly declaredFirst: boolean;
}

/**
 * {@link benchAgent}'s calls, alternating call by call between {@link noopTool} and
 * {@link declaredNoopTool}, so both see the same moment of a shared machine.
 */
export const featuresAgent = defineAgent({
  name: "bench.features",
  version: "1",
  run: async (turn, input: FeaturesInput) => {
    for (let i = 0; i < input.calls; i++) {
      const declared = (i % 2 === 0) === input.declaredFirst;
      const cpu = process.cpuUsage();
      const started = process.hrtime.bigint();
      await turn.tool(declared ? declaredNoopTool : noopTool, { i });
      const micros = Number(process.hrtime.bigint() - started) / 1000;
      const used = process.cpuUsage(cpu);
      featureSink?.(micros, used.user + used.system, declared);
    }
    return input.calls;
  },
});

/** An agent that sleeps on a durable timer (`turn.sleep`), then returns: a run waiting, holding no process. */
export const sleeperAgent = defineAgent({
  name: "bench.sleeper",
  version: "1",
  run: async (turn, input: { readonly ms: number }) => {
    await turn.sleep(input.ms);
    return input.ms;
  },
});
