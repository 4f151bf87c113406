/**
 * A holdfast process that completes runs and is then SIGKILLed, leaving its journal with a WAL and
 * a -shm behind (the state a crashed agent leaves). Configured by environment:
 *   HF_DB      the journal file
 *   HF_RUNS    how many runs to complete before the SIGKILL (default 2)
 *   HF_BYTES   bytes of output per run (default 1024), to grow the WAL
 * Prints one JSON line per completed run (`{ kind: "done", runId }`).
 */
import { defineAgent, openRuntime } from "../../src/index.js";

const env = process.env;

const echo = defineAgent({
  name: "echo",
  version: "1",
  run: async (turn, input: { n: number; bytes: number }) => {
    const text = await turn.model("write", { n: input.n }, async () => "x".repeat(input.bytes));
    return { n: input.n, text };
  },
});

const main = async () => {
  const runtime = await openRuntime({ store: env.HF_DB!, agents: [echo] });
  const bytes = Number(env.HF_BYTES ?? 1024);
  for (let n = 0; n < Number(env.HF_RUNS ?? 2); n++) {
    const handle = await runtime.submit({
      chatId: `c${n}`,
      inputId: "1",
      agent: "echo",
      content: { n, bytes },
    });
    await handle.result;
    process.stdout.write(`${JSON.stringify({ kind: "done", runId: handle.runId })}\n`);
  }
  // Dies with the journal open: no checkpoint, the WAL and -shm stay.
  process.kill(process.pid, "SIGKILL");
};

void main();
