// The README's "Waiting" example for durable sleep, compiled and run by test/examples.test.ts.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { defineAgent, openRuntime } from "../src/index.js";

export const reminder = defineAgent({
  name: "reminder",
  version: "1",
  run: async (turn, input: { ms: number }) => {
    const asked = await turn.model("clock", {}, async () => new Date().toISOString());
    // The run parks here: no process holds it; any runtime with this agent wakes it when due.
    await turn.sleep(input.ms);
    return { asked, remindedAfterMs: input.ms };
  },
});

export const sleepExample = async (store: string) => {
  const runtime = await openRuntime({ store, agents: [reminder] });
  const run = await runtime.submit({
    chatId: "chat-1",
    inputId: "m1",
    agent: "reminder",
    content: { ms: 500 },
  });
  const parked = await run.result; // { status: "waiting", wait: "timer", wakesAt: "…" }
  // Woken by the runtime's wake loop (or any other runtime on this journal) once the time has come.
  while ((await runtime.run(run.runId))?.status === "waiting") await new Promise((r) => setTimeout(r, 50));
  const done = await runtime.wait(run.runId);
  await runtime.close();
  return { parked: parked.status, done };
};

// `npx tsx examples/sleep.ts` runs it on a fresh journal in a temp folder and prints the result.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const store = join(mkdtempSync(join(tmpdir(), "holdfast-sleep-")), "journal.db");
  console.log(JSON.stringify(await sleepExample(store), null, 2));
}
