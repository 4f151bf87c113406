import { join } from "node:path";
import { openRuntime, type Runtime } from "../../src/index.js";
import { benchAgent, noopTool } from "../workload.js";

/** A runtime on a fresh journal in `folder`, with the bench's agent and no-op tool. */
export const openBenchRuntime = (folder: string, file = "journal.db"): Promise<Runtime> =>
  openRuntime({
    store: join(folder, file),
    agents: [benchAgent],
    tools: [noopTool],
    recovery: { onOpen: false },
  });

/** Submit one bench run and wait for it; anything but `completed` is a broken measurement. */
export const runToCompletion = async (runtime: Runtime, chatId: string, calls: number): Promise<string> => {
  const handle = await runtime.submit({
    chatId,
    inputId: "input",
    agent: benchAgent.name,
    content: { calls },
  });
  const result = await handle.result;
  if (result.status !== "completed") {
    throw new Error(
      `bench run ${handle.runId} ended ${result.status}, not completed: ${JSON.stringify(result)}`,
    );
  }
  return handle.runId;
};

/** What {@link measuredRuns} measured: the journaled events, the wall time and the process's CPU time. */
export interface MeasuredRuns {
  readonly events: number;
  readonly wallMs: number;
  readonly cpuMicros: number;
}

/**
 * `runs` bench runs of 20 calls to warm up, then `runs` runs of `calls` calls together, measured;
 * `measuring` is told when the measured part starts and ends (a tool's hooks count only then).
 */
export const measuredRuns = async (
  runtime: Runtime,
  runs: number,
  calls: number,
  measuring: (on: boolean) => void,
): Promise<MeasuredRuns> => {
  await Promise.all(Array.from({ length: runs }, (_, i) => runToCompletion(runtime, `warm-${i}`, 20)));
  measuring(true);
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(Array.from({ length: runs }, (_, i) => runToCompletion(runtime, `run-${i}`, calls)));
  const used = process.cpuUsage(cpu);
  const wallMs = performance.now() - started;
  measuring(false);
  // Per run: the admission, an intent and an outcome per call, the completion.
  return { events: runs * (calls * 2 + 2), wallMs, cpuMicros: used.user + used.system };
};
