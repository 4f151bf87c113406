/**
 * A real holdfast process for the approval crash tests. Configured by environment:
 *   HF_DB        journal (libSQL file or PostgreSQL URL)
 *   HF_WITNESS   witness file: one line per effect that ran
 *   HF_MODE      "submit": admit a run whose tool call awaits approval and print `{kind: "waiting",
 *                runId, version}` once it parked; "approve": approve HF_RUN's awaiting call (with
 *                HOLDFAST_CRASH_AT=after-approval the process dies by SIGKILL right after the commit)
 *                and print `{kind: "approved"}`; "serve": only open the runtime (its wake loop wakes
 *                due runs; with HOLDFAST_CRASH_AT=after-approval-wake it dies right after the wake-up
 *                committed) and print `{kind: "open"}`.
 *   HF_TOOL      "refund": the run's call is `refund` (editable, a retry policy, attempt 2 fails
 *                definitely) instead of `pay`
 *   HF_ARGS      "approve": the edited arguments (JSON)
 * "submit" and "serve" stay up until the test kills them with SIGKILL.
 */
import { appendFileSync } from "node:fs";
import * as Schema from "effect/Schema";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

export const pay = defineTool({
  name: "pay",
  description: "Pays an invoice",
  args: Schema.Struct({ invoice: Schema.String }),
  approval: "required",
  run: async ({ invoice }) => {
    appendFileSync(env.HF_WITNESS!, `paid ${invoice}\n`);
    return `paid ${invoice}`;
  },
});

/** An editable refund with a retry policy whose attempt 2 fails definitely (HF_TOOL=refund). */
export const refund = defineTool({
  name: "refund",
  description: "Refunds a customer",
  args: Schema.Struct({ amount: Schema.Number }),
  approval: { editable: true },
  retry: { attempts: 4, backoff: { initialMs: 10, maxMs: 20, factor: 1, jitter: 0 } },
  run: async ({ amount }, { attempt }) => {
    appendFileSync(env.HF_WITNESS!, `refund ${amount} attempt ${attempt}\n`);
    if (attempt === 2) throw new DefiniteFailure("the bank refused it (503, nothing done)");
    return `refunded ${amount}`;
  },
});

export const refunder = defineAgent({
  name: "refunder",
  version: "1",
  run: async (turn) => turn.tool(refund, { amount: 500 }),
});

export const payer = defineAgent({
  name: "payer",
  version: "1",
  run: async (turn) => turn.tool(pay, { invoice: "INV-1" }),
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_DB!,
    // The approver has no agents: it wakes nothing, so the wake-up is left to the others.
    agents: env.HF_MODE === "approve" ? [] : [payer, refunder],
    tools: [pay, refund],
    tracing: false,
    recovery: { leaseMs: 3_000, onOpen: env.HF_MODE !== "approve" },
  });
  if (env.HF_MODE === "submit") {
    const agent = env.HF_TOOL === "refund" ? "refunder" : "payer";
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent, content: null });
    const result = await handle.result;
    out({ kind: result.status, runId: handle.runId });
  } else if (env.HF_MODE === "approve") {
    const events = await runtime.events(env.HF_RUN!);
    const sent = await runtime.approve(env.HF_RUN!, 0, {
      by: "ada",
      note: "ok",
      basedOnVersion: events.at(-1)!.version,
      ...(env.HF_ARGS ? { args: JSON.parse(env.HF_ARGS) } : {}),
    });
    out({ kind: "approved", sent });
    await runtime.close();
    return;
  } else out({ kind: "open", workerId: runtime.workerId });
  setInterval(() => undefined, 1_000);
};

if (env.HF_DB) {
  main().catch((error) => {
    out({ kind: "crash", message: String(error?.stack ?? error) });
    process.exit(1);
  });
}
