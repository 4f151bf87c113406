/**
 * A real holdfast process whose agent kills its own process at the same point every time: the
 * crash-loop tests start it again and again on one journal. Configured by environment:
 *   HF_STORE             the journal: a file path or a PostgreSQL URL
 *   HF_ACTION            "submit" (open, recover, submit one input, wait) or "recover" (open, recover, wait)
 *   HF_FIXED             "1": the agent no longer kills its process (the bug is fixed)
 *   HF_MAX_INTERRUPTIONS recovery.maxInterruptions (default: the runtime's)
 * Prints one JSON object per line on stdout.
 */
import * as Schema from "effect/Schema";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

const note = defineTool({
  name: "note",
  args: Schema.Struct({ step: Schema.String }),
  run: async ({ step }) => ({ noted: step }),
});

/** Records one outcome, then dies right after it — served from the journal on every re-execution. */
const looping = defineAgent({
  name: "looping",
  version: "1",
  run: async (turn) => {
    const noted = await turn.tool("note", { step: "before the crash" });
    if (env.HF_FIXED !== "1") process.kill(process.pid, "SIGKILL");
    return noted;
  },
});

const main = async () => {
  const max = env.HF_MAX_INTERRUPTIONS;
  const runtime = await openRuntime({
    store: env.HF_STORE!,
    agents: [looping],
    tools: [note],
    allowlist: {},
    recovery: { leaseMs: 3000, ...(max ? { maxInterruptions: Number(max) } : {}) },
  });
  const { done, ...report } = runtime.recovery as typeof runtime.recovery & { done?: Promise<unknown> };
  out({ kind: "recovery", workerId: runtime.workerId, report });
  if (done) out({ kind: "recovered", results: await done });
  if (env.HF_ACTION === "submit") {
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "looping", content: null });
    out({ kind: "submitted", runId: handle.runId });
    out({ kind: "result", result: await handle.result });
  }
  await runtime.close();
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
