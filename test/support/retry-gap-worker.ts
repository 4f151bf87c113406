/**
 * A real holdfast process for the crash test of a policy retry lost between `call.failed` and
 * `retry.scheduled` (decision 0046). Configured by environment:
 *   HF_DB, HF_WITNESS   journal; witness file (one JSON line per attempt that started)
 *   HF_ACTION           "submit" (open, recover, submit one input, wait) or "recover" (open, recover, wait)
 *   HF_ATTEMPTS         the policy's attempts in all
 *   HF_STATUS           the status each failure carries (the policy's `when` retries 503 only)
 *   HF_SUCCEED_AT       the attempt that succeeds (0: none)
 *   HOLDFAST_CRASH_AT   "after-failed": SIGKILL once a definite failure is committed
 *   HF_DECLINE_LIVE     "1": the policy's `when` declines every failure in this process
 *   HF_THEN             "1": after a failure that stands, the agent calls the `then` tool
 * Each failure asks for a 1 s wait (`retryAfter: 1` in its details). The agent returns
 * `{ callFailed }` when the call's failure stands. Prints one JSON object per line.
 */
import { appendFileSync } from "node:fs";
import * as Schema from "effect/Schema";
import { CallFailed, DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);
const status = Number(env.HF_STATUS ?? 503);
const succeedAt = Number(env.HF_SUCCEED_AT ?? 0);

const flaky = defineTool({
  name: "flaky",
  args: Schema.Struct({ label: Schema.String }),
  retry: {
    attempts: Number(env.HF_ATTEMPTS ?? 3),
    backoff: { initialMs: 60_000, maxMs: 60_000, factor: 1, jitter: 0 },
    // Reads the failure's details: re-execution must give it the recorded ones.
    when: (failure) =>
      env.HF_DECLINE_LIVE !== "1" && (failure.details as { status?: unknown } | undefined)?.status === 503,
  },
  run: async ({ label }, { attempt }) => {
    appendFileSync(env.HF_WITNESS!, `${JSON.stringify({ label, attempt, startedAt: Date.now() })}\n`);
    if (attempt !== succeedAt) throw new DefiniteFailure(`${status} refused`, { status, retryAfter: 1 });
    return { label, attempt };
  },
});

/** What the agent does after a failure that stands (HF_THEN): a call of its own, witnessed. */
const then = defineTool({
  name: "then",
  args: Schema.Struct({}),
  run: async () => {
    appendFileSync(
      env.HF_WITNESS!,
      `${JSON.stringify({ label: "then", attempt: 1, startedAt: Date.now() })}\n`,
    );
    return "went on";
  },
});

const agent = defineAgent({
  name: "gap",
  version: "1",
  // A failure that stands reaches the agent as CallFailed: it returns what it saw.
  run: async (turn, input: { label: string }) => {
    try {
      return await turn.tool(flaky, { label: input.label });
    } catch (error) {
      if (error instanceof CallFailed)
        return env.HF_THEN === "1"
          ? { callFailed: error.error.message, wentOn: await turn.tool(then, {}) }
          : { callFailed: error.error.message };
      throw error;
    }
  },
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [agent],
    tools: [flaky, then],
    recovery: { leaseMs: 3_000, onOpen: true },
  });
  const { done, ...report } = runtime.recovery as typeof runtime.recovery & { done?: Promise<unknown> };
  out({ kind: "recovery", report });
  if (done) out({ kind: "recovered", results: await done });
  if (env.HF_ACTION === "submit") {
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "gap", content: { label: "x" } });
    out({ kind: "submitted", runId: handle.runId });
    out({ kind: "result", result: await handle.result });
  }
  await runtime.close();
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
