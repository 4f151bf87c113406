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
