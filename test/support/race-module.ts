/**
 * For `holdfast worker --module test/support/race-module.ts`: the shell tool with, in one process
 * only (`HF_PAUSE_MS`), a pause right after the runtime's lease check and before the tool's own
 * start receipt — a long GC or a stopped VM, with no heartbeat either. `HF_WORK` and `HF_WITNESS`
 * place it.
 */
import { makeShellTool } from "../../src/adapters/integrations/tools/shellTool.js";
import { defineAgent, defineTool } from "../../src/index.js";

const work = process.env.HF_WORK ?? "";
const shell = makeShellTool(work);

const pausingShell = defineTool({
  name: "shell",
  args: shell.args,
  ...(shell.reconciler ? { reconciler: shell.reconciler } : {}),
  source: "race-shell-v1",
  run: async (args, context) => {
    const pause = Number(process.env.HF_PAUSE_MS ?? 0);
    if (pause > 0) {
      const until = Date.now() + pause;
      while (Date.now() < until) {
        // The whole process is stopped: no timers, no heartbeat.
      }
    }
    return shell.run(args, context);
  },
});

export const tools = [pausingShell];
export const agents = [
  defineAgent({
    name: "once",
    version: "1",
    run: async (turn) =>
      turn.tool(pausingShell, {
        command: `echo "charged $HOLDFAST_IDEMPOTENCY_KEY" >> ${JSON.stringify(process.env.HF_WITNESS ?? "")}`,
      }),
  }),
];
