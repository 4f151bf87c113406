/**
 * A real holdfast process for the queue crash tests. Configured by environment:
 *   HF_DB, HF_WITNESS   journal (file or PostgreSQL URL); witness file (one line per real effect)
 *   HF_ACTION           "submit": open, queue HF_INPUTS inputs in chat `c` (the first is admitted at once
 *                       and waits until every input is queued), then wait for the chat to drain;
 *                       "recover": open (recovery runs), wait for the chat to drain
 *   HF_INPUTS           how many inputs to submit (default 5)
 *   HOLDFAST_CRASH_AT   a crash point: after-outcome, before-queue-admit, after-queue-admit, …
 * Each run makes one witnessed call (`record`, label = its input id) and returns its label.
 * Prints one JSON object per line on stdout.
 */
import { defineAgent, openRuntime, type Runtime } from "../../src/index.js";
import { makeRecordTool } from "./witness.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

let allQueued!: () => void;
const queued = new Promise<void>((resolve) => {
  allQueued = resolve;
});
if (env.HF_ACTION !== "submit") allQueued();

const record = makeRecordTool(env.HF_WITNESS!);
const replier = defineAgent({
  name: "replier",
  version: "1",
  run: async (turn, input: { label: string }) => {
    await queued;
    return turn.tool(record, { label: input.label });
  },
});

/** Until the chat's queue is empty and it has no active run (a loop, not a timed assertion). */
const drained = async (runtime: Runtime): Promise<void> => {
  for (;;) {
    const queue = await runtime.queue("c");
    if (queue.items.length === 0 && queue.waitingFor === null) return;
    await new Promise((r) => setTimeout(r, 50));
  }
};

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [replier],
    tools: [record],
    recovery: { leaseMs: 3_000, onOpen: true },
  });
  const { done: _done, ...report } = runtime.recovery as typeof runtime.recovery & { done?: unknown };
  out({ kind: "recovery", report });
  if (env.HF_ACTION === "submit") {
    const count = Number(env.HF_INPUTS ?? 5);
    for (let i = 1; i <= count; i++) {
      const handle = await runtime.submit({
        chatId: "c",
        inputId: `m${i}`,
        agent: "replier",
        content: { label: `m${i}` },
        whenBusy: "queue",
      });
      out({ kind: "submitted", inputId: `m${i}`, queued: handle.queued === true });
    }
    allQueued();
  }
  await drained(runtime);
  out({ kind: "drained" });
  await runtime.close();
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
