// The README's "Waiting" example for signals, compiled and run by test/examples.test.ts.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { defineAgent, openRuntime } from "../src/index.js";

export const refund = defineAgent({
  name: "refund",
  version: "1",
  run: async (turn, input: { order: string }) => {
    // Parks until someone sends "approval" to this run, or a day passes.
    const answer = await turn.waitFor<{ ok: boolean }>("approval", { timeoutMs: 86_400_000 });
    if (answer.timedOut) return { order: input.order, refunded: false, why: "no answer in a day" };
    return { order: input.order, refunded: answer.payload.ok, approval: answer.signalId };
  },
});

export const signalExample = async (store: string) => {
  const runtime = await openRuntime({ store, agents: [refund] });
  const run = await runtime.submit({
    chatId: "order-7",
    inputId: "m1",
    agent: "refund",
    content: { order: "7" },
  });
  const parked = await run.result; // { status: "waiting", wait: "signal", name: "approval", wakesAt: "…" }
  // From any process (or `holdfast signal`, or POST /api/runs/:id/signals); the same signalId
  // again is accepted and writes nothing.
  const sent = await runtime.signal(run.runId, "approval", { ok: true }, { signalId: "ticket-7", by: "ada" });
  const again = await runtime.signal(
    run.runId,
    "approval",
    { ok: true },
    { signalId: "ticket-7", by: "ada" },
  );
  while ((await runtime.run(run.runId))?.status === "waiting") await new Promise((r) => setTimeout(r, 50));
  const done = await runtime.wait(run.runId);
  await runtime.close();
  return {
    parked: parked.status,
    sent: sent.accepted,
    recordedAgain: again.accepted && again.recorded,
    done,
  };
};

// `npx tsx examples/signal.ts` runs it on a fresh journal in a temp folder and prints the result.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const store = join(mkdtempSync(join(tmpdir(), "holdfast-signal-")), "journal.db");
  console.log(JSON.stringify(await signalExample(store), null, 2));
}
