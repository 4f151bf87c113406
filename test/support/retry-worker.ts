/**
 * A real holdfast process for the durable-backoff crash test. Configured by environment:
 *   HF_DB, HF_WITNESS   journal file; witness file (one JSON line per attempt that started)
 *   HF_ACTION           "submit" (open, recover, submit one input, wait) or "recover" (open, recover, wait)
 *   HOLDFAST_CRASH_AT   "during-backoff": SIGKILL once the retry's due time is committed
 * The tool `busy` fails definitely on its first attempt; its policy retries it after 6 s (longer than recovery takes to see the owner dead).
 * Prints one JSON object per line on stdout.
 */
import { appendFileSync } from "node:fs";
import * as Schema from "effect/Schema";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

const busy = defineTool({
  name: "busy",
  args: Schema.Struct({ label: Schema.String }),
  retry: { attempts: 3, backoff: { initialMs: 6_000, maxMs: 6_000, factor: 1, jitter: 0 } },
  run: async ({ label }, { attempt }) => {
    appendFileSync(env.HF_WITNESS!, `${JSON.stringify({ label, attempt, startedAt: Date.now() })}\n`);
    if (attempt === 1) throw new DefiniteFailure("503 the server is busy", { statusCode: 503 });
    return { label, attempt };
  },
});

const persistent = defineAgent({
  name: "persistent",
  version: "1",
  run: async (turn, input: { label: string }) => turn.tool(busy, { label: input.label }),
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [persistent],
    tools: [busy],
    recovery: { leaseMs: 3_000, onOpen: true },
  });
  const { done, ...report } = runtime.recovery as typeof runtime.recovery & { done?: Promise<unknown> };
  out({ kind: "recovery", report });
  if (done) out({ kind: "recovered", results: await done });
  if (env.HF_ACTION === "submit") {
    const handle = await runtime.submit({
      chatId: "c",
      inputId: "i",
      agent: "persistent",
      content: { label: "x" },
    });
    out({ kind: "submitted", runId: handle.runId });
    out({ kind: "result", result: await handle.result });
  }
  await runtime.close();
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
