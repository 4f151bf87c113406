/**
 * A real holdfast process for crash tests. Configured by environment:
 *   HF_DB, HF_WITNESS     journal file and witness file
 *   HF_ACTION             "submit" (open, recover, submit one input, wait) or "recover" (open, recover, wait)
 *   HF_CHAT, HF_INPUT     ids for submit; HF_PREFIX the witness label prefix
 *   HF_VARIANT            "original" | "changed" (the agent's code version)
 *   HF_START_AT           epoch ms to wait for before submitting (two processes racing)
 *   HF_HOLD_MS            when set, the agent's first call is a model call that sleeps this long
 *   HOLDFAST_CRASH_AT / HOLDFAST_CRASH_CALL   crash points (SIGKILL)
 * Prints one JSON object per line on stdout.
 */
import { defineAgent, openRuntime } from "../../src/index.js";
import { makeRecordTool, makeStepsAgent } from "./witness.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

const holdMs = Number(env.HF_HOLD_MS ?? 0);
const slow = defineAgent({
  name: "slow",
  version: "1",
  run: async (turn, input: { prefix: string }) => {
    await turn.model(
      "think",
      { ms: holdMs },
      () => new Promise((r) => setTimeout(() => r("thought"), holdMs)),
    );
    return turn.tool("record", { label: `${input.prefix}-slow` });
  },
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [makeStepsAgent(env.HF_VARIANT === "changed" ? "changed" : "original"), slow],
    tools: [makeRecordTool(env.HF_WITNESS!)],
    recovery: { leaseMs: Number(env.HF_LEASE_MS ?? 2000) },
  });
  const { done, ...report } = runtime.recovery as typeof runtime.recovery & { done?: Promise<unknown> };
  out({ kind: "recovery", report });
  if (done) out({ kind: "recovered", results: await done });
  if (env.HF_ACTION === "submit") {
    if (env.HF_START_AT) {
      const wait = Number(env.HF_START_AT) - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    try {
      const handle = await runtime.submit({
        chatId: env.HF_CHAT!,
        inputId: env.HF_INPUT!,
        agent: holdMs > 0 ? "slow" : "steps",
        content: { prefix: env.HF_PREFIX ?? "x" },
      });
      out({ kind: "submitted", runId: handle.runId, reused: handle.reused });
      out({ kind: "result", result: await handle.result });
    } catch (error) {
      const e = error as { _tag?: string; message?: string; runId?: string };
      out({ kind: "error", tag: e._tag ?? "Error", message: e.message, runId: e.runId ?? null });
    }
  }
  await runtime.close();
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
