/**
 * A real holdfast process for the durable sleep crash tests. Configured by environment:
 *   HF_DB        journal (libSQL file or PostgreSQL URL)
 *   HF_WITNESS   witness file: one line per effect that ran
 *   HF_MODE      "submit": admit a run that sleeps HF_SLEEP_MS, print `{kind: "waiting", runId}` once it
 *                parked; "serve": only open the runtime (its wake loop wakes due runs) and print
 *                `{kind: "open"}`.
 * Either way the process stays up until the test kills it with SIGKILL.
 */
import { appendFileSync } from "node:fs";
import * as Schema from "effect/Schema";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

export const step = defineTool({
  name: "step",
  args: Schema.Struct({ label: Schema.String }),
  run: async ({ label }) => {
    appendFileSync(env.HF_WITNESS!, `${label}\n`);
    return label;
  },
});

export const sleeper = defineAgent({
  name: "sleeper",
  version: "1",
  run: async (turn, input: { ms: number }) => {
    await turn.tool(step, { label: "before" });
    await turn.sleep(input.ms);
    await turn.tool(step, { label: "after" });
    return "awake";
  },
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [sleeper],
    tools: [step],
    tracing: false,
    recovery: { leaseMs: 3_000 },
  });
  if (env.HF_MODE === "submit") {
    const handle = await runtime.submit({
      chatId: "c",
      inputId: "i",
      agent: "sleeper",
      content: { ms: Number(env.HF_SLEEP_MS ?? 2_000) },
    });
    const result = await handle.result;
    out({ kind: result.status, runId: handle.runId });
  } else out({ kind: "open", workerId: runtime.workerId });
  // Stay up as an application would (the runtime's own timers do not keep a process alive).
  setInterval(() => undefined, 1_000);
};

if (env.HF_DB) {
  main().catch((error) => {
    out({ kind: "crash", message: String(error?.stack ?? error) });
    process.exit(1);
  });
}
