import { dirname } from "node:path";
/**
 * A holdfast process whose agent runs one command in the terminal tool, for the terminal crash
 * tests. Configured by environment:
 *   HF_DB        the journal file
 *   HF_WORK      the terminal's work folder (its receipts go to HF_WORK.receipts)
 *   HF_WITNESS   a file the command appends one line to per execution
 *   HF_GATE      when set, the command waits until this file exists before it ends
 *   HF_NOHUP     when set, the waiting step ignores SIGHUP (it outlives its session's hang-up)
 *   HF_ACTION    "submit" (open, recover, submit one input, wait) or "recover" (open, recover, wait)
 *   HOLDFAST_CRASH_AT / HOLDFAST_CRASH_CALL   as for any holdfast process
 * Prints one JSON object per line on stdout.
 */
import { makeTerminalTool } from "../../src/adapters/integrations/tools/index.js";
import { defineAgent, openRuntime } from "../../src/index.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);
const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;

const terminal = makeTerminalTool(env.HF_WORK!);

const wait = env.HF_GATE
  ? `while [ ! -e ${quote(env.HF_GATE)} ] && [ -d ${quote(dirname(env.HF_GATE))} ]; do sleep 0.05; done`
  : "true";
const command = [
  `echo ran >>${quote(env.HF_WITNESS!)}`,
  env.HF_NOHUP ? `sh -c ${quote(`trap '' HUP; ${wait}`)}` : wait,
  'echo "done $HOLDFAST_IDEMPOTENCY_KEY"',
  "exit 4",
].join("; ");

const agent = defineAgent({
  name: "typist",
  version: "1",
  run: async (turn) => {
    const done = await turn.tool(terminal, { command });
    return { exitCode: done.exitCode, stdout: done.stdout, opened: done.session.opened };
  },
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [agent],
    tools: [terminal],
    recovery: { leaseMs: 20_000 },
  });
  const { done, ...report } = runtime.recovery as typeof runtime.recovery & { done?: Promise<unknown> };
  out({ kind: "recovery", report });
  if (done) out({ kind: "recovered", results: await done });
  if (env.HF_ACTION === "submit") {
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "typist", content: {} });
    out({ kind: "submitted", runId: handle.runId });
    out({ kind: "result", result: await handle.result });
  }
  await runtime.close();
  await terminal.close();
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
