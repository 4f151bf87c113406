/**
 * A real holdfast process for the signal crash tests. Configured by environment:
 *   HF_DB        journal (libSQL file or PostgreSQL URL)
 *   HF_WITNESS   witness file: one line per effect that ran
 *   HF_MODE      "submit": admit a run that waits for the signal "go" and print `{kind: "waiting",
 *                runId}` once it parked; "signal": send "go" to HF_RUN (with HOLDFAST_CRASH_AT=after-signal
 *                the process dies by SIGKILL right after the commit) and print `{kind: "signalled"}`;
 *                "serve": only open the runtime (its wake loop wakes due runs) and print `{kind: "open"}`.
 * "submit" and "serve" stay up until the test kills them with SIGKILL.
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

export const listener = defineAgent({
  name: "listener",
  version: "1",
  run: async (turn) => {
    await turn.tool(step, { label: "before" });
    const got = await turn.waitFor<{ n: number }>("go");
    await turn.tool(step, { label: got.timedOut ? "timed-out" : `after ${got.payload.n}` });
    return got;
  },
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_DB!,
    // The sender has no agents: it wakes nothing, so the wake-up is left to the others.
    agents: env.HF_MODE === "signal" ? [] : [listener],
    tools: [step],
    tracing: false,
    recovery: { leaseMs: 3_000, onOpen: env.HF_MODE !== "signal" },
  });
  if (env.HF_MODE === "submit") {
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "listener", content: null });
    const result = await handle.result;
    out({ kind: result.status, runId: handle.runId });
  } else if (env.HF_MODE === "signal") {
    const sent = await runtime.signal(env.HF_RUN!, "go", { n: 7 }, { signalId: "s-1", by: "test" });
    out({ kind: "signalled", sent });
    await runtime.close();
    return;
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
