// The README's "Approvals" example, compiled and run by test/examples.test.ts.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Schema } from "effect";
import { ApprovalDenied, defineAgent, defineTool, openRuntime } from "../src/index.js";

const paid: string[] = [];

export const pay = defineTool({
  name: "pay",
  description: "Pays a supplier's invoice from the company account",
  args: Schema.Struct({ invoice: Schema.String, amount: Schema.Number }),
  // Payments over 100 wait for a person; the approver may lower the amount.
  approval: { when: (args) => args.amount > 100, editable: true },
  run: async ({ invoice, amount }) => {
    paid.push(`${invoice}: ${amount}`);
    return { invoice, amount, paid: true };
  },
});

export const payer = defineAgent({
  name: "payer",
  version: "1",
  run: async (turn, input: { invoice: string; amount: number }) => {
    try {
      // The run parks here until someone decides; nothing is paid before an approval is durable.
      return await turn.tool(pay, input);
    } catch (error) {
      if (error instanceof ApprovalDenied) return { paid: false, why: error.note, by: error.by };
      throw error;
    }
  },
});

export const approvalExample = async (store: string) => {
  const runtime = await openRuntime({ store, agents: [payer], tools: [pay] });
  const ended = async (runId: string) => {
    while ((await runtime.run(runId))?.status === "waiting") await new Promise((r) => setTimeout(r, 50));
    return runtime.wait(runId);
  };
  const versionOf = async (runId: string) => (await runtime.events(runId)).at(-1)!.version;

  const big = await runtime.submit({
    chatId: "ap",
    inputId: "inv-1",
    agent: "payer",
    content: { invoice: "INV-1", amount: 900 },
  });
  const parked = await big.result; // { status: "waiting", wait: "approval", callId: "<runId>/0", … }
  // From any process (or `holdfast approve`, POST /api/runs/:id/calls/0/approve, the panel),
  // on the version looked at: a stale one is refused and writes nothing.
  await runtime.approve(big.runId, 0, {
    by: "ada",
    note: "half now, half on delivery",
    basedOnVersion: await versionOf(big.runId),
    args: { invoice: "INV-1", amount: 450 },
  });
  const approved = await ended(big.runId);

  const odd = await runtime.submit({
    chatId: "ap",
    inputId: "inv-2",
    agent: "payer",
    content: { invoice: "INV-2", amount: 5000 },
  });
  await odd.result;
  await runtime.deny(odd.runId, 0, {
    by: "bob",
    note: "not a supplier we know",
    basedOnVersion: await versionOf(odd.runId),
  });
  const denied = await ended(odd.runId);
  await runtime.close();
  return { parked: parked.status, approved, denied, paid };
};

// `npx tsx examples/approval.ts` runs it on a fresh journal in a temp folder and prints the result.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const store = join(mkdtempSync(join(tmpdir(), "holdfast-approval-")), "journal.db");
  console.log(JSON.stringify(await approvalExample(store), null, 2));
}
