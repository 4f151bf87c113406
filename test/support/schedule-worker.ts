/**
 * A real holdfast process for the schedule tests: opens the runtime with the `ticker` agent (whose
 * only effect appends `<runId> <inputId>` to HF_WITNESS), prints `{kind: "open", workerId}`, and ticks
 * schedules until the test kills it with SIGKILL. Configured by HF_DB and HF_WITNESS.
 */
import { appendFileSync } from "node:fs";
import * as Schema from "effect/Schema";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

export const witness = defineTool({
  name: "witness",
  args: Schema.Struct({ line: Schema.String }),
  run: async ({ line }) => {
    appendFileSync(env.HF_WITNESS!, `${line}\n`);
    return line;
  },
});

export const ticker = defineAgent({
  name: "ticker",
  version: "1",
  run: async (turn) => {
    await turn.tool(witness, { line: turn.runId });
    return "ticked";
  },
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [ticker],
    tools: [witness],
    tracing: false,
    recovery: { leaseMs: 3_000 },
  });
  out({ kind: "open", workerId: runtime.workerId });
  setInterval(() => undefined, 1_000);
};

if (env.HF_DB) {
  main().catch((error) => {
    out({ kind: "crash", message: String(error?.stack ?? error) });
    process.exit(1);
  });
}
